/**
 * Issue 18: doors without an approval channel (the app-service advertises approvals:false) let the model read and
 * write anywhere. Through the spawned service: the model's file tools are confined to the workspace, the state
 * root's settings.json is neither readable nor writable, a symlink out of the workspace leads nowhere, and a
 * directory listed in the global settings' tools.allowed_dirs is usable.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { test } from "node:test";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { fakeSettings, waitTerminal } from "../turns/helpers.js";

test("file tools reach anywhere through the app-service (issue 18): confined by default, allowed_dirs honoured", { timeout: 60_000 }, async () => {
  const fake = await startFakeProvider();
  const outside = mkdtempSync(join(tmpdir(), "berth-outside-"));
  const shared = mkdtempSync(join(tmpdir(), "berth-shared-"));
  writeFileSync(join(outside, "secret.txt"), "OUTSIDE-SECRET\n");
  writeFileSync(join(shared, "notes.txt"), "SHARED-NOTES\n");
  const svc = new ServiceProcess();
  const cwd = svc.cwd!;
  const escape = `escape-${basename(cwd)}.txt`;
  symlinkSync(outside, join(cwd, "link"));
  mkdirSync(svc.home, { recursive: true });
  const settings = { ...fakeSettings(fake.baseUrl), tools: { allowed_dirs: [shared] } };
  writeFileSync(join(svc.home, "settings.json"), JSON.stringify(settings));
  const calls = [
    { id: "a", name: "read", arguments: { path: join(svc.home, "settings.json") } },
    { id: "b", name: "write", arguments: { path: join(svc.home, "settings.json"), content: "{}" } },
    { id: "c", name: "read", arguments: { path: "link/secret.txt" } },
    { id: "d", name: "write", arguments: { path: `../${escape}`, content: "x" } },
    { id: "e", name: "read", arguments: { path: join(shared, "notes.txt") } },
    { id: "f", name: "write", arguments: { path: "inside.txt", content: "INSIDE" } },
  ];
  fake.script([{ steps: calls.map((toolCall) => ({ toolCall })) }, { steps: [{ text: "done" }] }]);
  try {
    assert.equal((await svc.initialize()).error, null);
    await svc.request("turn.start", { prompt: "go" }, {}, "t1");
    const ev = await waitTerminal(svc, "t1");
    assert.equal(ev.find((e) => e.event === "turn.terminal")?.payload.status, "completed");
    const reqs = await fake.waitForRequests(2);
    const results = reqs[1]!.body;
    assert.match(results, /read: [^"]*settings\.json: Berth's state directory is not readable by tools/);
    assert.match(results, /write: [^"]*settings\.json: Berth's state directory is never writable by tools/);
    assert.match(results, /read: link\/secret\.txt: outside the session's workspace/);
    assert.ok(results.includes(`write: ../${escape}: outside the session's workspace`), results);
    assert.doesNotMatch(results, /OUTSIDE-SECRET/);
    assert.match(results, /SHARED-NOTES/);
    assert.deepEqual(JSON.parse(readFileSync(join(svc.home, "settings.json"), "utf8")), settings);
    assert.equal(existsSync(join(cwd, "..", escape)), false);
    assert.equal(readFileSync(join(cwd, "inside.txt"), "utf8"), "INSIDE");
  } finally {
    svc.end();
    await svc.exited;
    await fake.close();
  }
});
