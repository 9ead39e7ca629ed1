/**
 * `session/close` and `session/load` of one session sent together (the second before the first is answered) are
 * handled in arrival order: a close that arrives after a load closes the loaded session, a load that arrives after a
 * close opens it again. Either way both are answered, and the session's state afterwards is the one the later
 * request leaves (a prompt then runs, or is `-32002`).
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

const { request, answer } = frameKit();

/** Sends `frames` in one write and returns their answers, in the same order. */
async function together(p: AcpAgentProcess, frames: Frame[]): Promise<Frame[]> {
  p.writeFrames(frames);
  return Promise.all(frames.map((f) => answer(p, f)));
}

/** A prompt's answer: its stop reason, or its error code. */
async function promptOutcome(p: AcpAgentProcess): Promise<string | number> {
  const [a] = await together(p, [request("session/prompt", { sessionId, prompt: [{ type: "text", text: "again" }] })]);
  return a!["result"]?.stopReason ?? a!["error"]?.code;
}

it("load then close, both in one write, of a session not yet open here: both succeed and the session is closed", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  const [load, close] = await together(p, [request("session/load", { sessionId, cwd: p.cwd, mcpServers: [] }), request("session/close", { sessionId })]);
  assert.equal(load!["result"]?.modes?.currentModeId, "ask", JSON.stringify(load));
  assert.deepEqual(close!["result"], {}, JSON.stringify(close));
  assert.equal(await promptOutcome(p), ACP_ERRORS.unknownSession(sessionId).code);
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("load then close of an open session, in one write: the session ends closed; close then load: it ends open", { timeout: 60_000 }, async () => {
  const p = rig.spawn();
  await p.initialize();
  await p.agent.request("session/load", { sessionId, cwd: p.cwd, mcpServers: [] });
  const load = () => request("session/load", { sessionId, cwd: p.cwd, mcpServers: [] });
  const close = () => request("session/close", { sessionId });

  const [l1, c1] = await together(p, [load(), close()]);
  assert.ok(l1!["result"] !== undefined && c1!["result"] !== undefined, JSON.stringify([l1, c1]));
  assert.equal(await promptOutcome(p), ACP_ERRORS.unknownSession(sessionId).code);

  await p.agent.request("session/load", { sessionId, cwd: p.cwd, mcpServers: [] });
  const [c2, l2] = await together(p, [close(), load()]);
  assert.ok(c2!["result"] !== undefined && l2!["result"] !== undefined, JSON.stringify([c2, l2]));
  assert.equal(await promptOutcome(p), "end_turn");
  // And repeatedly: the close's end never reaches the load opened after it.
  for (let i = 0; i < 5; i++) {
    const [c, l] = await together(p, [close(), load()]);
    assert.ok(c!["result"] !== undefined && l!["result"] !== undefined, JSON.stringify([c, l]));
    assert.equal(await promptOutcome(p), "end_turn");
  }
  assert.deepEqual(p.invalid, []);
  await p.end();
});
