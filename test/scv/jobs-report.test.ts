/**
 * The report turn of background jobs that ended unseen is bounded. Before, Berth put every unseen job's result into
 * one user prompt: a session keeps up to 64 ended jobs of up to 50 KiB each, so the prompt could reach megabytes,
 * past the 256 KiB bound of any prompt and past the model's window: the report turn failed (or the provider refused
 * it) and the user never heard of the jobs. Now the prompt is at most `MAX_REPORT_BYTES`: results get the room in the
 * order the jobs were started, the first cut to fit (a delegated agent's result stays a JSON document saying what it left
 * out), the rest left out and named, with how to get them (`agent_status`/`agent_wait`); a job left out stays
 * unsettled (not in `origin.jobs`): the job tools show its result, or the next report turn, which follows at once.
 *
 * Driven over `berth stdio` with a fake `codex` (the real `exec --json` stream and `-o` file) on the fake provider;
 * what is asserted is the report turn's frames and the user prompt of the fake provider's request for it. The turn
 * that starts the jobs is held open (its last answer streams only once every job has ended in Berth: its `-o` file,
 * which Berth removes once it has read it, is gone), so every job ends unseen before the session is idle.
 */
import assert from "node:assert/strict";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { lastUserText } from "../fakes/fake-provider.js";
import { JobBook, MAX_ENDED_JOBS } from "../../src/cli/delegates/jobs.js";
import { MAX_RESULT_BYTES } from "../../src/runtime/tools/result.js";
import type { ToolResult } from "../../src/runtime/types.js";
import type { Msg } from "./client.js";
import { jobsEnded, REPORT, setup, type Setup } from "./jobs-rig.js";

/** The prompt's bound (jobs.ts `MAX_REPORT_BYTES`). */
const MAX_REPORT_BYTES = 40 * 1024;

let turns = 0;

/**
 * One client turn starting a background job per reply size, held open until they all ended; then the report turn
 * it leads to: its `turn.started` and terminal frames, and the user prompt the provider got for it.
 */
async function reportOf(x: Setup, sizes: number[]): Promise<{ started: Msg; terminal: Msg; prompt: string }> {
  for (const f of readdirSync(x.marks)) rmSync(join(x.marks, f));
  const done = jobsEnded(x.marks, sizes.length);
  const k = ++turns;
  const reportsBefore = reportPrompts(x).length;
  x.rig.fake.script([
    { steps: sizes.map((a, i) => ({ toolCall: { id: `call_${k}_${i}`, name: "agent_codex", arguments: { prompt: JSON.stringify({ a }), background: true } } })) },
    { steps: [{ hold: done }, { text: "started" }] },
  ]);
  const from = x.c.frames.length;
  const t = await x.c.turn(x.session, "start the jobs");
  assert.equal(t.terminal.type, "turn.completed", JSON.stringify(t.terminal));
  const started = await x.c.waitFor((m) => m.type === "turn.started" && String(m.request_id).startsWith("background:"), from, "the report turn");
  const terminal = await x.c.waitFor((m) => m.request_id === started.request_id && ["turn.completed", "turn.failed", "turn.cancelled"].includes(m.type as string), from, "the report's end");
  // This report's request (a report that follows it, for jobs it left out, may already have been sent).
  const prompt = reportPrompts(x)[reportsBefore];
  assert.ok(prompt !== undefined, `the provider got no report; the client saw ${JSON.stringify(terminal).slice(0, 600)}`);
  return { started, terminal, prompt };
}

const reportPrompts = (x: Setup): string[] => x.rig.fake.requests.filter((q) => q.method === "POST" && REPORT.test(lastUserText(q.json))).map((q) => lastUserText(q.json));

/** The report turn `background:<n>`: its terminal frame. */
function reportEnd(x: Setup, n: number): Promise<Msg> {
  return x.c.waitFor((m) => m.request_id === `background:${n}` && ["turn.completed", "turn.failed", "turn.cancelled"].includes(m.type as string), 0, `the end of report ${n}`);
}

/** A client turn whose model calls `agent_status` (`job`, or every job): its output and the jobs it settled. */
async function status(x: Setup, job?: string): Promise<{ jobs: Array<{ job: string; result?: string; result_cut?: boolean }>; settled: Msg[] }> {
  const k = ++turns;
  x.rig.fake.script([{ steps: [{ toolCall: { id: `call_s${k}`, name: "agent_status", arguments: job !== undefined ? { job } : {} } }] }, { steps: [{ text: "ok" }] }]);
  const t = await x.c.turn(x.session, "status");
  assert.equal(t.terminal.type, "turn.completed", JSON.stringify(t.terminal));
  const done = t.frames.find((f) => f.type === "tool.completed" && f.call_id === `call_s${k}`)!;
  assert.equal(done.success, true, String(done.output));
  return { jobs: (JSON.parse(done.output as string) as { jobs: Array<{ job: string; result?: string }> }).jobs, settled: (done.jobs as Msg[] | undefined) ?? [] };
}

const bytes = (s: string): number => Buffer.byteLength(s);

async function close(x: Setup): Promise<void> {
  x.c.end();
  assert.equal(await x.exited, 0);
  await x.rig.fake.close();
}

it("twelve results near the tool result bound: the report holds what fits, names the rest, and the next reports show them", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    const n = 12;
    const { started, terminal, prompt } = await reportOf(x, Array.from({ length: n }, () => 50_000));
    // Before: a prompt of all twelve results (about 600 KB) failed the report turn.
    assert.equal(terminal.type, "turn.completed", JSON.stringify(terminal));
    assert.ok(bytes(prompt) <= MAX_REPORT_BYTES, `the report prompt is ${bytes(prompt)} bytes`);
    // The first result is cut to fit, a JSON document saying what it left out; the job is settled.
    assert.deepEqual(started.origin, { kind: "background", jobs: ["job-1"] });
    assert.deepEqual(terminal.origin, started.origin);
    const first = /^Background job job-1 \(agent_codex: \{"a":50000\}\) ended: completed\. Its result is cut to fit this message:\n(\{.*\})\n\n/s.exec(prompt);
    assert.ok(first !== null, prompt.slice(0, 300));
    const r = JSON.parse(first[1]!) as { reply: string; truncated: boolean; reply_bytes: number; note: string };
    assert.equal(r.truncated, true);
    assert.equal(r.reply_bytes, 50_000);
    assert.match(r.reply, /^a+$/);
    assert.match(r.note, new RegExp(`to fit the ${MAX_REPORT_BYTES}-byte report of background jobs`));
    // The others are named, with how to see their results; none of them is shown.
    const rest = Array.from({ length: n - 1 }, (_, i) => `job-${i + 2}`);
    assert.ok(
      prompt.endsWith(
        `\n\nBackground jobs ${rest.map((j) => `${j} (agent_codex: {"a":50000}, completed)`).join(", ")} also ended; their results did not fit in this message (at most ${MAX_REPORT_BYTES} bytes): call agent_status or agent_wait to see them.\n\nReport these results to the user.`,
      ),
      prompt.slice(-600),
    );
    assert.equal(prompt.split('"reply":').length, 2, "one result shown");
    // A job left out is unsettled: the next report follows at once and shows it (each result alone is past the
    // bound: one job a report), and so on until every job was shown, each once.
    for (let k = 2; k <= n; k++) assert.equal((await reportEnd(x, k)).type, "turn.completed");
    const origins = x.c.frames.filter((m) => m.type === "turn.started" && m.origin !== undefined).map((m) => `${m.request_id as string}:${(m.origin as { jobs: string[] }).jobs.join()}`);
    assert.deepEqual(origins, Array.from({ length: n }, (_, i) => `background:${i + 1}:job-${i + 1}`));
    // (Twelve prompts of 40 KiB pass the fake model's window: one of them was compacted first.)
    assert.match(reportPrompts(x).at(-1)!, /^Background job job-12 \(agent_codex: \{"a":50000\}\) ended: completed\. Its result is cut to fit this message:\n\{.*\}\n\nReport these results to the user\.$/s);
    // Seen: agent_status shows job-12's result but settles nothing, and no report follows the next turn.
    const s = await status(x, "job-12");
    assert.match(s.jobs[0]!.result!, /^\{"agent":"codex","status":"completed","reply":"a+"/);
    assert.deepEqual(s.settled, []);
    assert.equal(x.c.frames.filter((m) => m.type === "turn.started" && m.origin !== undefined).length, n);
  } finally {
    await close(x);
  }
});

it("at the bound every result is in the report; one byte more leaves the last out, named, and the next report shows it", { timeout: 60_000 }, async () => {
  const x = await setup();
  try {
    // Three jobs whose report is below the bound: its size apart from the replies.
    const base = 10_000;
    const probe = await reportOf(x, [base, base, base]);
    assert.deepEqual(probe.started.origin, { kind: "background", jobs: ["job-1", "job-2", "job-3"] });
    const room = MAX_REPORT_BYTES - bytes(probe.prompt);
    assert.ok(room > 0 && room < 40_000, `${room}`);
    // At the bound: the prompt fills it exactly, every result whole, every job settled.
    const at = await reportOf(x, [base, base, base + room]);
    assert.equal(at.terminal.type, "turn.completed");
    assert.equal(bytes(at.prompt), MAX_REPORT_BYTES);
    assert.deepEqual(at.started.origin, { kind: "background", jobs: ["job-4", "job-5", "job-6"] });
    assert.ok(at.prompt.includes(`"reply":"${"a".repeat(base + room)}"`), "the last result whole");
    assert.ok(!at.prompt.includes("did not fit"));
    // One byte more: the last job is left out and named; what is shown is whole.
    const past = await reportOf(x, [base, base, base + room + 1]);
    assert.equal(past.terminal.type, "turn.completed");
    assert.ok(bytes(past.prompt) <= MAX_REPORT_BYTES, `${bytes(past.prompt)} bytes`);
    assert.deepEqual(past.started.origin, { kind: "background", jobs: ["job-7", "job-8"] });
    assert.equal(past.prompt.split(`"reply":"${"a".repeat(base)}"`).length, 3, "two results whole");
    assert.ok(!past.prompt.includes("a".repeat(base + 1)), "the third result left out");
    assert.ok(
      past.prompt.endsWith(
        `\n\nBackground job job-9 (agent_codex: {"a":${base + room + 1}}, completed) also ended; its result did not fit in this message (at most ${MAX_REPORT_BYTES} bytes): call agent_status or agent_wait to see it.\n\nReport these results to the user.`,
      ),
      past.prompt.slice(-400),
    );
    // The next report follows at once and shows the job left out, whole; then every job is settled.
    const next = await x.c.waitFor((m) => m.type === "turn.started" && m.request_id === "background:4", 0, "the next report");
    assert.deepEqual(next.origin, { kind: "background", jobs: ["job-9"] });
    assert.equal((await reportEnd(x, 4)).type, "turn.completed");
    assert.ok(reportPrompts(x).at(-1)!.startsWith(`Background job job-9 (agent_codex: {"a":${base + room + 1}}) ended: completed.\n{"agent":"codex","status":"completed","reply":"${"a".repeat(base + room + 1)}"`));
    const s = await status(x);
    assert.deepEqual(s.settled, []);
    // Nothing is reported again: the next client turn runs with no report turn between.
    const before = x.c.frames.filter((m) => m.type === "turn.started" && String(m.request_id).startsWith("background:")).length;
    assert.equal((await x.c.turn(x.session, "anything else")).terminal.type, "turn.completed");
    assert.equal(x.c.frames.filter((m) => m.type === "turn.started" && String(m.request_id).startsWith("background:")).length, before);
  } finally {
    await close(x);
  }
});

it("the most a session can hold unseen (64 kept results of 50 KiB, long tasks, jobs discarded): the report is within the bound", async () => {
  const builds: Array<() => { prompt: string; jobs: string[] } | null> = [];
  const b = new JobBook((_s, build) => void builds.push(build));
  const task = "€".repeat(200); // cut to 80 characters, 3 bytes each
  const total = MAX_ENDED_JOBS + 20;
  for (let i = 0; i < total; i++) await b.start("s1", "agent_codex", task, () => Promise.resolve<ToolResult>({ content: "x".repeat(MAX_RESULT_BYTES), isError: true, errorKind: "failed" })).done;
  const r = builds[0]!()!;
  assert.ok(bytes(r.prompt) <= MAX_REPORT_BYTES, `${bytes(r.prompt)} bytes`);
  assert.equal(builds.length, total, "a request per job");
  for (const later of builds.slice(1)) assert.equal(later(), null, "one report covers them all");
  // The first kept job's result is cut (plain text keeps its start); every other kept job is named; 20 discarded.
  assert.match(r.prompt, new RegExp(`^Background job job-21 \\(agent_codex: €{79}…\\) ended: failed\\. Its result is cut to fit this message:\\nx+\\n\\n`));
  const named = /\n\nBackground jobs (.*) also ended; their results did not fit in this message \(at most 40960 bytes\): call agent_status or agent_wait to see them\.\n\n/.exec(r.prompt);
  assert.ok(named !== null);
  assert.equal(named[1]!.split(", failed), ").length, MAX_ENDED_JOBS - 1);
  assert.match(r.prompt, /\n\nBackground jobs job-1, job-2, .* and 4 more ended, but their results were discarded unseen: a session keeps at most 64 ended jobs\.\n\nReport these results to the user\.$/);
  assert.deepEqual(r.jobs, ["job-21", ...Array.from({ length: 16 }, (_, i) => `job-${i + 1}`)]);
  await b.close();
});
