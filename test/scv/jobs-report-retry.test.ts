/**
 * What happens to background jobs whose report turn did not complete, and to jobs a report left out for room.
 *
 * Before, a report turn marked the jobs it showed seen when its prompt was built: a report turn that failed (a
 * provider error) or was cancelled lost them: no later report and no `agent_status` without names brought them to
 * the user or the model, though the session kept them, and the failed turn's terminal event named them in
 * `origin.jobs` as if the model had seen them. And jobs a report left out for room (named in it, unseen) waited until
 * another job ended. Now a job is settled by a report turn only once the model saw it (its first response came in
 * full, jobs-report-seen.test.ts): one that failed or was cancelled before that names no job in its terminal `origin.jobs` (as does a queued one dropped by `queue.remove` or `session.clear`), and
 * its jobs are reported again after the session's next turn (or when another job ends), never in a loop; a completed report that left jobs out is followed by the next report, after any
 * prompt the user queued.
 *
 * Driven over `berth stdio` with a fake `codex` (the real `exec --json` stream and `-o` file) on the fake provider;
 * asserted: the SCV frames and the report prompts the provider got.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import type { Msg } from "./client.js";
import { close, reportPrompts, reportTurn, setup, startJobs, TERMINAL, turnsStarted } from "./jobs-rig.js";

it("a report turn the provider fails names no job settled; the jobs are reported again after the next turn, once", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    await startJobs(x, [10], { status: 400 });
    const first = await reportTurn(x, 1);
    assert.deepEqual(first.started.origin, { kind: "background", jobs: ["job-1"] });
    const failed = await first.terminal;
    assert.equal(failed.type, "turn.failed", JSON.stringify(failed));
    // The model never saw the result: the terminal event names no job (before: job-1, as if settled).
    assert.deepEqual(failed.origin, { kind: "background", jobs: [] });
    // No report is started again by itself; the user's next turn runs, and once it ended the job is reported again.
    const user = await x.c.turn(x.session, "anything new?");
    assert.equal(user.terminal.type, "turn.completed");
    const again = await reportTurn(x, 2);
    assert.deepEqual(again.started.origin, { kind: "background", jobs: ["job-1"] });
    const done = await again.terminal;
    assert.equal(done.type, "turn.completed", JSON.stringify(done));
    assert.deepEqual(done.origin, { kind: "background", jobs: ["job-1"] });
    assert.deepEqual(turnsStarted(x).slice(1), ["background:1", user.requestId, "background:2"]);
    const prompts = reportPrompts(x);
    assert.equal(prompts.length, 2);
    for (const p of prompts) assert.match(p, /^Background job job-1 \(agent_codex: \{"a":10\}\) ended: completed\.\n\{.*"reply":"a{10}"/s);
    // Settled now: the next turn runs with no report between, and is followed by none.
    const next = await x.c.turn(x.session, "and now?");
    assert.equal(next.terminal.type, "turn.completed");
    const last = await x.c.turn(x.session, "still there?");
    assert.equal(last.terminal.type, "turn.completed");
    assert.deepEqual(turnsStarted(x).slice(1), ["background:1", user.requestId, "background:2", next.requestId, last.requestId]);
  } finally {
    await close(x);
  }
});

it("a report turn the user cancels leaves its job unsettled: agent_status with no job named shows and settles it", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    await startJobs(x, [10], { steps: [{ waitForAbort: true }] });
    const first = await reportTurn(x, 1);
    assert.deepEqual(first.started.origin, { kind: "background", jobs: ["job-1"] });
    await x.rig.fake.waitForRequests(3);
    x.c.request({ type: "turn.cancel", session_id: x.session, turn_id: first.started.turn_id });
    const cancelled = await first.terminal;
    assert.equal(cancelled.type, "turn.cancelled", JSON.stringify(cancelled));
    assert.deepEqual(cancelled.origin, { kind: "background", jobs: [] });
    // The model asks: the job's result is shown for the first time, so the call names it settled.
    x.rig.fake.script([{ steps: [{ toolCall: { id: "call_s", name: "agent_status", arguments: {} } }] }, { steps: [{ text: "ok" }] }]);
    const t = await x.c.turn(x.session, "status");
    assert.equal(t.terminal.type, "turn.completed");
    const status = t.frames.find((f) => f.type === "tool.completed" && f.call_id === "call_s")!;
    assert.match(status.output as string, /"job":"job-1".*\\"reply\\":\\"a{10}\\"/);
    assert.deepEqual(((status.jobs as Msg[] | undefined) ?? []).map((j) => `${j.job}:${j.status}`), ["job-1:completed"]);
    // Seen through the tool: it is not reported again.
    const next = await x.c.turn(x.session, "and now?");
    assert.equal(next.terminal.type, "turn.completed");
    assert.deepEqual(turnsStarted(x).slice(1), ["background:1", t.requestId, next.requestId]);
  } finally {
    await close(x);
  }
});

it("a completed report that left a job out for room is followed by the next report, after the prompt the user queued", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    // Two results of 30 000 bytes: the first report (40 KiB) shows job-1 and names job-2. It is held until the user
    // has queued a prompt.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await startJobs(x, [30_000, 30_000], { steps: [{ hold: held }, { text: "reported" }] });
    const first = await reportTurn(x, 1);
    assert.deepEqual(first.started.origin, { kind: "background", jobs: ["job-1"] });
    const from = x.c.frames.length;
    const queued = x.c.request({ type: "turn.start", session_id: x.session, prompt: "meanwhile" });
    await x.c.waitFor((m) => m.type === "queue.enqueued" && m.request_id === queued, from, "the user's prompt queued");
    release();
    assert.equal((await first.terminal).type, "turn.completed");
    const user = await x.c.waitFor((m) => m.request_id === queued && TERMINAL.includes(m.type as string), from, "the user's turn");
    assert.equal(user.type, "turn.completed");
    // Before: job-2 waited, unseen, until another job ended.
    const second = await reportTurn(x, 2);
    assert.deepEqual(second.started.origin, { kind: "background", jobs: ["job-2"] });
    assert.equal((await second.terminal).type, "turn.completed");
    assert.deepEqual(turnsStarted(x).slice(1), ["background:1", queued, "background:2"]);
    const prompts = reportPrompts(x);
    assert.equal(prompts.length, 2);
    assert.match(prompts[0]!, /Background job job-2 \(agent_codex: \{"a":30000\}, completed\) also ended; its result did not fit/);
    assert.match(prompts[1]!, /^Background job job-2 \(agent_codex: \{"a":30000\}\) ended: completed\.\n\{.*"reply":"a{30000}"/s);
    // Nothing is left: the next turn runs with no report between.
    const next = await x.c.turn(x.session, "and now?");
    assert.equal(next.terminal.type, "turn.completed");
    assert.deepEqual(turnsStarted(x).slice(1), ["background:1", queued, "background:2", next.requestId]);
  } finally {
    await close(x);
  }
});

it("a paused session: the next report queues behind the user's prompts and runs once unpaused, after them", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await startJobs(x, [30_000, 30_000], { steps: [{ hold: held }, { text: "reported" }] });
    const first = await reportTurn(x, 1);
    const from = x.c.frames.length;
    const pause = x.c.request({ type: "session.pause", session_id: x.session, paused: true });
    await x.c.reply(pause, ["session.paused"], from);
    const queued = x.c.request({ type: "turn.start", session_id: x.session, prompt: "meanwhile" });
    await x.c.waitFor((m) => m.type === "queue.enqueued" && m.request_id === queued, from, "the user's prompt queued");
    release();
    assert.equal((await first.terminal).type, "turn.completed");
    // Paused: the next report is queued, behind the user's prompt; nothing runs.
    await x.c.waitFor((m) => m.type === "queue.enqueued" && m.request_id === "background:2", from, "the next report queued");
    assert.deepEqual(turnsStarted(x).slice(1), ["background:1"]);
    const resume = x.c.request({ type: "session.pause", session_id: x.session, paused: false });
    await x.c.reply(resume, ["session.paused"], from);
    const second = await reportTurn(x, 2);
    assert.deepEqual(second.started.origin, { kind: "background", jobs: ["job-2"] });
    assert.equal((await second.terminal).type, "turn.completed");
    assert.deepEqual(turnsStarted(x).slice(1), ["background:1", queued, "background:2"]);
  } finally {
    await close(x);
  }
});

for (const drop of ["queue.remove", "session.clear"] as const) {
  it(`a queued report turn dropped by ${drop} settles nothing: its job is reported after the user's next turn`, { timeout: 60_000 }, async () => {
    const x = await setup();
    try {
      // Paused while the turn that starts the job runs: the report is queued, not run.
      let release!: () => void;
      const paused = new Promise<void>((r) => (release = r));
      const from = x.c.frames.length;
      const started = startJobs(x, [10], { steps: [{ text: "reported" }] }, paused);
      await x.c.waitFor((m) => m.type === "tool.completed" && m.call_id === "call_0", from, "the job started");
      const pause = x.c.request({ type: "session.pause", session_id: x.session, paused: true });
      await x.c.reply(pause, ["session.paused"], from);
      release();
      await started;
      const queued = await x.c.waitFor((m) => m.type === "queue.enqueued" && m.request_id === "background:1", from, "the report queued");
      const entry = queued.entry as { queue_id: string; revision: number };
      if (drop === "queue.remove") {
        const remove = x.c.request({ type: "queue.remove", session_id: x.session, queue_id: entry.queue_id, revision: entry.revision });
        await x.c.waitFor((m) => m.type === "queue.removed" && m.queue_id === entry.queue_id, from, "the report removed");
        assert.equal(x.c.frames.find((m) => m.request_id === remove && m.type === "error"), undefined);
      } else {
        const clear = x.c.request({ type: "session.clear", session_id: x.session });
        assert.equal((await x.c.reply(clear, ["session.cleared"], from)).type, "session.cleared");
      }
      const resume = x.c.request({ type: "session.pause", session_id: x.session, paused: false });
      await x.c.reply(resume, ["session.paused"], from);
      // Not at once: the user's next turn runs, then the job is reported.
      const user = await x.c.turn(x.session, "anything new?");
      assert.equal(user.terminal.type, "turn.completed");
      const again = await reportTurn(x, 2);
      assert.deepEqual(again.started.origin, { kind: "background", jobs: ["job-1"] });
      assert.equal((await again.terminal).type, "turn.completed");
      assert.deepEqual(turnsStarted(x).slice(1), [user.requestId, "background:2"]);
    } finally {
      await close(x);
    }
  });
}
