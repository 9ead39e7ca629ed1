/**
 * Cancelling at the points an editor can hit, through the spawned `berth acp`: a cancel read before the runtime has
 * started the turn (in the same write as the prompt) still cancels it.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startAcpRig, type AcpAgentProcess, type AcpRig, type Frame } from "./harness.js";

let rig: AcpRig;
let cwd: string;
before(async () => {
  rig = await startAcpRig();
  cwd = mkdtempSync(join(tmpdir(), "berth-acp-cancel-"));
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
