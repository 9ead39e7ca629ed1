/**
 * Ended background jobs (each with its result, up to 64 KiB) stayed in a session's job book until the session closed,
 * so a long session running many jobs grew without bound. A session now keeps `MAX_ENDED_JOBS`: at the bound every
 * job is kept; one past it, the job that ended first among those already seen goes, else the first unseen one, which
 * the job tools then name as discarded (with the bound) and the next report turn names too. Driven through
 * JobBook's own tools with jobs that end when the test says.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { JobBook, MAX_ENDED_JOBS, type ReportTurn } from "../../src/cli/delegates/jobs.js";
import type { Tool, ToolResult } from "../../src/runtime/types.js";

const ctx = { cwd: "/", signal: new AbortController().signal, onProgress: () => undefined };
type Report = () => { prompt: string; jobs: string[] } | null;

function book(): { b: JobBook; tools: Map<string, Tool>; reports: Report[]; end: (n: number) => Promise<void> } {
  const reports: Report[] = [];
  const b = new JobBook((_s, build) => void reports.push(build));
  // Ends `n` more jobs, one after another (each its own result).
  const end = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) await b.start("s1", "agent_codex", "work", () => Promise.resolve<ToolResult>({ content: `result ${Math.random()}`, isError: false })).done;
  };
  return { b, tools: new Map(b.tools("s1").map((t) => [t.spec.name, t])), reports, end };
}

const call = (tools: Map<string, Tool>, name: string, args: Record<string, unknown>): Promise<ToolResult> => tools.get(name)!.run(args, ctx);
const shown = async (tools: Map<string, Tool>, job: string): Promise<string[]> => {
  const r = await call(tools, "agent_status", { job });
  assert.equal(r.isError, false, r.content);
  return (JSON.parse(r.content) as { jobs: Array<{ job: string; result?: string }> }).jobs.map((j) => `${j.job}:${j.result !== undefined}`);
};
const DISCARDED = new RegExp(`^agent_(status|wait): job-1 ended and was discarded: a session keeps at most ${MAX_ENDED_JOBS} ended jobs`);

it(`a session keeps ${MAX_ENDED_JOBS} ended unseen jobs; one more discards the first to end, named by the job tools and the report`, async () => {
  // At the bound: every job is kept, the first one too, with its result.
  const at = book();
  await at.end(MAX_ENDED_JOBS);
  const all = JSON.parse((await call(at.tools, "agent_status", {})).content) as { jobs: Array<{ job: string; result?: string }> };
  assert.equal(all.jobs.length, MAX_ENDED_JOBS);
  assert.equal(all.jobs[0]!.job, "job-1");
  assert.notEqual(all.jobs[0]!.result, undefined);
  const { tools, reports, end } = book();
  await end(MAX_ENDED_JOBS + 1);
  // One past it, every job unseen: the first to end goes, and saying so names the bound.
  for (const [tool, args] of [["agent_status", { job: "job-1" }], ["agent_wait", { jobs: "job-1" }]] as const) {
    const r = await call(tools, tool, args);
    assert.equal(r.isError, true);
    assert.equal(r.errorKind, "unavailable");
    assert.match(r.content, DISCARDED);
  }
  const unknown = await call(tools, "agent_status", { job: `job-${MAX_ENDED_JOBS + 2}` });
  assert.equal(unknown.content, `agent_status: no job job-${MAX_ENDED_JOBS + 2} in this session`, "a job never started is still unknown");
  // The report turn names the discarded job with the ended ones.
  const report = reports.at(-1)!()!;
  assert.equal(report.jobs.length, MAX_ENDED_JOBS + 1);
  assert.equal(report.jobs[0], "job-2");
  assert.equal(report.jobs.at(-1), "job-1");
  assert.match(report.prompt, new RegExp(`Background job job-1 ended, but its result was discarded unseen: a session keeps at most ${MAX_ENDED_JOBS} ended jobs\\.`));
  assert.equal(reports.at(-1)!(), null, "reported once");
});

it("one past the bound, a job whose result was already seen goes before any unseen one, however old", async () => {
  const { tools, end } = book();
  await end(MAX_ENDED_JOBS);
  // job-5 and job-9 are seen (waited for); job-1 .. job-4 are older but unseen.
  for (const job of ["job-9", "job-5"]) assert.deepEqual(await shown(tools, job), [`${job}:true`]);
  const waited = await call(tools, "agent_wait", { jobs: "job-9 job-5" });
  assert.equal(waited.isError, false);
  await end(1);
  // job-5 ended before job-9, so it went first; every unseen job is kept.
  assert.match((await call(tools, "agent_status", { job: "job-5" })).content, /^agent_status: job-5 ended and was discarded/);
  assert.deepEqual(await shown(tools, "job-9"), ["job-9:true"]);
  assert.deepEqual(await shown(tools, "job-1"), ["job-1:true"]); // now seen too, and it ended before job-9
  await end(1);
  assert.match((await call(tools, "agent_status", { job: "job-1" })).content, /^agent_status: job-1 ended and was discarded/);
  assert.deepEqual(await shown(tools, "job-9"), ["job-9:true"]);
  assert.deepEqual(await shown(tools, "job-2"), ["job-2:true"]);
});

it("running jobs are neither counted nor discarded", async () => {
  const { b, tools, end } = book();
  let finish!: () => void;
  const running = b.start("s1", "agent_codex", "long", () => new Promise<ToolResult>((r) => (finish = () => r({ content: "late", isError: false }))));
  await end(MAX_ENDED_JOBS + 1);
  assert.deepEqual(await shown(tools, "job-1"), ["job-1:false"], "the running job is kept, without a result");
  assert.match((await call(tools, "agent_status", { job: "job-2" })).content, /^agent_status: job-2 ended and was discarded/);
  finish();
  await running.done;
  // It ended last: the first unseen ended job (job-3) made room for it.
  assert.deepEqual(await shown(tools, "job-1"), ["job-1:true"]);
  assert.match((await call(tools, "agent_status", { job: "job-3" })).content, /^agent_status: job-3 ended and was discarded/);
  await b.close();
});

it("a job discarded while a report showing it is out: named discarded only if the model never saw that report", async () => {
  // "seen": its first response came in full (then its turn failed at a later step): as good as completed.
  for (const how of ["completed", "seen", "failed"] as const) {
    const completed = how !== "failed";
    const reports: Array<{ build: () => ReportTurn | null; afterTurn: boolean }> = [];
    const b = new JobBook((_s, build, afterTurn) => void reports.push({ build, afterTurn: afterTurn === true }));
    const end = (): Promise<void> => b.start("s1", "agent_codex", "work", () => Promise.resolve<ToolResult>({ content: "done", isError: false })).done;
    for (let i = 0; i < MAX_ENDED_JOBS; i++) await end();
    const first = reports[0]!.build()!;
    assert.equal(first.jobs.length, MAX_ENDED_JOBS);
    // One more ends while the report is out: job-1, shown by it, is the first unseen to end and goes.
    await end();
    assert.equal(reports.at(-1)!.build(), null, "one report out at a time");
    if (how === "seen") first.seen();
    first.ended(how === "completed");
    const next = reports.at(-1)!;
    // Completed (or seen): job-1 was shown, so it is not named discarded; the next report shows job-65 alone, at once.
    // Not completed: a job ended while it was out, so the next report is at once too, naming job-1 discarded.
    assert.equal(next.afterTurn, false);
    const r = next.build()!;
    if (completed) {
      assert.deepEqual(r.jobs, [`job-${MAX_ENDED_JOBS + 1}`]);
      assert.ok(!r.prompt.includes("discarded"), r.prompt.slice(-300));
    } else {
      assert.deepEqual(r.jobs, [...Array.from({ length: MAX_ENDED_JOBS }, (_, i) => `job-${i + 2}`), "job-1"]);
      assert.match(r.prompt, /Background job job-1 ended, but its result was discarded unseen: a session keeps at most 64 ended jobs\./);
    }
    await b.close();
  }
});

it("a report that did not complete with no job ended since is asked again only after the session's next turn", async () => {
  const reports: Array<{ build: () => ReportTurn | null; afterTurn: boolean }> = [];
  const b = new JobBook((_s, build, afterTurn) => void reports.push({ build, afterTurn: afterTurn === true }));
  await b.start("s1", "agent_codex", "work", () => Promise.resolve<ToolResult>({ content: "done", isError: false })).done;
  const r = reports[0]!.build()!;
  r.ended(false);
  r.ended(true); // told once: a second call changes nothing
  assert.equal(reports.length, 2);
  assert.equal(reports[1]!.afterTurn, true);
  assert.deepEqual(reports[1]!.build()!.jobs, ["job-1"]);
  await b.close();
});
