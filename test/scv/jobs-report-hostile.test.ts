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
 * Starts one job whose report is queued on a paused session behind a prompt the client queued first (with
 * `requestId`), then unpauses once `before` ran; `report` is the provider's answer to the client's prompt, then to
 * the report.
 */
async function queuedBehind(x: Setup, requestId: string, report: Parameters<typeof startJobs>[2], before: (entry: Msg, from: number) => Promise<void> = () => Promise.resolve()): Promise<void> {
  let release!: () => void;
  const paused = new Promise<void>((r) => (release = r));
  const from = x.c.frames.length;
  const started = startJobs(x, [10], report, paused);
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
