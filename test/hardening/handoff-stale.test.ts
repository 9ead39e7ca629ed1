/**
 * The launchers' credential handoff (docs/security.md) with a stale or foreign `BERTH_HANDOFF_FD` already in the
 * environment (a wrapper that exported it, a leftover): the launcher must still move credential-like variables out
 * of the exec-time environment, and the service must still hold them (the provider receives its key). Before the
 * fix the launcher skipped the move whenever the variable was set, leaving every credential in
 * /proc/<berth pid>/environ. A foreign `BERTH_HANDOFF_FD` naming a descriptor nobody closes (and no credentials to
 * move) used to hang start-up in the read of that descriptor: it is now left alone.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN, MAGI_BIN } from "../helpers/paths.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { waitTerminal } from "../turns/helpers.js";

for (const bin of [
  { name: "berth service", path: BERTH_BIN, args: ["service"] },
  { name: "magi-code --app service", path: MAGI_BIN, args: ["--app", "service"] },
]) {
  test(`${bin.name} with a stale BERTH_HANDOFF_FD still keeps credentials out of its environ`, { timeout: 60_000 }, async () => {
    const fake = await startFakeProvider();
    const keys = { FAKE_API_KEY: `fake-${randomBytes(12).toString("hex")}`, GITHUB_TOKEN: `ghp-${randomBytes(12).toString("hex")}` };
    const svc = new ServiceProcess({ bin: bin.path, args: bin.args, exec: true, env: { ...keys, BERTH_HANDOFF_FD: "9" } });
    try {
      mkdirSync(svc.home, { recursive: true });
      writeFileSync(join(svc.home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, api_key_env: "FAKE_API_KEY", models: [{ id: "fake-model" }] } }, provider: "fake", model: "fake-model" }));
      assert.equal((await svc.initialize()).error, null);
      // The launcher exec'd node in place: the service's own environ.
      const environ = readFileSync(`/proc/${svc.child.pid}/environ`, "utf8");
      assert.match(environ, /MC_HOME=/);
      for (const [name, value] of Object.entries(keys)) assert.ok(!environ.includes(value), `${name} is in the exec-time environment`);
      await svc.request("turn.start", { prompt: "hi" }, {}, "t1");
      const ev = await waitTerminal(svc, "t1");
      assert.equal(ev.find((e) => e.event === "turn.terminal")?.payload.status, "completed");
      assert.equal((await fake.waitForRequests(1))[0]!.headers.authorization, `Bearer ${keys.FAKE_API_KEY}`, "the service still holds the key");
    } finally {
      svc.end();
      await svc.exited;
      await fake.close();
    }
  });
}

for (const bin of [
  { name: "berth service", path: BERTH_BIN, args: ["service"] },
  { name: "magi-code --app service", path: MAGI_BIN, args: ["--app", "service"] },
]) {
  test(`${bin.name} with a foreign BERTH_HANDOFF_FD on a pipe nobody closes starts, and leaves the descriptor alone`, { timeout: 60_000 }, async () => {
    const home = mkdtempSync(join(tmpdir(), "handoff-foreign-"));
    // No credential-like variable: the launcher hands nothing over, and fd 3 is the caller's own pipe, kept open.
    const env: Record<string, string> = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: home, MC_HOME: home, BERTH_HANDOFF_FD: "3" };
    const child = spawn(bin.path, bin.args, { env, stdio: ["pipe", "pipe", "pipe", "pipe"] });
    const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
    try {
      let out = "";
      child.stdout.setEncoding("utf8");
      const answered = new Promise<string>((resolve) =>
        child.stdout.on("data", (d: string) => {
          out += d;
          if (out.includes("\n")) resolve(out.slice(0, out.indexOf("\n")));
        }),
      );
      child.stdin.write(JSON.stringify({ protocol_version: 1, kind: "request", request_id: "i", method: "initialize", payload: { supported_protocol_versions: [1] } }) + "\n");
      const line = JSON.parse(await answered) as { request_id: string; error: unknown };
      assert.equal(line.request_id, "i");
      assert.equal(line.error, null);
      // The service did not read or close it: the caller's pipe is still open and writable from both ends.
      const fd3 = child.stdio[3] as import("node:stream").Duplex;
      assert.equal(fd3.destroyed, false);
      assert.ok(!readFileSync(`/proc/${child.pid}/environ`, "utf8").includes("BERTH_HANDOFF_PID"), "the launcher set no owner for a foreign descriptor");
    } finally {
      child.stdin.end();
      await exited;
    }
  });
}
