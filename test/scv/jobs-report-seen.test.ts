/**
 * A report turn settles its jobs once the model has seen the report: once its first provider response came in full.
 *
 * Before, a report's jobs were settled only when its turn ended `turn.completed`: a report turn whose model already
 * answered (the reply streamed to the user) and which then failed at a later step, or was cancelled after the reply,
 * left its jobs unsettled, so they were reported again in a later report turn (the user saw the same report twice,
 * the model results it already had), its terminal `origin.jobs` named none, and `agent_wait` in the report turn itself
 * showed them as new (its `jobs` naming them a second time). A report turn that fails or is cancelled before its first
 * response came in full (a 429 after its retries, a cancel while it streams) still settles nothing: its jobs are
 * reported again after the user's next turn. A Berth process killed mid-report loses its jobs with it.
 *
 * Driven over `berth stdio` with a fake `codex` (the real `exec --json` stream and `-o` file) on the fake provider;
 * asserted: the SCV frames and the report prompts the provider got.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { spawnStdio, type Msg } from "./client.js";
import { close, reportPrompts, reportTurn, setup, startJobs, turnsStarted, type Setup } from "./jobs-rig.js";

/** A first response that answers and calls a tool (one that touches no job), so the turn goes on to a second step. */
const ANSWER_THEN_STEP = { steps: [{ text: "reported" }, { toolCall: { id: "call_x", name: "no_such_tool", arguments: {} } }] };

/** Two plain user turns; asserts no report turn started after the one that ended last (`since`). */
async function noReportAfter(x: Setup, since: string[]): Promise<void> {
  const a = await x.c.turn(x.session, "anything new?");
  assert.equal(a.terminal.type, "turn.completed");
  const b = await x.c.turn(x.session, "and now?");
  assert.equal(b.terminal.type, "turn.completed");
  assert.deepEqual(turnsStarted(x).slice(1), [...since, a.requestId, b.requestId]);
}

/** A user turn calling agent_wait and agent_status with no job named: their outputs and the jobs their calls name. */
async function tools(x: Setup): Promise<{ wait: Msg; status: Msg }> {
  x.rig.fake.script([
    { steps: [{ toolCall: { id: "call_w", name: "agent_wait", arguments: { timeout_seconds: 1 } } }, { toolCall: { id: "call_s", name: "agent_status", arguments: {} } }] },
    { steps: [{ text: "ok" }] },
  ]);
  const t = await x.c.turn(x.session, "what about the jobs?");
  assert.equal(t.terminal.type, "turn.completed");
  const of = (id: string): Msg => t.frames.find((f) => f.type === "tool.completed" && f.call_id === id)!;
  return { wait: of("call_w"), status: of("call_s") };
}

it("a report turn that answered, then failed at its second step, settled its jobs: named in origin.jobs, never reported again", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    await startJobs(x, [10], [ANSWER_THEN_STEP, { status: 400 }]);
    const first = await reportTurn(x, 1);
    assert.deepEqual(first.started.origin, { kind: "background", jobs: ["job-1"] });
    const failed = await first.terminal;
    assert.equal(failed.type, "turn.failed", JSON.stringify(failed));
    const answered = x.c.frames.find((m) => m.type === "assistant.completed" && m.request_id === "background:1");
    assert.equal(answered?.content, "reported");
    // The model saw the report: the terminal event names the job settled (before: none).
    assert.deepEqual(failed.origin, { kind: "background", jobs: ["job-1"] });
    // Before: the user's next turn was followed by a second report of job-1.
    await noReportAfter(x, ["background:1"]);
    assert.equal(reportPrompts(x).length, 2); // the one report turn's two steps
    // Settled: agent_wait with no job named waits for nothing, agent_status shows it without naming it again.
    const { wait, status } = await tools(x);
    assert.equal(wait.output, '{"jobs":[]}');
    assert.equal(wait.jobs, undefined);
    assert.match(status.output as string, /"job":"job-1","tool":"agent_codex","status":"completed".*\\"reply\\":\\"a{10}\\"/);
    assert.equal(status.jobs, undefined);
  } finally {
    await close(x);
  }
});

it("a report turn the provider refuses at its first step (429 after its retries) settles nothing: reported again after the next turn", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    const limited = { status: 429, headers: { "retry-after": "0" } };
    await startJobs(x, [10], [limited, limited, limited]);
    const first = await reportTurn(x, 1);
    const failed = await first.terminal;
    assert.equal(failed.type, "turn.failed", JSON.stringify(failed));
    assert.match(failed.message as string, /provider rate limit \(HTTP 429 [^)]*; 3 attempts\)/);
    assert.deepEqual(failed.origin, { kind: "background", jobs: [] });
    const user = await x.c.turn(x.session, "anything new?");
    assert.equal(user.terminal.type, "turn.completed");
    const again = await reportTurn(x, 2);
    assert.deepEqual(again.started.origin, { kind: "background", jobs: ["job-1"] });
    const done = await again.terminal;
    assert.deepEqual([done.type, done.origin], ["turn.completed", { kind: "background", jobs: ["job-1"] }]);
    assert.deepEqual(turnsStarted(x).slice(1), ["background:1", user.requestId, "background:2"]);
    assert.equal(reportPrompts(x).length, 4); // three attempts of the first, one of the second
  } finally {
    await close(x);
  }
});

it("a report turn cancelled while its first answer streams settles nothing: unsettled for the job tools, else reported again", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    await startJobs(x, [10], { steps: [{ text: "job-1 end" }, { waitForAbort: true }] });
    const first = await reportTurn(x, 1);
    await x.c.waitFor((m) => m.type === "assistant.delta" && m.request_id === "background:1", 0, "the report's first text");
    x.c.request({ type: "turn.cancel", session_id: x.session, turn_id: first.started.turn_id });
    const cancelled = await first.terminal;
    assert.equal(cancelled.type, "turn.cancelled", JSON.stringify(cancelled));
    assert.deepEqual(cancelled.origin, { kind: "background", jobs: [] });
    const user = await x.c.turn(x.session, "anything new?");
    assert.equal(user.terminal.type, "turn.completed");
    const again = await reportTurn(x, 2);
    assert.deepEqual(again.started.origin, { kind: "background", jobs: ["job-1"] });
    assert.equal((await again.terminal).type, "turn.completed");
    assert.deepEqual(turnsStarted(x).slice(1), ["background:1", user.requestId, "background:2"]);
  } finally {
    await close(x);
  }
});

it("a report turn cancelled after its first answer came in full settled its jobs: named in origin.jobs, never reported again", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    await startJobs(x, [10], [ANSWER_THEN_STEP, { steps: [{ waitForAbort: true }] }]);
    const first = await reportTurn(x, 1);
    // The second step's request is out: the first answer came in full.
    await x.rig.fake.waitForRequests(4);
    x.c.request({ type: "turn.cancel", session_id: x.session, turn_id: first.started.turn_id });
    const cancelled = await first.terminal;
    assert.equal(cancelled.type, "turn.cancelled", JSON.stringify(cancelled));
    assert.deepEqual(cancelled.origin, { kind: "background", jobs: ["job-1"] });
    await noReportAfter(x, ["background:1"]);
    const { wait, status } = await tools(x);
    assert.equal(wait.output, '{"jobs":[]}');
    assert.deepEqual([wait.jobs, status.jobs], [undefined, undefined]);
  } finally {
    await close(x);
  }
});

it("agent_wait in the report turn itself, after its first answer, shows no job as new: the report already settled them", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    await startJobs(x, [10], [{ steps: [{ toolCall: { id: "call_w", name: "agent_wait", arguments: { timeout_seconds: 1 } } }] }, { steps: [{ text: "reported" }] }]);
    const first = await reportTurn(x, 1);
    const done = await first.terminal;
    assert.deepEqual([done.type, done.origin], ["turn.completed", { kind: "background", jobs: ["job-1"] }]);
    const wait = x.c.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_w" && m.request_id === "background:1")!;
    // Before: it showed job-1 again and named it in `jobs`, a second time after the report's origin.jobs.
    assert.equal(wait.output, '{"jobs":[]}');
    assert.equal(wait.jobs, undefined);
  } finally {
    await close(x);
  }
});

it("a berth stdio killed mid-report loses its jobs: the resumed session reports nothing and names job-1 as lost", { skip: process.platform !== "linux", timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    await startJobs(x, [10], { steps: [{ text: "job-1 end" }, { waitForAbort: true }] });
    const first = await reportTurn(x, 1);
    void first.terminal.catch(() => undefined); // it never ends: the process is killed
    await x.c.waitFor((m) => m.type === "assistant.delta" && m.request_id === "background:1", 0, "the report's first text");
    x.child.kill("SIGKILL");
    await x.exited;
    const second = spawnStdio(x.env);
    try {
      const s = await second.client.open({ resume: x.session }, x.cwd);
      assert.equal(s.session_id, x.session);
      x.rig.fake.script([{ steps: [{ toolCall: { id: "call_s", name: "agent_status", arguments: { job: "job-1" } } }] }, { steps: [{ text: "ok" }] }]);
      const t = await second.client.turn(x.session, "how is the job?");
      assert.equal(t.terminal.type, "turn.completed");
      const st = t.frames.find((m) => m.type === "tool.completed" && m.call_id === "call_s")!;
      assert.equal(st.error, "unavailable");
      assert.match(st.output as string, /job-1 was started before this session was last opened and was stopped when that connection or Berth process ended; its result is lost/);
      const next = await second.client.turn(x.session, "and now?");
      assert.equal(next.terminal.type, "turn.completed");
      assert.deepEqual(
        second.client.frames.filter((m) => m.type === "turn.started").map((m) => m.request_id),
        [t.requestId, next.requestId],
      );
    } finally {
      second.client.end();
      await second.exited;
    }
  } finally {
    await x.rig.fake.close();
  }
});
