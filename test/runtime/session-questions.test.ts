/**
 * The session runtime's backend features against the loopback fake provider and a real store: the `question`
 * tool (answers, refusals, limits, withdrawal), steering references, configuration applied at the next turn,
 * stored turns paged by cursor, and forking a session at a turn.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { Agent } from "../../src/runtime/agent.js";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import { ANSWER_MAX_CHARS, SessionHub, type SessionEvent, type SessionRuntime } from "../../src/runtime/session/index.js";
import { forkSession, pageTurns, readTurns } from "../../src/runtime/session/transcript.js";
import { createQuestionTool } from "../../src/runtime/tools/question.js";

interface Rig {
  fake: FakeProvider;
  hub: SessionHub;
  rt: SessionRuntime;
  manager: SessionManager;
  events: SessionEvent[];
  cwd: string;
  next: (pred: (e: SessionEvent) => boolean) => Promise<SessionEvent>;
}

async function withRig(fn: (r: Rig) => Promise<void>): Promise<void> {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "sq-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "sq-cwd-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }, { id: "other-model" }] } } }));
  const env = { PATH: process.env.PATH, MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  const manager = new SessionManager(new SessionStore({ home }));
  let hubRef: SessionHub | null = null;
  const hub = new SessionHub({ manager, runner: new Agent({ home, cwd, env, sessionTools: (s) => hubRef?.questionTools(s) ?? [] }), defaults: { cwd } });
  hubRef = hub;
  const events: SessionEvent[] = [];
  const waiters: Array<{ pred: (e: SessionEvent) => boolean; resolve: (e: SessionEvent) => void; from: number }> = [];
  hub.subscribe((e) => {
    events.push(e);
    for (const w of [...waiters])
      if (w.pred(e)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(e);
      }
  });
  const next = (pred: (e: SessionEvent) => boolean): Promise<SessionEvent> => new Promise((resolve) => waiters.push({ pred, resolve, from: events.length }));
  const rt = await hub.create();
  try {
    await fn({ fake, hub, rt, manager, events, cwd, next });
  } finally {
    await hub.close();
    await manager.drain();
    await fake.close();
  }
}

const ask = (id: string, args: Record<string, unknown>) => ({ steps: [{ toolCall: { id, name: "question", arguments: args } }] });
const toolResult = (fake: FakeProvider, i: number): string => {
  const msgs = (fake.requests[i]!.json as { messages: Array<{ role: string; content: unknown }> }).messages;
  return JSON.stringify(msgs.filter((m) => m.role === "tool").at(-1)?.content);
};

test("question: announced once, refused answers change nothing, an option answer reaches the model", () =>
  withRig(async ({ fake, rt, next, events }) => {
    fake.script([ask("q1", { question: "Which?", options: ["red", "blue"] }), { steps: [{ text: "ok" }] }]);
    const asked = next((e) => e.type === "question_requested");
    const started = await rt.startTurn("choose");
    assert.ok(started.ok);
    const q = await asked;
    assert.ok(q.type === "question_requested");
    assert.deepEqual(q.question, { text: "Which?", options: ["red", "blue"], allowText: false });
    assert.equal(q.turnId, started.turnId);
    assert.deepEqual(rt.pendingQuestions(), [q.questionId]);
    assert.deepEqual(rt.answerQuestion(q.questionId, { option: 2 }), { ok: false, error: "option must be an index below 2" });
    assert.deepEqual(rt.answerQuestion(q.questionId, { option: -1 }), { ok: false, error: "option must be an index below 2" });
    assert.deepEqual(rt.answerQuestion(q.questionId, { text: "green" }), { ok: false, error: "this question accepts only one of its options" });
    assert.deepEqual(rt.answerQuestion("nope", { option: 0 }), { ok: false, error: "no pending question with that id" });
    const done = next((e) => e.type === "turn_completed");
    assert.deepEqual(rt.answerQuestion(q.questionId, { option: 1 }), { ok: true });
    assert.deepEqual(rt.answerQuestion(q.questionId, { option: 1 }), { ok: false, error: "no pending question with that id" }, "answered once");
    await done;
    assert.match(toolResult(fake, 1), /The user chose option 2: blue/);
    assert.equal(events.filter((e) => e.type === "question_resolved").length, 1);
  }));

test("question: free text at the answer bound, one past it refused; decline; options with allow_text take text", () =>
  withRig(async ({ fake, rt, next }) => {
    fake.script([ask("q1", { question: "Name?" }), { steps: [{ text: "thanks" }] }]);
    const asked = next((e) => e.type === "question_requested");
    await rt.startTurn("ask me");
    const q = await asked;
    assert.ok(q.type === "question_requested" && q.question.allowText);
    assert.deepEqual(rt.answerQuestion(q.questionId, { text: "x".repeat(ANSWER_MAX_CHARS + 1) }), { ok: false, error: `an answer is limited to ${ANSWER_MAX_CHARS} characters` });
    const done = next((e) => e.type === "turn_completed");
    assert.deepEqual(rt.answerQuestion(q.questionId, { text: "y".repeat(ANSWER_MAX_CHARS) }), { ok: true });
    await done;
    assert.match(toolResult(fake, 1), new RegExp(`The user answered: y{${ANSWER_MAX_CHARS}}`));

    fake.script([ask("q2", { question: "Pick", options: ["a"], allow_text: true }), { steps: [{ text: "fine" }] }]);
    const asked2 = next((e) => e.type === "question_requested");
    await rt.startTurn("again");
    const q2 = await asked2;
    const done2 = next((e) => e.type === "turn_completed");
    assert.deepEqual(rt.answerQuestion(q2.type === "question_requested" ? q2.questionId : "", { decline: true }), { ok: true });
    await done2;
    assert.match(toolResult(fake, 3), /The user declined to answer/);
  }));

test("question: cancelling the turn withdraws it; argument limits at 16 options and one past", () =>
  withRig(async ({ fake, rt, next }) => {
    fake.script([ask("q1", { question: "Wait?" })]);
    const asked = next((e) => e.type === "question_requested");
    await rt.startTurn("stall");
    const q = await asked;
    const withdrawn = next((e) => e.type === "question_resolved");
    const cancelled = next((e) => e.type === "turn_cancelled");
    assert.equal(rt.cancel(), true);
    const w = await withdrawn;
    assert.ok(w.type === "question_resolved" && q.type === "question_requested" && w.questionId === q.questionId && w.answer.kind === "cancelled");
    await cancelled;
    assert.deepEqual(rt.pendingQuestions(), []);

    const tool = createQuestionTool(() => Promise.resolve({ kind: "declined" }));
    const opts = (n: number) => Array.from({ length: n }, (_, i) => `o${i}`);
    assert.equal(tool.risk, "read_only");
    assert.equal(tool.validate({ question: "q", options: opts(16) }).ok, true);
    assert.equal(tool.validate({ question: "q", options: opts(17) }).ok, false);
    assert.equal(tool.validate({ question: "" }).ok, false);
  }));

test("steer references are echoed when injected, or on the queued prompt when the turn ended first; reconfigure waits for the turn", () =>
  withRig(async ({ fake, rt, next }) => {
    fake.script([{ steps: [{ toolCall: { id: "l1", name: "ls", arguments: { path: "." } } }] }, { steps: [{ text: "listed" }] }]);
    const toolStarted = next((e) => e.type === "tool_started");
    await rt.startTurn("list");
    await toolStarted;
    const steered = next((e) => e.type === "steered");
    assert.equal(rt.steer("and count them", "pm-1"), true);
    // The model switch asked while the turn runs applies from the next turn.
    assert.equal(rt.reconfigure({ selection: { provider: "fake", model: "other-model" } }), "next_turn");
    const s = await steered;
    assert.ok(s.type === "steered" && s.text === "and count them" && s.ref === "pm-1");
    await next((e) => e.type === "turn_completed");
    assert.equal((fake.requests[1]!.json as { model: string }).model, "fake-model");

    fake.script([{ steps: [{ text: "short" }] }]);
    const enq = next((e) => e.type === "queue_enqueued");
    const ran = await rt.startTurn("one step");
    assert.ok(ran.ok);
    assert.equal(rt.steer("too late", "pm-2"), true);
    const q = await enq;
    assert.ok(q.type === "queue_enqueued" && q.steerRef === "pm-2" && q.entry.prompt === "too late");
    await rt.idle();
    assert.equal((fake.requests[2]!.json as { model: string }).model, "other-model");
    assert.equal(rt.reconfigure({ selection: { provider: "fake", model: "fake-model" } }), "now");
  }));

test("stored turns page newest first by cursor; a fork copies through its turn only", () =>
  withRig(async ({ manager, cwd }) => {
    const h = await manager.store.create(cwd);
    for (let i = 0; i < 5; i++) {
      await h.writer.append({ kind: "user", turn_id: `t${i}`, text: `q${i}` });
      if (i === 2) await h.writer.append({ kind: "user", turn_id: "t2", text: "a steering message" });
      await h.writer.append({ kind: "assistant", turn_id: `t${i}`, message_id: "m", text: `partial ${i}`, partial: true });
      if (i < 4) await h.writer.append({ kind: "terminal", turn_id: `t${i}`, status: i === 1 ? "cancelled" : "completed", assistant_text: `a${i}` });
    }
    await h.release();
    const turns = await readTurns(manager, h.id);
    assert.deepEqual(turns.map((t) => [t.id, t.userText, t.responseText, t.cancelled, t.ended]), [
      ["t0", "q0", "a0", false, true],
      ["t1", "q1", "a1", true, true],
      ["t2", "q2", "a2", false, true],
      ["t3", "q3", "a3", false, true],
      ["t4", "q4", "partial 4", false, false],
    ]);
    const p1 = pageTurns(turns, null, 2)!;
    assert.deepEqual(p1.turns.map((t) => t.id), ["t3", "t4"]);
    assert.equal(p1.next, "before:t3");
    const p2 = pageTurns(turns, p1.next, 2)!;
    assert.deepEqual(p2.turns.map((t) => t.id), ["t1", "t2"]);
    const p3 = pageTurns(turns, p2.next, 2)!;
    assert.deepEqual(p3.turns.map((t) => t.id), ["t0"]);
    assert.equal(p3.next, null);
    assert.deepEqual(pageTurns(turns, null, 5)!.next, null, "a page holding every turn has no cursor");
    assert.equal(pageTurns(turns, "before:gone", 2), null);
    assert.equal(pageTurns(turns, "t1", 2), null);

    const f = await forkSession(manager, h.id, "t2", cwd);
    assert.ok(f.ok);
    assert.deepEqual((await readTurns(manager, f.sessionId)).map((t) => t.id), ["t0", "t1", "t2"]);
    assert.deepEqual(await forkSession(manager, h.id, "t4", cwd), { ok: false, error: "the fork turn is not a completed turn of the source chat" });
    assert.equal((await readTurns(manager, h.id)).length, 5, "the source is unchanged");
  }));
