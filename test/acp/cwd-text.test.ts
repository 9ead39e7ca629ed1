/**
 * A `cwd` that is no Unicode text (a JSON `\ud800` escape, a lone surrogate) names no path: the file system would
 * read it as U+FFFD, and Berth's store keeps only Unicode text. It is refused as the params' fault, naming the cause
 * and the fix, for `session/new`, `session/load` and `session/resume` alike; a path that really holds U+FFFD works.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startAcpRig, type AcpRig } from "./harness.js";

let rig: AcpRig;
let parent: string;
before(async () => {
  rig = await startAcpRig();
  parent = mkdtempSync(join(tmpdir(), "berth-acp-cwdtext-"));
  // The directory the lone surrogate would land in, so the refusal cannot be a missing directory's.
  mkdirSync(join(parent, "d\ufffd"));
});
after(async () => {
  await rig.close();
});

it("a cwd with a lone surrogate is -32602 naming it, for new, load and resume; a cwd holding U+FFFD itself works", async () => {
  const p = rig.spawn({ cwd: parent });
  await p.initialize();
  const good = join(parent, "d\ufffd");
  const { sessionId } = await p.agent.request("session/new", { cwd: good, mcpServers: [] });
  const lone = JSON.stringify(good).slice(1, -1).replace("\ufffd", "\\ud800");
  const raw = (id: number, method: string, params: string): void => void p.child.stdin.write(`{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${params}}\n`);
  raw(920, "session/new", `{"cwd":"${lone}","mcpServers":[]}`);
  raw(921, "session/load", `{"sessionId":"${sessionId}","cwd":"${lone}","mcpServers":[]}`);
  raw(922, "session/resume", `{"sessionId":"${sessionId}","cwd":"${lone}"}`);
  for (const id of [920, 921, 922]) {
    const answer = await p.until(() => p.received.find((f) => f["id"] === id), `the answer to ${id}`);
    assert.deepEqual(answer["error"], {
      code: -32602,
      message: "Invalid params: cwd is not valid Unicode text (it holds a lone UTF-16 surrogate); give the absolute path of an existing directory",
    });
  }
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "still here" }] })).stopReason, "end_turn");
  assert.deepEqual(p.invalid, []);
  await p.end();
});
