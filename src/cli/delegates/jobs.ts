/**
 * Background jobs of delegated agents (`agent_* background: true`) and the tools that follow them: `agent_wait`,
 * `agent_status`, `agent_cancel`.
 *
 * Contract:
 * - Job handles are `job-N`, numbered per session. A job is *settled* once the model has seen its result: through
 *   `agent_wait`, `agent_status` or `agent_cancel` (that call's `jobs` names it with how it ended), or in a
 *   server-started report turn whose first provider response came in full (the model saw the report; its terminal
 *   `origin.jobs` names it, however the turn then ended). The starting call's `jobs` names it
 *   `running`.
 * - A job that ends unseen is reported: `report` is asked to start a turn once the session is idle; it collects
 *   the jobs still unseen at that moment (a job the model waited for meanwhile is never reported again). Its prompt
 *   is at most `MAX_REPORT_BYTES` (job-report.ts): a job whose result did not fit is named, not settled. One report
 *   is out at a time per session (built, its turn not ended); a request a report already covered builds nothing.
 * - A report's jobs are settled once the model saw it (`ReportTurn.seen`: its turn's first provider response came in
 *   full), or its turn completed; jobs it left out for room are reported next, once its turn ended (and the session
 *   is idle: after any prompt queued). A report turn that failed or was cancelled before the model saw it (or whose
 *   queued entry was dropped) settles nothing: its jobs are reported again when another job ends unseen, else once
 *   the session's next turn that is not a report ended; never at once, so a provider that keeps failing does not
 *   make a loop of report turns.
 * - A session keeps at most `MAX_ENDED_JOBS` ended jobs (each holds its result, up to 50 KiB): past it, the job that
 *   ended first among those whose result was already seen goes, else (only unseen ones) the one that ended first,
 *   never silently: the next report turn names it, and a tool naming a job no longer kept says it was discarded.
 * - Closing a session cancels its jobs. A session opened again (a resume, in this process or another after this one
 *   died) numbers its jobs on from the last one its history or this process issued, and a job tool naming one of
 *   those earlier jobs says it ended with that opening (`unavailable`), not that it never existed or was discarded;
 *   `agent_wait` / `agent_status` naming no job say the same of them while no job of this opening exists.
 * - A handle the model passed is echoed back (`no job X`) only through `echoed`: sanitised, redacted, 64 bytes.
 */
import { defineLocalTool } from "../../runtime/tools/define.js";
import type { JobRef, JobStatus, Tool, ToolResult } from "../../runtime/types.js";
import { redactSecrets, sanitizeText } from "../../core/text-policy.js";
import { truncateUtf8 } from "../../core/utf8.js";
import { refitAgentResult } from "./reply-fit.js";
import { MAX_REPORT_BYTES, reportPrompt } from "./job-report.js";
import { AGENT_CANCEL_DEF, AGENT_STATUS_DEF, AGENT_WAIT_DEF, DEFAULT_WAIT_SECONDS, MAX_WAIT_SECONDS } from "./tool-defs.js";

export { DEFAULT_WAIT_SECONDS, MAX_REPORT_BYTES, MAX_WAIT_SECONDS };
const MAX_TASK_CHARS = 80;
/** Background jobs one session may have running at once (each is a delegated agent's process tree). */
export const MAX_RUNNING_JOBS = 16;
/**
 * Ended jobs one session keeps. Each holds its result (up to 50 KiB), so without a bound a long session running many
 * jobs grew for as long as it lived; 64 is 3.2 MiB at most per session, four times as many as can run at once, and
 * more than the job tools' 40 KiB answer can show results of at a time.
 */
export const MAX_ENDED_JOBS = 64;
/** Discarded unseen jobs a report turn names (the rest are counted). */
const MAX_DISCARDED_NAMED = 16;
const CANCEL_WAIT_MS = 10_000;
/** The job tools' answer at most (under the tool result bound, so it is never cut through its JSON). */
export const MAX_VIEW_BYTES = 40 * 1024;
const OMITTED_MARK = Buffer.byteLength(',"result_omitted":true');
const RESULT_KEY = Buffer.byteLength(',"result":');
const RESULT_CUT_KEY = Buffer.byteLength(',"result_cut":true');

export interface Job {
  id: string;
  sessionId: string;
  tool: string;
  task: string;
  status: JobStatus;
  result: ToolResult | null;
  seen: boolean;
  /** Order of ending across the book (0 while running): the first to end is the first discarded. */
  endSeq: number;
  ctl: AbortController;
  done: Promise<void>;
}

/** A report turn to start: its prompt, the jobs it shows (and discarded ones it names), and how it ended. */
export interface ReportTurn {
  prompt: string;
  jobs: string[];
  /** The model saw the report (its turn's first provider response came in full): its jobs are settled at once. */
  seen(): void;
  /** The turn ended (`completed`: its jobs are settled), or will never run (dropped from the queue). */
  ended(completed: boolean): void;
  /**
   * Set by the `ReportFn` while the report waits in the queue: drops it (then `ended(false)`). Called when a job tool
   * showed one of its jobs meanwhile (a prompt queued before it ran first), so the report would show it twice.
   */
  withdraw?: () => void;
}

/**
 * Starts a report turn once the session is idle (with `afterTurn`, once its next turn that is not a report ended,
 * then idle); `build` returns what to report then, or null for nothing.
 */
export type ReportFn = (sessionId: string, build: () => ReportTurn | null, afterTurn?: boolean) => void;

interface Discarded {
  count: number;
  names: string[];
}

/**
 * A report built and not yet ended: the jobs it shows, the discarded ones it names, the report requests made by
 * then, the jobs it shows that were discarded meanwhile (unseen only if the model never saw it), and whether the
 * model saw it.
 */
interface OutReport {
  shown: Job[];
  discarded: Discarded | undefined;
  asked: number;
  pruned: string[];
  seen: boolean;
  turn?: ReportTurn;
}

function statusOf(r: ToolResult): JobStatus {
  if (!r.isError) return "completed";
  if (r.errorKind === "cancelled") return "cancelled";
  if (r.errorKind === "limit") return "timeout";
  if (r.errorKind === "denied") return "declined";
  return "failed";
}

function taskOf(prompt: string): string {
  const line = (prompt.split("\n")[0] ?? "").trim();
  return line.length > MAX_TASK_CHARS ? `${line.slice(0, MAX_TASK_CHARS - 1)}…` : line;
}

/** The longest prefix of `text` whose JSON string (and a separator) takes at most `max` bytes. */
function cutToJson(text: string, max: number): string {
  let cut = truncateUtf8(text, Math.max(0, max));
  // Escapes make the JSON longer than the text: shrink in proportion until it fits. truncateUtf8 keeps at least 4
  // bytes, so a round that cuts nothing ends with nothing (else a room of a few bytes looped here for ever).
  for (let json = Buffer.byteLength(JSON.stringify(cut)) + 1; json > max && cut !== ""; json = Buffer.byteLength(JSON.stringify(cut)) + 1) {
    const bytes = Buffer.byteLength(cut);
    const next = truncateUtf8(cut, Math.min(bytes - 1, Math.floor((bytes * max) / json)));
    cut = Buffer.byteLength(next) < bytes ? next : "";
  }
  return cut;
}

/** What a job tool says of earlier jobs (`handles`: one, or a range when `plural`): they ended with that opening. */
function earlierText(handles: string, plural: boolean): string {
  return plural
    ? `${handles} were started before this session was last opened and were stopped when that connection or Berth process ended; their results are lost. Start the tasks again if they are still needed`
    : `${handles} was started before this session was last opened and was stopped when that connection or Berth process ended; its result is lost. Start the task again if it is still needed`;
}

/**
 * A handle the model passed, fit to echo in an error: control characters dropped, whitespace runs one space,
 * credential-like values redacted (before the cut, which could leave a piece the redaction no longer recognises),
 * at most 64 bytes.
 */
export function echoed(s: string): string {
  return truncateUtf8(redactSecrets(sanitizeText(s).replace(/\s+/g, " ")), 64);
}

export function jobRef(j: Job, status: JobStatus = j.status): JobRef {
  return { job: j.id, tool: j.tool, status, ...(j.task !== "" ? { task: j.task } : {}) };
}

export class JobBook {
  private readonly jobs = new Map<string, Map<string, Job>>();
  private readonly counters = new Map<string, number>();
  /** Per session, the unseen jobs discarded since the last report turn: how many, and the first names. */
  private readonly discarded = new Map<string, Discarded>();
  private ends = 0;
  /** Per session, the last job number issued before the session's current opening (its earlier jobs ended with it). */
  private readonly earlier = new Map<string, number>();
  /** Per session, report requests made (one per job that ended unseen), and the last one a report covered. */
  private readonly asked = new Map<string, number>();
  private readonly reported = new Map<string, number>();
  /** Per session, the report built whose turn has not ended. */
  private readonly out = new Map<string, OutReport>();

  constructor(private readonly report: ReportFn) {}

  /**
   * The refusal of one more background job of `tool` while the session has `MAX_RUNNING_JOBS` running (a model told
   * to run everything in the background would otherwise start an agent process per call), or null. Checked by the
   * delegation tools before they start anything.
   */
  refusal(sessionId: string, tool: string): ToolResult | null {
    const running = [...this.of(sessionId).values()].filter((j) => j.status === "running").length;
    if (running < MAX_RUNNING_JOBS) return null;
    return {
      content: `${tool}: ${MAX_RUNNING_JOBS} background jobs are already running in this session; wait for some to end (agent_wait) or cancel one (agent_cancel), or run this one in the foreground`,
      isError: true,
      errorKind: "limit",
    };
  }

  start(sessionId: string, tool: string, prompt: string, run: (signal: AbortSignal) => Promise<ToolResult>): Job {
    const n = (this.counters.get(sessionId) ?? 0) + 1;
    this.counters.set(sessionId, n);
    const ctl = new AbortController();
    const job: Job = { id: `job-${n}`, sessionId, tool, task: taskOf(prompt), status: "running", result: null, seen: false, endSeq: 0, ctl, done: Promise.resolve() };
    job.done = run(ctl.signal)
      .catch((): ToolResult => ({ content: `${tool}: the job failed`, isError: true, errorKind: "failed" }))
      .then((r) => {
        job.result = r;
        job.status = statusOf(r);
        job.endSeq = ++this.ends;
        this.prune(sessionId);
        if (job.seen) return;
        const n = (this.asked.get(sessionId) ?? 0) + 1;
        this.asked.set(sessionId, n);
        this.report(sessionId, () => this.collectReport(sessionId, n));
      });
    let m = this.jobs.get(sessionId);
    if (m === undefined) this.jobs.set(sessionId, (m = new Map<string, Job>()));
    m.set(job.id, job);
    return job;
  }

  /** Keeps the session's ended jobs within `MAX_ENDED_JOBS`: seen ones go first, each kind in the order it ended. */
  private prune(sessionId: string): void {
    const m = this.jobs.get(sessionId);
    if (m === undefined) return;
    const ended = [...m.values()].filter((j) => j.status !== "running").sort((a, b) => a.endSeq - b.endSeq);
    const excess = ended.length - MAX_ENDED_JOBS;
    if (excess <= 0) return;
    const out = this.out.get(sessionId);
    for (const j of [...ended.filter((e) => e.seen), ...ended.filter((e) => !e.seen)].slice(0, excess)) {
      m.delete(j.id);
      if (j.seen) continue;
      if (out?.shown.includes(j) === true) out.pruned.push(j.id);
      else this.discard(sessionId, { count: 1, names: [j.id] });
    }
  }

  /** Adds unseen jobs discarded to those the next report names. */
  private discard(sessionId: string, add: Discarded): void {
    const d = this.discarded.get(sessionId) ?? { count: 0, names: [] };
    this.discarded.set(sessionId, { count: d.count + add.count, names: [...d.names, ...add.names].slice(0, MAX_DISCARDED_NAMED) });
  }

  /** The session's ended jobs not yet seen. */
  private unseen(sessionId: string): Job[] {
    return [...(this.jobs.get(sessionId)?.values() ?? [])].filter((j) => j.status !== "running" && !j.seen);
  }

  /**
   * The report of the session's unseen ended jobs and those discarded unseen, or null when there is none, another
   * report is out, or report request `n` was covered by an earlier report (every job that had ended by then was in
   * it, or named in it as left out for room): several jobs that end during one turn ask for a report each, and the
   * first to run reports them all. `n` null: a request `reportEnded` made, covered by nothing earlier.
   */
  private collectReport(sessionId: string, n: number | null): ReportTurn | null {
    if (this.out.has(sessionId) || (n !== null && n <= (this.reported.get(sessionId) ?? 0))) return null;
    const ended = this.unseen(sessionId);
    const d = this.discarded.get(sessionId);
    this.discarded.delete(sessionId);
    if (ended.length === 0 && d === undefined) return null;
    const asked = this.asked.get(sessionId) ?? 0;
    this.reported.set(sessionId, asked);
    const extra: string[] = [];
    if (d !== undefined) {
      const more = d.count - d.names.length;
      extra.push(
        `Background ${d.count === 1 ? "job" : "jobs"} ${d.names.join(", ")}${more > 0 ? ` and ${more} more` : ""} ended, but ${d.count === 1 ? "its result was" : "their results were"} discarded unseen: a session keeps at most ${MAX_ENDED_JOBS} ended jobs.`,
      );
    }
    // Bounded (job-report.ts): a job whose result is left out stays unseen, named for the job tools.
    const { prompt, shown } = reportPrompt(ended, extra);
    const r: OutReport = { shown, discarded: d, asked, pruned: [], seen: false };
    this.out.set(sessionId, r);
    r.turn = {
      prompt,
      jobs: [...shown.map((j) => j.id), ...(d?.names ?? [])],
      seen: () => this.reportSeen(sessionId, r),
      ended: (completed) => this.reportEnded(sessionId, r, completed),
    };
    return r.turn;
  }

  /**
   * The model saw a report (its turn's first provider response came in full): its jobs are settled now, so the job
   * tools in the rest of its turn, and any later report, do not show them as new again.
   */
  private reportSeen(sessionId: string, r: OutReport): void {
    if (this.out.get(sessionId) !== r || r.seen) return;
    r.seen = true;
    for (const j of r.shown) j.seen = true;
  }

  /**
   * A report turn ended: completed or seen by the model, its jobs are settled and any unseen left (out for room)
   * reported next; else nothing is settled, its discarded jobs are named again, and its jobs are reported when
   * another job ended unseen (at once if one did while it was out), else after the session's next turn.
   */
  private reportEnded(sessionId: string, r: OutReport, completed: boolean): void {
    // Told once; a session closed meanwhile (its jobs cancelled and settled) has nobody left to report to.
    if (this.out.get(sessionId) !== r) return;
    this.out.delete(sessionId);
    if (!this.jobs.has(sessionId)) return;
    const settled = completed || r.seen;
    if (settled) for (const j of r.shown) j.seen = true;
    else {
      // Named again, before any discarded since; then the shown jobs discarded while it was out.
      const since = this.discarded.get(sessionId);
      this.discarded.delete(sessionId);
      for (const d of [r.discarded, since, r.pruned.length > 0 ? { count: r.pruned.length, names: r.pruned } : undefined]) if (d !== undefined) this.discard(sessionId, d);
    }
    if (this.unseen(sessionId).length === 0 && !this.discarded.has(sessionId)) return;
    const again = settled || (this.asked.get(sessionId) ?? 0) > r.asked;
    this.report(sessionId, () => this.collectReport(sessionId, null), !again);
  }

  /** How `name`, a handle the session does not keep, was issued: by an earlier opening, discarded (`prune`), or never. */
  private lost(sessionId: string, name: string): "earlier" | "discarded" | null {
    const n = /^job-([1-9][0-9]{0,15})$/.exec(name);
    if (n === null || this.of(sessionId).has(name)) return null;
    if (Number(n[1]) <= (this.earlier.get(sessionId) ?? 0)) return "earlier";
    return Number(n[1]) <= (this.counters.get(sessionId) ?? 0) ? "discarded" : null;
  }

  private of(sessionId: string): Map<string, Job> {
    return this.jobs.get(sessionId) ?? new Map<string, Job>();
  }

  /**
   * Binds the session's opening once per process: job numbers go on after `earlierJobs()` (the highest its stored
   * history names), so a resumed session's new job never takes the handle of one its history shows.
   */
  bind(sessionId: string, earlierJobs: (() => number) | undefined): void {
    if (this.counters.has(sessionId)) return;
    const n = earlierJobs?.() ?? 0;
    this.counters.set(sessionId, n);
    if (n > 0) this.earlier.set(sessionId, n);
  }

  closeSession(sessionId: string): Promise<void> {
    const m = this.of(sessionId);
    // Its jobs end with this opening: a later one names them as such.
    this.earlier.set(sessionId, this.counters.get(sessionId) ?? 0);
    for (const j of m.values()) {
      j.seen = true; // nobody is left to report to
      j.ctl.abort();
    }
    this.jobs.delete(sessionId);
    this.discarded.delete(sessionId);
    this.out.delete(sessionId);
    return Promise.all([...m.values()].map((j) => j.done)).then(() => undefined);
  }

  async close(): Promise<void> {
    await Promise.all([...this.jobs.keys()].map((s) => this.closeSession(s)));
  }

  /** Picks named jobs (null with the unknown name) or, with none named, every job not yet settled. */
  private pick(sessionId: string, names: string[] | undefined): Job[] | { unknown: string } {
    const m = this.of(sessionId);
    if (names === undefined || names.length === 0) return [...m.values()].filter((j) => !j.seen);
    const out: Job[] = [];
    for (const n of names) {
      const j = m.get(n);
      if (j === undefined) return { unknown: n };
      out.push(j);
    }
    return out;
  }

  /**
   * The view of jobs for the model, at most `MAX_VIEW_BYTES` of JSON: the entries at most half of it, the results
   * the rest. Results of jobs not yet settled get the room first, then those of settled ones; a result that does not fit is left out (`result_omitted`), and entries past
   * the room are counted in `omitted`. Only a job whose result is in the view becomes settled (returned in `jobs`):
   * one left out is shown by a later call or reported. The first result is cut to fit (`result_cut`: a delegated
   * agent's result keeps its JSON, its reply cut with a note, reply-fit.ts) rather than left out, so every call
   * settles at least one ended job.
   */
  private show(list: Job[]): ToolResult {
    let room = MAX_VIEW_BYTES - 32;
    const size = (v: unknown): number => Buffer.byteLength(JSON.stringify(v)) + 1;
    // An ended job's entry reserves room for `"result_omitted":true`; a result shown instead uses that room too.
    const entry = (j: Job, view: object): number => size(view) + (j.result !== null ? OMITTED_MARK : 0);
    const views = list.map((j): { job: Job; view: Record<string, unknown> } => ({ job: j, view: { ...jobRef(j) } }));
    // The entries take at most half the room, so the first result always has the other half (hundreds of jobs
    // listed would otherwise leave it none: cut to nothing, yet settled).
    const fits: typeof views = [];
    let listed = 0;
    for (const v of views) {
      const e = entry(v.job, v.view);
      if (listed + e > room / 2) break;
      listed += e;
      fits.push(v);
    }
    room -= listed;
    const ended = fits.filter((v) => v.job.result !== null);
    const order = [...ended.filter((v) => !v.job.seen), ...ended.filter((v) => v.job.seen)];
    const settled: JobRef[] = [];
    order.forEach((v, i) => {
      const result = v.job.result!.content;
      const free = room + OMITTED_MARK - RESULT_KEY;
      if (size(result) <= free) v.view["result"] = result;
      else if (i === 0) {
        // A delegated agent's result is fitted again with its reply cut, so it stays a JSON document saying what
        // it left out; other text is cut to fit.
        const max = free - RESULT_CUT_KEY;
        v.view["result"] = refitAgentResult(result, { max, measure: size, words: `the job tools' ${MAX_VIEW_BYTES}-byte answer` }) ?? cutToJson(result, max);
        v.view["result_cut"] = true;
      } else return void (v.view["result_omitted"] = true);
      room = free - size(v.view["result"]) - (v.view["result_cut"] === true ? RESULT_CUT_KEY : 0);
      if (!v.job.seen) {
        v.job.seen = true;
        settled.push(jobRef(v.job));
      }
    });
    // A report not yet seen that shows a job settled here would show it a second time: it is withdrawn, and the
    // jobs it showed that are still unseen are reported anew (reportEnded).
    const out = list.length > 0 ? this.out.get(list[0]!.sessionId) : undefined;
    if (out !== undefined && !out.seen && out.shown.some((j) => settled.some((s) => s.job === j.id))) out.turn?.withdraw?.();
    const omitted = views.length - fits.length;
    const body = { jobs: fits.map((v) => v.view), ...(omitted > 0 ? { omitted } : {}) };
    return { content: JSON.stringify(body), isError: false, ...(settled.length > 0 ? { jobs: settled } : {}) };
  }

  tools(sessionId: string, earlierJobs?: () => number): Tool[] {
    this.bind(sessionId, earlierJobs);
    const unknown = (name: string, n: string): ToolResult =>
      this.lost(sessionId, n) === "earlier"
        ? { content: `${name}: ${earlierText(n, false)}`, isError: true, errorKind: "unavailable" }
        : this.lost(sessionId, n) === "discarded"
        ? {
            content: `${name}: ${n} ended and was discarded: a session keeps at most ${MAX_ENDED_JOBS} ended jobs, dropping the first to end (those whose result was already shown before the others); name jobs that are still kept`,
            isError: true,
            errorKind: "unavailable",
          }
        : { content: `${name}: no job ${echoed(n)} in this session`, isError: true, errorKind: "invalid_arguments" };
    // With no job named: a resumed session whose only jobs are earlier ones says so (before: `{"jobs":[]}`).
    const onlyEarlier = (name: string): ToolResult | null => {
      const n = this.earlier.get(sessionId) ?? 0;
      if (n === 0 || this.of(sessionId).size > 0 || (this.counters.get(sessionId) ?? 0) > n) return null;
      return { content: `${name}: no job has been started since this session was last opened; ${earlierText(n === 1 ? "job-1" : `job-1 to job-${n}`, n > 1)}`, isError: true, errorKind: "unavailable" };
    };
    return [
      defineLocalTool({
        ...AGENT_WAIT_DEF,
        execute: async (args, ctx) => {
          const list = this.pick(sessionId, args.jobs?.split(/[\s,]+/).filter((s) => s !== ""));
          if ("unknown" in list) return unknown("agent_wait", list.unknown);
          if (list.length === 0) {
            const earlier = onlyEarlier("agent_wait");
            if (earlier !== null) return earlier;
          }
          let timer: NodeJS.Timeout | undefined;
          const stop = new Promise<void>((r) => {
            timer = setTimeout(r, (args.timeout_seconds ?? DEFAULT_WAIT_SECONDS) * 1000);
            ctx.signal.addEventListener("abort", () => r(), { once: true });
          });
          await Promise.race([Promise.all(list.map((j) => j.done)), stop]);
          clearTimeout(timer);
          if (ctx.signal.aborted) return { content: "agent_wait: cancelled", isError: true, errorKind: "cancelled" };
          return this.show(list);
        },
      }),
      defineLocalTool({
        ...AGENT_STATUS_DEF,
        execute: (args) => {
          const list = this.pick(sessionId, args.job !== undefined ? [args.job] : undefined);
          if ("unknown" in list) return Promise.resolve(unknown("agent_status", list.unknown));
          const earlier = args.job === undefined ? onlyEarlier("agent_status") : null;
          if (earlier !== null) return Promise.resolve(earlier);
          return Promise.resolve(this.show(args.job !== undefined ? list : [...this.of(sessionId).values()]));
        },
      }),
      defineLocalTool({
        ...AGENT_CANCEL_DEF,
        execute: async (args) => {
          const list = this.pick(sessionId, [args.job]);
          if ("unknown" in list) return unknown("agent_cancel", list.unknown);
          const j = list[0]!;
          j.ctl.abort();
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([j.done, new Promise<void>((r) => (timer = setTimeout(r, CANCEL_WAIT_MS)))]);
          clearTimeout(timer);
          return this.show([j]);
        },
      }),
    ];
  }
}
