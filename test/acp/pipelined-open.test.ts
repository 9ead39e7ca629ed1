/**
 * Requests pipelined behind a `session/load` or `session/resume` of their session (one write, as acpx, a test harness
 * or `printf … | berth acp` sends them) wait for that open's answer, then run; behind an open that failed they are
 * answered with its failure named; for a session nobody opens they are `-32002` at once. A `session/cancel` among
 * them applies to a prompt read before it, never to one read after it.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { ACP_ERRORS } from "../../src/protocols/acp/errors.js";
import { frameKit, rigWithStoredSession, type AcpAgentProcess, type AcpRig, type Frame } from "./harness.js";

let rig: AcpRig;
let sessionId: string;
before(async () => {
  ({ rig, sessionId } = await rigWithStoredSession());
});
after(async () => {
  await rig.close();
});

const { request, notification, answerOf, answer } = frameKit();
const prompt = (text: string, id = sessionId): Frame => request("session/prompt", { sessionId: id, prompt: [{ type: "text", text }] });
const texts = (p: AcpAgentProcess): string[] =>
  p.updatesOf(sessionId).flatMap((u) => (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text" ? [u.content.text] : []));

it("resume then prompt in one write: the prompt runs on the resumed session and answers end_turn", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const resume = request("session/resume", { sessionId, cwd: p.cwd, mcpServers: [] });
  const ask = prompt("pipelined-after-resume");
  p.writeFrames([resume, ask]);
  assert.ok((await answer(p, resume))["result"] !== undefined, JSON.stringify(answerOf(p, resume)));
  assert.deepEqual((await answer(p, ask))["result"], { stopReason: "end_turn" }, JSON.stringify(answerOf(p, ask)));
  assert.equal(texts(p).join(""), "echo: pipelined-after-resume");
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("load then set_mode and set_config_option in one write: both apply to the loaded session", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const load = request("session/load", { sessionId, cwd: p.cwd, mcpServers: [] });
  const mode = request("session/set_mode", { sessionId, modeId: "full" });
  const reasoning = request("session/set_config_option", { sessionId, configId: "reasoning", value: "high" });
  p.writeFrames([load, mode, reasoning]);
  assert.equal((await answer(p, load))["result"]?.modes?.currentModeId, "ask");
  assert.deepEqual((await answer(p, mode))["result"], {}, JSON.stringify(answerOf(p, mode)));
  const options = (await answer(p, reasoning))["result"]?.configOptions as Array<{ id: string; currentValue: string }> | undefined;
  assert.equal(options?.find((o) => o.id === "reasoning")?.currentValue, "high", JSON.stringify(answerOf(p, reasoning)));
  // Loading it again reattaches the session, which kept the mode set.
  const again = await p.agent.request("session/load", { sessionId, cwd: p.cwd, mcpServers: [] });
  assert.equal(again.modes?.currentModeId, "full");
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("a resume that fails, then a prompt, in one write: the prompt is -32002 naming the resume's failure", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const missing = "0f0e0d0c-0b0a-4908-8706-050403020100";
  const resume = request("session/resume", { sessionId: missing, cwd: p.cwd, mcpServers: [] });
  const ask = prompt("never-runs", missing);
  const asked = rig.fake.requests.length;
  p.writeFrames([resume, ask]);
  const failure = ACP_ERRORS.sessionMissing(missing);
  assert.deepEqual((await answer(p, resume))["error"], { code: failure.code, message: failure.message, data: { sessionId: missing } });
  const named = ACP_ERRORS.openFailed(missing, "session/resume", failure.message);
  assert.deepEqual((await answer(p, ask))["error"], { code: -32002, message: named.message, data: { sessionId: missing } });
  assert.match(named.message, /the session\/resume of this session sent before this request failed/);
  assert.equal(rig.fake.requests.length, asked, "the provider was never asked");
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("a prompt for a session nobody opens is -32002 at once, even behind another session's load", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const other = "11111111-2222-4333-8444-555555555555";
  // The load replays the stored turn; the prompt for a session never opened does not wait for it.
  const load = request("session/load", { sessionId, cwd: p.cwd, mcpServers: [] });
  const ask = prompt("nowhere", other);
  p.writeFrames([load, ask]);
  await answer(p, load);
  const refused = await answer(p, ask);
  assert.deepEqual(refused["error"], { code: -32002, message: ACP_ERRORS.unknownSession(other).message, data: { sessionId: other } });
  assert.ok(p.received.indexOf(refused) < p.received.indexOf(answerOf(p, load)!), "refused before the load's answer");
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("a cancel read after a prompt pipelined behind a resume cancels it; one read before the prompt does not", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const resume = () => request("session/resume", { sessionId, cwd: p.cwd, mcpServers: [] });
  const cancel = notification("session/cancel", { sessionId });
  const first = prompt("cancelled-behind-resume");
  p.writeFrames([resume(), first, cancel]);
  assert.deepEqual((await answer(p, first))["result"], { stopReason: "cancelled" }, JSON.stringify(answerOf(p, first)));
  const second = prompt("runs-after-an-earlier-cancel");
  p.writeFrames([resume(), cancel, second]);
  assert.deepEqual((await answer(p, second))["result"], { stopReason: "end_turn" }, JSON.stringify(answerOf(p, second)));
  assert.ok(texts(p).join("").endsWith("echo: runs-after-an-earlier-cancel"));
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("on an open session, a cancel read before a prompt in one write leaves that prompt alone; one read after cancels it", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  await p.agent.request("session/resume", { sessionId, cwd: p.cwd, mcpServers: [] });
  const cancel = notification("session/cancel", { sessionId });
  const first = prompt("after-a-cancel");
  p.writeFrames([cancel, first]);
  assert.deepEqual((await answer(p, first))["result"], { stopReason: "end_turn" }, JSON.stringify(answerOf(p, first)));
  const second = prompt("before-a-cancel");
  p.writeFrames([second, cancel]);
  assert.deepEqual((await answer(p, second))["result"], { stopReason: "cancelled" }, JSON.stringify(answerOf(p, second)));
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("resume, prompt, close in one write: the close wins, the prompt is -32002 and never runs; close before it: -32002 at once", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const asked = rig.fake.requests.length;
  const ask = prompt("closed-under-it");
  const close = request("session/close", { sessionId });
  p.writeFrames([request("session/resume", { sessionId, cwd: p.cwd, mcpServers: [] }), ask, close]);
  const gone = ACP_ERRORS.unknownSession(sessionId);
  assert.deepEqual((await answer(p, ask))["error"], { code: gone.code, message: gone.message, data: { sessionId } });
  assert.deepEqual((await answer(p, close))["result"], {});
  const late = prompt("after-the-close");
  p.writeFrames([request("session/resume", { sessionId, cwd: p.cwd, mcpServers: [] }), request("session/close", { sessionId }), late]);
  assert.deepEqual((await answer(p, late))["error"], { code: gone.code, message: gone.message, data: { sessionId } });
  assert.equal(rig.fake.requests.length, asked, "no prompt reached the provider");
  assert.deepEqual(p.invalid, []);
  await p.end();
});
