/**
 * `berth acp` stopped by a signal (an editor closing its agent sends SIGTERM; a closed terminal, SIGHUP; Ctrl-C,
 * SIGINT) shuts down as at the client's EOF: the running turn is cancelled, its tool process is stopped (not left
 * running after the agent is gone), the session records the cancelled turn, and the exit status is 128 + the
 * signal's number.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pidAlive } from "../../src/store/process-alive.js";
import { type AcpRig, withAcpRig } from "./harness.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

for (const [sig, status] of [["SIGTERM", 143], ["SIGHUP", 129], ["SIGINT", 130]] as const) {
  it(`${sig} cancels the running turn, stops its tool process, records the end and exits ${status}`, { timeout: 60_000 }, async () => {
    const cwd = mkdtempSync(join(tmpdir(), "berth-acp-sig-"));
    const p = rig.spawn({ cwd });
    await p.initialize({});
    const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
    await p.agent.request("session/set_mode", { sessionId, modeId: "full" });
    const pidFile = join(cwd, "tool.pid");
    rig.fake.script([{ steps: [{ toolCall: { id: "b1", name: "bash", arguments: { command: `echo $$ > ${pidFile}; exec sleep 300` } } }] }]);
    const prompt = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "run it" }] });
    prompt.catch(() => undefined);
    let tool = 0;
    while (tool === 0) {
      if (existsSync(pidFile)) tool = Number(readFileSync(pidFile, "utf8").trim()) || 0;
      if (tool === 0) await new Promise((r) => setTimeout(r, 20)); // polled: the tool writes the file, no frame says so
    }
    p.child.kill(sig);
    assert.deepEqual(await p.exited, { code: status, signal: null });
    assert.equal(pidAlive(tool), false, "the tool process does not outlive the agent");
    assert.equal((await prompt).stopReason, "cancelled");
    const records = readFileSync(join(rig.home, "sessions", `${sessionId}.jsonl`), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { kind: string; status?: string });
    assert.deepEqual(records.at(-1), { ...records.at(-1), kind: "terminal", status: "cancelled" });
  });
}

it("SIGTERM while the editor does not read stdout (a text chunk's write cannot finish) still ends the turn and exits 143", { timeout: 30_000 }, async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-acp-sig-"));
  const p = rig.spawn({ cwd });
  await p.initialize({});
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  // One text delta larger than the pipe and this end's read buffer together: once the client stops reading at its
  // frame, that write cannot finish, and the turn waits for it (a text chunk is backpressured).
  rig.fake.script([{ steps: [{ text: "x".repeat(512 * 1024) }, { text: "never shown" }] }]);
  p.holdOutputAt((start) => start.includes('"agent_message_chunk"'));
  const prompt = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "talk" }] });
  prompt.catch(() => undefined);
  await p.until(() => p.held, "the client stopped reading at the text chunk");
  p.child.kill("SIGTERM");
  assert.deepEqual(await p.exited, { code: 143, signal: null });
  const records = readFileSync(join(rig.home, "sessions", `${sessionId}.jsonl`), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { kind: string; status?: string });
  assert.deepEqual(records.at(-1), { ...records.at(-1), kind: "terminal", status: "cancelled" });
});
