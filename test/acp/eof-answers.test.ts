/**
 * The editor closing `berth acp`'s stdin while requests are still being handled, through the spawned process: every
 * request read before the end is answered (the SDK alone aborted them all and wrote nothing more), running turns are
 * cancelled first, and Berth's own questions to the editor are withdrawn, so nothing keeps the process alive.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startAcpRig, type AcpAgentProcess, type AcpRig, type Frame } from "./harness.js";

let rig: AcpRig;
let cwd: string;
before(async () => {
  rig = await startAcpRig();
  cwd = mkdtempSync(join(tmpdir(), "berth-acp-eof-answers-"));
});
after(async () => {
  await rig.close();
});

const initialize = { jsonrpc: "2.0", id: "init", method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } };
const records = (sessionId: string): Array<Record<string, unknown>> =>
  readFileSync(join(rig.home, "sessions", `${sessionId}.jsonl`), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
const answerTo = (p: AcpAgentProcess, id: string): Frame | undefined => p.received.find((f) => f["id"] === id && f["method"] === undefined);

it("printf initialize + session/new | berth acp: session/new is answered before the exit, and its session is listed afterwards", { timeout: 30_000 }, async () => {
  const p = rig.spawn({ cwd });
  p.writeFrames([initialize, { jsonrpc: "2.0", id: "new", method: "session/new", params: { cwd, mcpServers: [] } }]);
  p.child.stdin.end();
  assert.deepEqual(await p.exited, { code: 0, signal: null });
  const sessionId = answerTo(p, "new")?.["result"]?.sessionId as string | undefined;
  assert.equal(typeof sessionId, "string", `session/new answered; got ${JSON.stringify(p.received.map((f) => f["id"]))}`);
  assert.deepEqual(p.invalid, []);

  const q = rig.spawn({ cwd });
  await q.initialize();
  const listed = await q.agent.request("session/list", { cwd });
  assert.ok(listed.sessions.some((s) => s.sessionId === sessionId), "the session whose id the editor was given is listed");
  assert.deepEqual(await q.end(), { code: 0, signal: null });
});

it("a prompt in flight at EOF is answered cancelled; its text and the partial answer stay in the history", { timeout: 30_000 }, async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ text: "partial answer" }, { waitForAbort: true }] }]);
  const prompt = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "the prompt in flight" }] });
  await p.until(() => p.updatesOf(sessionId).some((u) => u.sessionUpdate === "agent_message_chunk"), "the first text chunk");
  p.child.stdin.end();
  assert.equal((await prompt).stopReason, "cancelled");
  assert.deepEqual(await p.exited, { code: 0, signal: null });
  const stored = records(sessionId);
  assert.deepEqual(stored.at(-1), { ...stored.at(-1), kind: "terminal", status: "cancelled" });
  const text = JSON.stringify(stored);
  assert.ok(text.includes("the prompt in flight"), "the prompt is stored");
  assert.ok(text.includes("partial answer"), "the partial answer is stored");
  assert.deepEqual(p.invalid, []);
});

it("a session/load in flight at EOF replays the history and is answered after the replay", { timeout: 30_000 }, async () => {
  const a = rig.spawn({ cwd });
  await a.initialize();
  const { sessionId } = await a.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ text: "the stored answer" }] }]);
  assert.equal((await a.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "the stored question" }] })).stopReason, "end_turn");
  assert.deepEqual(await a.end(), { code: 0, signal: null });

  const p = rig.spawn({ cwd });
  p.writeFrames([initialize, { jsonrpc: "2.0", id: "load", method: "session/load", params: { sessionId, cwd, mcpServers: [] } }]);
  p.child.stdin.end();
  assert.deepEqual(await p.exited, { code: 0, signal: null });
  const answer = p.received.findIndex((f) => f["id"] === "load" && f["method"] === undefined);
  assert.ok(answer !== -1, `session/load answered; stderr: ${p.stderr.slice(0, 400)}`);
  assert.equal(typeof p.received[answer]!["result"], "object", "session/load succeeded");
  const replay = p.received.flatMap((f, i) => (f["method"] === "session/update" ? [{ i, text: JSON.stringify(f["params"]?.update) }] : []));
  const question = replay.find((u) => u.text.includes("user_message_chunk") && u.text.includes("the stored question"));
  const reply = replay.find((u) => u.text.includes("agent_message_chunk") && u.text.includes("the stored answer"));
  assert.ok(question !== undefined && reply !== undefined, "the history was replayed");
  assert.ok(question.i < answer && reply.i < answer, "the replay comes before the answer");
  assert.deepEqual(p.invalid, []);
});

it("a permission question outstanding at EOF is withdrawn: the prompt answers cancelled, the tool never runs, berth acp exits 0", { timeout: 30_000 }, async () => {
  // An editor whose user never answers the question.
  const p = rig.spawn({ cwd, client: { permission: () => new Promise<never>(() => undefined) } });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  rig.fake.script([{ steps: [{ toolCall: { id: "asked", name: "bash", arguments: { command: "touch eof-ran.txt" } } }] }, { steps: [{ text: "unused" }] }]);
  const prompt = p.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "touch it" }] });
  const question = await p.until(() => p.received.find((f) => f["method"] === "session/request_permission"), "the permission question");
  p.child.stdin.end();
  assert.equal((await prompt).stopReason, "cancelled");
  assert.deepEqual(await p.exited, { code: 0, signal: null });
  rig.fake.unscript();
  const withdrawals = p.received.filter((f) => f["method"] === "$/cancel_request" && f["params"]?.requestId === question["id"]);
  assert.equal(withdrawals.length, 1, "the question is withdrawn once");
  assert.equal(existsSync(join(cwd, "eof-ran.txt")), false);
  const last = p.updatesOf(sessionId).findLast((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === "asked");
  assert.ok(last?.sessionUpdate === "tool_call_update" && last.status === "failed");
  assert.deepEqual(p.invalid, []);
});

it("a prompt sent with the end of input (its turn starts after the end is read) is cancelled like a running one", { timeout: 30_000 }, async () => {
  const p = rig.spawn({ cwd });
  await p.initialize();
  const { sessionId } = await p.agent.request("session/new", { cwd, mcpServers: [] });
  const asked = rig.fake.requests.length;
  p.writeFrames([{ jsonrpc: "2.0", id: "prompt", method: "session/prompt", params: { sessionId, prompt: [{ type: "text", text: "sent with the end" }] } }]);
  p.child.stdin.end();
  assert.deepEqual(await p.exited, { code: 0, signal: null });
  assert.deepEqual(answerTo(p, "prompt")?.["result"], { stopReason: "cancelled" }, JSON.stringify(answerTo(p, "prompt")));
  const stored = records(sessionId);
  assert.deepEqual(stored.at(-1), { ...stored.at(-1), kind: "terminal", status: "cancelled" });
  assert.ok(JSON.stringify(stored).includes("sent with the end"), "the prompt is stored");
  assert.equal(rig.fake.requests.length, asked, "the provider was never asked");
  assert.deepEqual(p.invalid, []);
});
