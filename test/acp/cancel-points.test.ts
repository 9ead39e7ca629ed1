/**
 * Cancelling at the points an editor can hit, through the spawned `berth acp`: a cancel read before the runtime has
 * started the turn (in the same write as the prompt) still cancels it, and a cancel while the editor itself never
 * answers Berth's fs or terminal request still ends the turn `cancelled` (Berth stops waiting for that answer).
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startAcpRig, type AcpAgentProcess, type AcpRig, type Frame } from "./harness.js";

let rig: AcpRig;
let cwd: string;
before(async () => {
  rig = await startAcpRig();
  cwd = mkdtempSync(join(tmpdir(), "berth-acp-cancel-"));
  writeFileSync(join(cwd, "a.txt"), "on disk\n");
});
after(async () => {
  await rig.close();
});

const answerTo = (p: AcpAgentProcess, id: number): Promise<Frame> => p.until(() => p.received.find((f) => f["id"] === id && f["method"] === undefined), `the answer to ${id}`);

for (const [what, cancel] of [
  ["session/cancel", (sessionId: string, _id: number): Frame => ({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId } })],
  ["$/cancel_request of the prompt", (_sessionId: string, id: number): Frame => ({ jsonrpc: "2.0", method: "$/cancel_request", params: { requestId: id } })],
] as const) {
  it(`${what} in the prompt's own write (read before the turn started) ends it cancelled`, { timeout: 30_000 }, async () => {
    const p = rig.spawn({ cwd });
    await p.initialize();
    const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
    rig.fake.script([{ steps: [{ text: "this reply must not be shown" }] }]);
    p.writeFrames([{ jsonrpc: "2.0", id: 900, method: "session/prompt", params: { sessionId, prompt: [{ type: "text", text: "go" }] } }, cancel(sessionId, 900)]);
    const answer = await answerTo(p, 900);
    assert.deepEqual(answer["result"], { stopReason: "cancelled" }, JSON.stringify(answer));
    assert.equal(p.updatesOf(sessionId).filter((u) => u.sessionUpdate === "agent_message_chunk").length, 0);
    assert.equal(rig.fake.unscript(), 1, "the provider was never asked");
    // The cancel was for that turn only: the next prompt runs.
    assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "again" }] })).stopReason, "end_turn");
    assert.deepEqual(p.invalid, []);
    await p.end();
  });
}

it("a cancel while the editor never answers fs/read_text_file ends the turn cancelled", { timeout: 30_000 }, async () => {
  const buffers = new Map([[join(cwd, "a.txt"), "buffer\n"]]);
  const p = rig.spawn({ cwd, client: { buffers, unanswered: ["fs/read_text_file"] } });
  await p.initialize({ fs: { readTextFile: true, writeTextFile: true } });
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  await p.agent.request("session/set_mode", { sessionId, modeId: "full" });
  rig.fake.script([{ steps: [{ toolCall: { id: "r1", name: "read", arguments: { path: "a.txt" } } }] }, { steps: [{ text: "unused" }] }]);
  const turn = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "read it" }] });
  await p.until(() => p.received.some((f) => f["method"] === "fs/read_text_file"), "the read request");
  await p.agent.notify("session/cancel", { sessionId });
  assert.equal((await turn).stopReason, "cancelled");
  rig.fake.unscript();
  const last = p.updatesOf(sessionId).findLast((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === "r1");
  assert.ok(last?.sessionUpdate === "tool_call_update" && last.status === "failed", JSON.stringify(last));
  assert.deepEqual(p.invalid, []);
  assert.deepEqual(await p.end(), { code: 0, signal: null });
});

for (const hung of [["terminal/create"], ["terminal/wait_for_exit", "terminal/kill", "terminal/output"]]) {
  it(`a cancel while the editor never answers ${hung.join(", ")} ends the turn cancelled`, { timeout: 30_000 }, async () => {
    const p = rig.spawn({ cwd, client: { terminals: true, unanswered: hung } });
    await p.initialize({ terminal: true });
    const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
    await p.agent.request("session/set_mode", { sessionId, modeId: "full" });
    rig.fake.script([{ steps: [{ toolCall: { id: "b1", name: "bash", arguments: { command: "sleep 600" } } }] }, { steps: [{ text: "unused" }] }]);
    const turn = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "sleep" }] });
    await p.until(() => p.received.some((f) => f["method"] === hung[0]), `the ${hung[0]} request`);
    await p.agent.notify("session/cancel", { sessionId });
    assert.equal((await turn).stopReason, "cancelled");
    rig.fake.unscript();
    const last = p.updatesOf(sessionId).findLast((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === "b1");
    assert.ok(last?.sessionUpdate === "tool_call_update" && last.status === "failed", JSON.stringify(last));
    if (hung[0] !== "terminal/create") {
      // The terminal is still released (which kills its command), so the editor is not left with a running one.
      await p.until(() => p.terminals.get("term-1")?.released, "the terminal released");
    }
    assert.deepEqual(p.invalid, []);
    assert.deepEqual(await p.end(), { code: 0, signal: null });
  });
}
