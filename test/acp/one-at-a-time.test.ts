/**
 * One thing at a time per session on a connection, through the spawned `berth acp`, with requests written raw and
 * several in one write (as a pipelining client sends them): of two prompts the first runs and the second is refused.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { ACP_ERRORS } from "../../src/protocols/acp/errors.js";
import { startAcpRig, type AcpAgentProcess, type AcpRig, type Frame } from "./harness.js";

let rig: AcpRig;
before(async () => {
  rig = await startAcpRig();
});
after(async () => {
  await rig.close();
});

const request = (id: string, method: string, params: unknown): Frame => ({ jsonrpc: "2.0", id, method, params });
const answer = (p: AcpAgentProcess, id: string): Frame | undefined => p.received.find((f) => f["id"] === id && f["method"] === undefined);
const refusal = (e: { message: string }) => ({ code: -32600, message: e.message });
const texts = (p: AcpAgentProcess, sessionId: string): string[] =>
  p.updatesOf(sessionId).flatMap((u) => (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text" ? [u.content.text] : []));

it("two session/prompts in one write: the first runs to end_turn, the second is refused at once with -32600", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd: p.cwd, mcpServers: [] });
  const asked = rig.fake.requests.length;
  const prompt = (text: string) => ({ sessionId, prompt: [{ type: "text", text }] });
  p.writeFrames([request("p1", "session/prompt", prompt("prompt-one")), request("p2", "session/prompt", prompt("prompt-two"))]);
  await p.until(() => answer(p, "p1") !== undefined && answer(p, "p2") !== undefined, "both answers");
  assert.deepEqual(answer(p, "p2")!["error"], refusal(ACP_ERRORS.promptRunning()));
  assert.deepEqual(answer(p, "p1")!["result"], { stopReason: "end_turn" });
  assert.ok(p.received.indexOf(answer(p, "p2")!) < p.received.indexOf(answer(p, "p1")!), "the refusal comes at once, before the turn ends");
  // The refused prompt reached neither the model nor the session.
  assert.equal(rig.fake.requests.length - asked, 1);
  assert.doesNotMatch(rig.fake.requests[asked]?.body ?? "", /prompt-two/);
  assert.equal(texts(p, sessionId).join(""), "echo: prompt-one");
  // The session is idle again: the next prompt runs.
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "third" }] })).stopReason, "end_turn");
  assert.deepEqual(p.invalid, []);
  await p.end();
});
