/**
 * Params that do not match ACP's schema: the SDK answers `-32602` with the bare message "Invalid params" and the
 * cause only in `data` (zod's error tree), which most editors do not show. Berth's answer names the field, what it
 * must be, and the fix in the message itself; `data` stays the SDK's, and the agent keeps serving.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { type AcpAgentProcess, type AcpRig, type Frame, withAcpRig } from "./harness.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

const answer = (p: AcpAgentProcess, id: string): Promise<Frame> => p.until(() => p.received.find((f) => f["id"] === id && f["method"] === undefined), `the answer to ${id}`);

it("a schema failure's -32602 names the field, its problem and the fix in the message", { timeout: 30_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd: p.cwd, mcpServers: [] });
  p.writeFrames([
    { jsonrpc: "2.0", id: "a", method: "session/new", params: { cwd: 5, mcpServers: [] } },
    { jsonrpc: "2.0", id: "b", method: "session/new", params: { cwd: p.cwd } },
    { jsonrpc: "2.0", id: "c", method: "session/prompt", params: { sessionId, prompt: [{ type: "text", text: "ok" }, { type: "text" }] } },
    { jsonrpc: "2.0", id: "d", method: "session/set_mode", params: { sessionId, modeId: ["x\n\u001b[31m"] } },
  ]);
  const fix = "; correct it to match ACP's schema for this method and send the request again";
  const expected: Record<string, string> = {
    a: `Invalid params: cwd: expected string, received number${fix}`,
    b: `Invalid params: mcpServers: expected array, received undefined${fix}`,
    c: `Invalid params: prompt[1].text: expected string, received undefined${fix}`,
    d: `Invalid params: modeId: expected string, received array${fix}`,
  };
  for (const [id, message] of Object.entries(expected)) {
    const a = await answer(p, id);
    assert.equal(a["error"]?.code, -32602, JSON.stringify(a));
    assert.equal(a["error"]?.message, message, JSON.stringify(a));
    assert.ok(a["error"]?.data !== undefined, "zod's tree stays in data");
  }
  // Berth's own -32602 messages are left as they are, and the agent keeps serving.
  await assert.rejects(p.agent.request("session/new", { cwd: "relative", mcpServers: [] }), (e: { message?: string }) => /^Invalid params: cwd /.test(e.message ?? ""));
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hi" }] })).stopReason, "end_turn");
  assert.deepEqual(p.invalid, []);
  await p.end();
});
