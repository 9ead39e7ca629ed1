/**
 * One thing at a time per session on a connection, through the spawned `berth acp`, with requests written raw and
 * several in one write (as a pipelining client sends them): of two prompts the first runs and the second is refused;
 * a `session/load` replay never mixes with a live turn (a load during the session's turn, and a second load during
 * a load's replay, are refused; a prompt sent behind a load waits for the load's answer).
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { ACP_ERRORS } from "../../src/protocols/acp/errors.js";
import { type AcpAgentProcess, type AcpRig, type Frame, withAcpRig } from "./harness.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

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

const userTexts = (updates: ReturnType<AcpAgentProcess["updatesOf"]>): string[] =>
  updates.flatMap((u) => (u.sessionUpdate === "user_message_chunk" && u.content.type === "text" ? [u.content.text] : []));

it("session/load during the session's own turn is refused with -32600; after the turn's answer it replays that turn", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd: p.cwd, mcpServers: [] });
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "prompt-one" }] })).stopReason, "end_turn");
  rig.fake.script([{ steps: [{ text: "Working" }, { waitForAbort: true }] }]);
  const running = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "prompt-two" }] });
  await p.until(() => texts(p, sessionId).join("").endsWith("Working"), "the running turn's first chunk");
  const before = p.updatesOf(sessionId).length;
  await assert.rejects(p.agent.request("session/load", { sessionId, cwd: p.cwd, mcpServers: [] }), (e: { code?: number; message?: string }) => {
    assert.deepEqual({ code: e.code, message: e.message }, refusal(ACP_ERRORS.loadDuringTurn()));
    return true;
  });
  assert.deepEqual(userTexts(p.updatesOf(sessionId).slice(before)), [], "no replay went out among the turn's updates");
  await p.agent.notify("session/cancel", { sessionId });
  assert.equal((await running).stopReason, "cancelled");
  const after = p.updatesOf(sessionId).length;
  await p.agent.request("session/load", { sessionId, cwd: p.cwd, mcpServers: [] });
  assert.deepEqual(userTexts(p.updatesOf(sessionId).slice(after)), ["prompt-one", "prompt-two"]);
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("a second load sent with a session/load is refused while it replays; a prompt sent with it waits for its answer, then runs", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd: p.cwd, mcpServers: [] });
  assert.equal((await p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "prompt-one" }] })).stopReason, "end_turn");
  const before = p.updatesOf(sessionId).length;
  const load = { sessionId, cwd: p.cwd, mcpServers: [] };
  p.writeFrames([request("l1", "session/load", load), request("p2", "session/prompt", { sessionId, prompt: [{ type: "text", text: "prompt-two" }] }), request("l2", "session/load", load)]);
  await p.until(() => ["l1", "p2", "l2"].every((id) => answer(p, id) !== undefined), "the three answers");
  assert.deepEqual(answer(p, "l2")!["error"], refusal(ACP_ERRORS.loading()));
  assert.equal(answer(p, "l1")!["result"]?.modes?.currentModeId, "ask");
  assert.deepEqual(answer(p, "p2")!["result"], { stopReason: "end_turn" });
  // One replay, alone and before the load's answer; the prompt's turn only after that answer.
  assert.deepEqual(p.updatesOf(sessionId).slice(before, before + 2), [
    { sessionUpdate: "user_message_chunk", content: { type: "text", text: "prompt-one" } },
    { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "echo: prompt-one" } },
  ]);
  const loaded = p.received.indexOf(answer(p, "l1")!);
  const updatesBeforeAnswer = p.received.slice(0, loaded).filter((f) => f["method"] === "session/update" && f["params"]?.sessionId === sessionId).length;
  assert.equal(updatesBeforeAnswer, before + 2, "nothing of the prompt's turn before the load's answer");
  assert.ok(texts(p, sessionId).join("").endsWith("echo: prompt-two"), JSON.stringify(texts(p, sessionId)));
  assert.deepEqual(userTexts(p.updatesOf(sessionId).slice(before)), ["prompt-one"], "nothing else was replayed");
  assert.deepEqual(p.invalid, []);
  await p.end();
});
