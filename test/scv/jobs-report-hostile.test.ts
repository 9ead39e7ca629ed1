/**
 * Report turns against a client that plays with the queue: what it may do to a queued report (`background:<n>`)
 * never loses a job's result nor settles it unseen.
 *
 * Driven over `berth stdio` with a fake `codex` (the real `exec --json` stream and `-o` file) on the fake provider;
 * asserted: the SCV frames and what the job tools show afterwards.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import type { Msg } from "./client.js";
import { close, setup, startJobs, TERMINAL, type Setup } from "./jobs-rig.js";

/**
 * Starts a job per size (default one) whose report is queued on a paused session behind a prompt the client queued first (with
 * `requestId`), then unpauses once `before` ran; `report` is the provider's answer to the client's prompt, then to
 * the report.
 */
async function queuedBehind(
  x: Setup,
  requestId: string,
  report: Parameters<typeof startJobs>[2],
  before: (entry: Msg, from: number) => Promise<void> = () => Promise.resolve(),
  sizes = [10],
): Promise<void> {
  let release!: () => void;
  const paused = new Promise<void>((r) => (release = r));
  const from = x.c.frames.length;
  const started = startJobs(x, sizes, report, paused);
  await x.c.waitFor((m) => m.type === "tool.completed" && m.call_id === "call_0", from, "the job started");
  const pause = x.c.request({ type: "session.pause", session_id: x.session, paused: true });
  await x.c.reply(pause, ["session.paused"], from);
  x.c.request({ type: "turn.start", session_id: x.session, prompt: "my own prompt", request_id: requestId });
  await x.c.waitFor((m) => m.type === "queue.enqueued" && (m.entry as Msg).submitter === requestId, from, "the client's prompt queued");
  release();
  await started;
  const queued = await x.c.waitFor((m) => m.type === "queue.enqueued" && m.request_id === "background:1" && (m.entry as Msg).prompt !== "my own prompt", from, "the report queued");
  await before(queued.entry as Msg, from);
  const resume = x.c.request({ type: "session.pause", session_id: x.session, paused: false });
  await x.c.reply(resume, ["session.paused"], from);
}

/** A user turn calling agent_wait with no job named: the jobs its call names settled. */
async function waited(x: Setup): Promise<string[]> {
  x.rig.fake.script([{ steps: [{ toolCall: { id: "call_w", name: "agent_wait", arguments: { timeout_seconds: 1 } } }] }, { steps: [{ text: "ok" }] }]);
  const t = await x.c.turn(x.session, "what about the jobs?");
  assert.equal(t.terminal.type, "turn.completed");
  const w = t.frames.find((f) => f.type === "tool.completed" && f.call_id === "call_w")!;
  return ((w.jobs as Msg[] | undefined) ?? []).map((j) => `${j.job}:${j.status}`);
}

it("a client prompt whose request_id is the report's own (background:1) is not taken for the report: the failed report leaves its job unsettled", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    // The client's prompt runs first and completes; the report behind it fails at its first step.
    await queuedBehind(x, "background:1", [{ steps: [{ text: "mine" }] }, { status: 400 }]);
    const mine = await x.c.waitFor((m) => m.type === "turn.started" && m.request_id === "background:1" && m.origin === undefined, 0, "the client's turn");
    await x.c.waitFor((m) => m.turn_id === mine.turn_id && m.type === "turn.completed", 0, "the client's turn to complete");
    const report = await x.c.waitFor((m) => m.type === "turn.started" && m.request_id === "background:1" && m.origin !== undefined, 0, "the report");
    const failed = await x.c.waitFor((m) => m.turn_id === report.turn_id && TERMINAL.includes(m.type as string), 0, "the report's end");
    assert.deepEqual([failed.type, failed.origin], ["turn.failed", { kind: "background", jobs: [] }]);
    // Before: the client's turn completing settled job-1, which the model never saw: no tool, no report showed it.
    assert.deepEqual(await waited(x), ["job-1:completed"]);
  } finally {
    await close(x);
  }
});

it("a queued report whose prompt the client replaced (queue.update) runs as the client's prompt; the job is reported after it", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    let updated!: Msg;
    await queuedBehind(x, "r-mine", [{ steps: [{ text: "mine" }] }, { steps: [{ text: "noted" }] }], async (entry, from) => {
      const u = x.c.request({ type: "queue.update", session_id: x.session, queue_id: entry.queue_id, revision: entry.revision, prompt: "never mind the jobs" });
      updated = await x.c.reply(u, ["queue.updated"], from);
    });
    assert.equal(updated.type, "queue.updated", JSON.stringify(updated));
    // The edited entry is the client's prompt now: no origin, and the model got the client's text.
    const edited = await x.c.waitFor((m) => m.type === "turn.started" && m.request_id === "background:1", 0, "the edited entry's turn");
    assert.equal(edited.origin, undefined);
    const end = await x.c.waitFor((m) => m.turn_id === edited.turn_id && TERMINAL.includes(m.type as string), 0, "its end");
    assert.deepEqual([end.type, end.origin], ["turn.completed", undefined]);
    // Before: that turn claimed job-1 (origin.jobs) and settled it, though the model never saw its result.
    const again = await x.c.waitFor((m) => m.type === "turn.started" && m.request_id === "background:2", 0, "the job reported again");
    assert.deepEqual(again.origin, { kind: "background", jobs: ["job-1"] });
    const done = await x.c.waitFor((m) => m.turn_id === again.turn_id && TERMINAL.includes(m.type as string), 0, "the report's end");
    assert.deepEqual([done.type, done.origin], ["turn.completed", { kind: "background", jobs: ["job-1"] }]);
    assert.deepEqual(await waited(x), []);
  } finally {
    await close(x);
  }
});

it("a queued report whose job the model saw meanwhile (agent_wait in the prompt queued before it) is withdrawn, not shown twice", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    let report!: Msg;
    const wait = { steps: [{ toolCall: { id: "call_w", name: "agent_wait", arguments: { timeout_seconds: 1 } } }] };
    await queuedBehind(x, "r-mine", [wait, { steps: [{ text: "mine" }] }], (entry) => Promise.resolve(void (report = entry)));
    const mine = await x.c.waitFor((m) => m.request_id === "r-mine" && TERMINAL.includes(m.type as string), 0, "the client's turn");
    assert.equal(mine.type, "turn.completed");
    const w = x.c.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_w")!;
    assert.deepEqual((w.jobs as Msg[]).map((j) => `${j.job}:${j.status}`), ["job-1:completed"]);
    // Its only job is settled: the report is dropped from the queue (before: it ran, showing job-1 a second time).
    const fate = await x.c.waitFor((m) => (m.type === "queue.removed" && m.queue_id === report.queue_id) || (m.type === "turn.started" && m.origin !== undefined), 0, "the report's fate");
    assert.equal(fate.type, "queue.removed", JSON.stringify(fate));
    const next = await x.c.turn(x.session, "and now?");
    assert.equal(next.terminal.type, "turn.completed");
    assert.deepEqual(x.c.frames.filter((m) => m.type === "turn.started" && m.origin !== undefined), []);
  } finally {
    await close(x);
  }
});

it("a queued report one of whose jobs the model saw meanwhile is withdrawn; the other job is reported after that turn", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    const wait = { steps: [{ toolCall: { id: "call_w", name: "agent_wait", arguments: { jobs: "job-1", timeout_seconds: 1 } } }] };
    await queuedBehind(x, "r-mine", [wait, { steps: [{ text: "mine" }] }], () => Promise.resolve(), [10, 20]);
    const report = await x.c.waitFor((m) => m.type === "queue.enqueued" && m.request_id === "background:1", 0, "the report queued");
    assert.match((report.entry as Msg).prompt as string, /^Background job job-1 .*Background job job-2 /s);
    const mine = await x.c.waitFor((m) => m.request_id === "r-mine" && TERMINAL.includes(m.type as string), 0, "the client's turn");
    assert.equal(mine.type, "turn.completed");
    const again = await x.c.waitFor((m) => m.type === "turn.started" && m.origin !== undefined, 0, "the next report");
    // Not the queued report (it showed job-1 again): a new one, of job-2 alone.
    assert.deepEqual([again.request_id, again.origin], ["background:2", { kind: "background", jobs: ["job-2"] }]);
    assert.ok(x.c.frames.some((m) => m.type === "queue.removed" && m.queue_id === (report.entry as Msg).queue_id));
    const done = await x.c.waitFor((m) => m.turn_id === again.turn_id && TERMINAL.includes(m.type as string), 0, "its end");
    assert.deepEqual([done.type, done.origin], ["turn.completed", { kind: "background", jobs: ["job-2"] }]);
    assert.deepEqual(await waited(x), []);
  } finally {
    await close(x);
  }
});
