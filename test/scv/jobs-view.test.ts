/**
 * The job tools' view when a session has many jobs or large results: every answer is one valid JSON object within a
 * tool result's bound (never cut through the middle by the generic result bound), and a job counts as settled only
 * when its result was in the answer. A job left out for room stays unsettled: a later call shows it (or a report
 * turn does). Driven through JobBook's own tools with jobs that end at once.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { JobBook, MAX_ENDED_JOBS, MAX_RUNNING_JOBS, MAX_VIEW_BYTES } from "../../src/cli/delegates/jobs.js";
import { MAX_RESULT_BYTES } from "../../src/runtime/tools/result.js";
import type { Tool, ToolResult } from "../../src/runtime/types.js";

const ctx = { cwd: "/", signal: new AbortController().signal, onProgress: () => undefined };

async function book(results: string[]): Promise<{ tools: Map<string, Tool>; reports: number }> {
  const state = { reports: 0 };
  const b = new JobBook(() => void state.reports++);
  const jobs = results.map((r, i) => b.start("s1", "agent_codex", `task ${i}`, () => Promise.resolve<ToolResult>({ content: r, isError: false })));
  await Promise.all(jobs.map((j) => j.done));
  return { tools: new Map(b.tools("s1").map((t) => [t.spec.name, t])), reports: state.reports };
}

type View = { jobs: Array<{ job: string; result?: string; result_omitted?: boolean; result_cut?: boolean }>; omitted?: number };

async function call(tools: Map<string, Tool>, name: string, args: Record<string, unknown>): Promise<{ view: View; settled: string[]; bytes: number }> {
  const r = await tools.get(name)!.run(args, ctx);
  assert.equal(r.isError, false, r.content);
  return { view: JSON.parse(r.content) as View, settled: (r.jobs ?? []).map((j) => j.job), bytes: Buffer.byteLength(r.content) };
}

// A session keeps at most MAX_ENDED_JOBS ended jobs (jobs-bound.test.ts): the most an answer ever lists.
it("every ended job a session keeps: each answer is valid JSON within the bound; every result is shown once, whole, then settled", async () => {
  const results = Array.from({ length: MAX_ENDED_JOBS }, (_, i) => `result ${i} ${"x".repeat(1000)}`);
  const { tools, reports } = await book(results);
  assert.equal(reports, MAX_ENDED_JOBS);
  assert.ok(MAX_VIEW_BYTES < MAX_RESULT_BYTES);
  const seen = new Map<string, string>();
  for (let round = 0; seen.size < MAX_ENDED_JOBS; round++) {
    assert.ok(round < MAX_ENDED_JOBS, "every call settles at least one job");
    const { view, settled, bytes } = await call(tools, "agent_wait", {});
    assert.ok(bytes <= MAX_VIEW_BYTES, `${bytes} bytes`);
    const shown = view.jobs.filter((j) => j.result !== undefined);
    assert.deepEqual(settled, shown.map((j) => j.job), "settled exactly the jobs whose result was shown");
    for (const j of shown) {
      assert.equal(seen.has(j.job), false, `${j.job} shown twice`);
      seen.set(j.job, j.result!);
    }
  }
  for (let i = 0; i < MAX_ENDED_JOBS; i++) assert.equal(seen.get(`job-${i + 1}`), results[i]);
  // agent_status lists every job; what does not fit is counted, not cut.
  const all = await call(tools, "agent_status", {});
  assert.ok(all.bytes <= MAX_VIEW_BYTES);
  assert.deepEqual(all.settled, []);
  assert.equal(all.view.jobs.length + (all.view.omitted ?? 0), MAX_ENDED_JOBS);
});

it("one result larger than the bound is shown cut, as valid JSON, and settled; one that fits exactly is whole", async () => {
  const { tools } = await book(["y".repeat(64 * 1024), "z".repeat(10)]);
  const { view, settled, bytes } = await call(tools, "agent_wait", { jobs: "job-1" });
  assert.ok(bytes <= MAX_VIEW_BYTES);
  assert.deepEqual(settled, ["job-1"]);
  assert.equal(view.jobs[0]!.result_cut, true);
  assert.match(view.jobs[0]!.result!, /^y+$/);
  // Text that JSON escapes (quotes, controls) is cut by its escaped size, never to nothing.
  const esc = await book(['"\u0001'.repeat(20 * 1024)]);
  const e = await call(esc.tools, "agent_wait", {});
  assert.ok(e.bytes <= MAX_VIEW_BYTES, `${e.bytes} bytes`);
  assert.ok(e.view.jobs[0]!.result!.length > 4096);
  const two = await call(tools, "agent_status", { job: "job-2" });
  assert.equal(two.view.jobs[0]!.result, "z".repeat(10));
  assert.equal(two.view.jobs[0]!.result_cut, undefined);
});

it("at the bound: the largest result shown whole fills the answer to within 32 bytes; one byte more is cut", async () => {
  const whole: boolean[] = [];
  const sizes: number[] = [];
  const from = MAX_VIEW_BYTES - 160;
  for (let n = from; n <= MAX_VIEW_BYTES; n++) {
    const { tools } = await book(["w".repeat(n)]);
    const { view, bytes } = await call(tools, "agent_wait", {});
    assert.ok(bytes <= MAX_VIEW_BYTES, `${n}: ${bytes} bytes`);
    whole.push(view.jobs[0]!.result === "w".repeat(n));
    sizes.push(bytes);
  }
  const t = whole.indexOf(false) - 1;
  assert.ok(t >= 0, "the bound was reached within the sizes tried");
  assert.ok(whole.slice(0, t + 1).every(Boolean) && !whole.slice(t + 1).some(Boolean), "whole up to one size, cut past it");
  assert.ok(sizes[t]! > MAX_VIEW_BYTES - 32, `the largest whole answer is ${sizes[t]} bytes`);
});

it("a thousand jobs ended unseen: the session keeps the last ones, each call shows whole results and settles only those", async () => {
  const results = Array.from({ length: 1000 }, (_, i) => `r${i} ${"v".repeat(2000)}`);
  const { tools } = await book(results);
  const seen = new Map<string, string>();
  for (let round = 0; seen.size < MAX_ENDED_JOBS; round++) {
    assert.ok(round < MAX_ENDED_JOBS, "every call settles at least one job");
    const { view, settled, bytes } = await call(tools, "agent_wait", {});
    assert.ok(bytes <= MAX_VIEW_BYTES, `${bytes} bytes`);
    const shown = view.jobs.filter((j) => j.result !== undefined);
    assert.ok(shown.length > 0);
    assert.deepEqual(settled, shown.map((j) => j.job));
    for (const j of shown) {
      assert.equal(j.result_cut, undefined, `${j.job} cut`);
      assert.equal(seen.has(j.job), false, `${j.job} shown twice`);
      seen.set(j.job, j.result!);
    }
  }
  for (let i = 1000 - MAX_ENDED_JOBS; i < 1000; i++) assert.equal(seen.get(`job-${i + 1}`), results[i]);
});

it("at most MAX_RUNNING_JOBS background jobs run in a session: one more is refused with the fix until one ends", async () => {
  const b = new JobBook(() => undefined);
  const ends: Array<() => void> = [];
  const start = (session: string): void =>
    void b.start(session, "agent_codex", "work", () => new Promise<ToolResult>((r) => ends.push(() => r({ content: "done", isError: false }))));
  for (let i = 0; i < MAX_RUNNING_JOBS - 1; i++) start("s1");
  assert.equal(b.refusal("s1", "agent_codex"), null, "one below the bound: the next may start");
  start("s1");
  const refused = b.refusal("s1", "agent_codex");
  assert.equal(refused?.isError, true);
  assert.equal(refused?.errorKind, "limit");
  assert.match(String(refused?.content), /^agent_codex: 16 background jobs are already running in this session; wait for some to end \(agent_wait\) or cancel one \(agent_cancel\)/);
  assert.equal(b.refusal("s2", "agent_codex"), null, "another session has its own bound");
  ends[0]!();
  await new Promise((r) => setImmediate(r));
  assert.equal(b.refusal("s1", "agent_codex"), null, "a job that ended frees its place");
  for (const e of ends) e();
  await b.close();
});
