/**
 * `SessionRuntime`: one open session — everything that makes a session work, written once for every door.
 *
 * Contracts:
 * - Admission: a turn runs only with the session's writer lease (`SessionManager.beginTurn`, which reuses an
 *   explicit attachment or takes an implicit one for the turn) and a complete bounded history. At most one turn
 *   runs at a time; the lease is ended after the terminal event was delivered.
 * - `startTurn` admits or refuses at once (no queueing): for doors whose protocol refuses a busy session. On
 *   refusal nothing is emitted. `submit` queues: an idle, unpaused session with an empty queue starts the prompt
 *   at once (no queue events); otherwise the entry is appended (`queue_enqueued`). A queued prompt whose admission
 *   fails still gets `turn_started` then `turn_failed` (`history_limit` or `internal_error`).
 * - Events (`subscribe`) are delivered synchronously in execution order; see `SessionEvent` for per-turn order
 *   and `SessionListener` for delta backpressure and refusal.
 * - `cancel()` aborts the running turn (provider socket, tool processes, pending approvals — which are withdrawn
 *   and their calls end `cancelled`); the queue keeps running unless paused.
 * - `steer(text, ref?)` injects a user message at the running turn's next step boundary (`steered`); when the turn
 *   ends first the message is queued at the head as a prompt of its own (`queue_enqueued` with `steerRef`).
 * - Questions (`ask`, from the `question` tool): `question_requested`, answered once by `answerQuestion`
 *   (`question_resolved`); withdrawn when the turn's signal fires. `reconfigure` changes the configuration now when
 *   idle, else when the running turn ended.
 * - Approvals: per the session's `ApprovalMode` over each tool's `risk`; pending requests have fresh UUIDs and are
 *   answered with `resolveApproval`. A denial completes the call `success: false`, `error: "denied"`, with a
 *   denial text the model sees.
 * - Tools: `prepareTools()` (the hub calls it when it opens the runtime) has the runner start the session's MCP
 *   servers now, in its cwd; `watchMcp(listener)` receives every state change and `mcpServers()` lists them
 *   (a separate channel from `SessionEvent`s: status, not part of any turn).
 *   `close()` stops them.
 * - History bounds: a turn admitted on a history past its bounds (`historyBounds`) first trims the oldest turns
 *   out of the model context (trim.ts) and emits `session_trimmed` right after its `turn_started`; only when the
 *   trim cannot be written is it refused (`history_incomplete`).
 * - `clear()` (idle only) writes an empty checkpoint covering every record (the model context starts empty; the
 *   file keeps everything), drops the queue, and emits `session_cleared`.
 */
import { randomUUID } from "../../store/random.js";
import { titleFrom, wellFormedText } from "../../core/text-policy.js";
import type { TurnOutcome } from "../events.js";
import type { SessionModelInfo } from "../agent.js";
import { admissionFailure, type SessionDeps, type StartedTurn, type StartResult } from "./deps.js";
import type { History, TurnLease } from "../../store/sessions/index.js";
import { ApprovalBook } from "./approvals.js";
import { QuestionBook, type AnswerInput, type Question, type QuestionAnswer } from "./questions.js";
import { SessionQueue, type Queued } from "./queue.js";
import { terminalEvent } from "./project.js";
import { SessionMcp } from "./mcp-watch.js";
import { ListenerSet } from "./listeners.js";
import { admit, writeEmptyCheckpoint, type Admitted } from "./admission.js";
import { EMPTY_USAGE, runAgentTurn, type Running, type TurnContext } from "./turn.js";
import { mark } from "../debug-timing.js";
import type {
  AdmissionError,
  McpServerInfo,
  SessionToolInfo,
  QueueEntry,
  QueueResult,
  SessionConfig,
  SessionEvent,
  SessionListener,
  SubmitOptions,
  TurnOrigin,
} from "./types.js";

export class SessionRuntime {
  private readonly listeners = new ListenerSet();
  private readonly queue: SessionQueue;
  private readonly approvals: ApprovalBook;
  private readonly questions: QuestionBook;
  /** A configuration change requested while a turn ran: applied when it ends. */
  private nextConfig: Partial<SessionConfig> | null = null;
  private readonly newId: () => string;
  private running: Running | null = null;
  private admitting = false;
  private paused = false;
  private closed = false;
  private idleWaiters: Array<() => void> = [];
  private titled: boolean | null = null;
  private readonly mcp: SessionMcp;
  private readonly turnCtx: TurnContext;
  /** Between a turn's terminal event and its lease release. */
  private ending: Promise<void> | null = null;

  constructor(
    private readonly deps: SessionDeps,
    readonly id: string,
    private cfg: SessionConfig,
  ) {
    this.newId = deps.newId ?? randomUUID;
    this.queue = new SessionQueue(this.newId);
    this.approvals = new ApprovalBook(this.newId);
    this.questions = new QuestionBook(this.newId);
    this.mcp = new SessionMcp(deps.runner, id);
    this.turnCtx = { deps, sessionId: id, cfg: () => this.cfg, approvals: this.approvals, emit: (e) => this.emit(e), delta: (e) => this.listeners.deliver(e) };
  }

  get config(): Readonly<SessionConfig> {
    return this.cfg;
  }

  /** The running turn, if any. */
  get turn(): { turnId: string; origin?: TurnOrigin } | null {
    return this.running === null ? null : { turnId: this.running.turnId, ...(this.running.origin !== undefined ? { origin: this.running.origin } : {}) };
  }

  get isPaused(): boolean {
    return this.paused;
  }

  get busy(): boolean {
    return this.running !== null || this.admitting;
  }

  /** The provider, model and context window this session's next turn would use (null: none usable, or unknown). */
  async describe(): Promise<SessionModelInfo | null> {
    return (await this.deps.runner.describe?.(this.cfg.selection)) ?? null;
  }

  /** Has the runner prepare this session's tools now (its MCP servers start); see `watchMcp`. */
  prepareTools(): void {
    this.mcp.prepare(this.cfg);
  }

  /** Calls `listener` with every server and its state after each MCP state change; returns the unsubscribe. */
  watchMcp(listener: (servers: McpServerInfo[]) => void): () => void {
    return this.mcp.watch(listener);
  }

  /** Resolves once the MCP servers of the latest `prepareTools()` are registered (`mcpServers()` lists them). */
  mcpRegistered(): Promise<void> {
    return this.mcp.whenRegistered();
  }

  /** This session's MCP servers and their states (empty before its tools were prepared). */
  mcpServers(): McpServerInfo[] {
    return this.mcp.servers();
  }

  /** The tools this session offers now: built-ins, then its ready MCP servers' (empty before prepared). */
  tools(): SessionToolInfo[] {
    return this.mcp.tools();
  }

  /** Changes the configuration; refused (false) while a turn runs. */
  configure(patch: Partial<SessionConfig>): boolean {
    if (this.busy) return false;
    this.cfg = { ...this.cfg, ...patch };
    // Another cwd or other servers: the session's MCP servers restart now rather than at its next turn.
    if (this.mcp.prepared && ("cwd" in patch || "mcpServers" in patch || "noTools" in patch)) this.prepareTools();
    return true;
  }

  /**
   * Changes the configuration now when idle (`"now"`), else once the running turn ended (`"next_turn"`); later
   * changes before then are merged over earlier ones.
   */
  reconfigure(patch: Partial<SessionConfig>): "now" | "next_turn" {
    if (this.configure(patch)) return "now";
    this.nextConfig = { ...this.nextConfig, ...patch };
    return "next_turn";
  }

  subscribe(listener: SessionListener): () => void {
    return this.listeners.add(listener);
  }

  private emit(e: SessionEvent): void {
    for (const l of this.listeners) {
      try {
        void l(e);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  // ── queue ─────────────────────────────────────────────────────────────────
  snapshot(): QueueEntry[] {
    return this.queue.snapshot();
  }

  /** Emits `queue_snapshot` (e.g. when a client attaches). */
  announceQueue(): void {
    this.emit({ type: "queue_snapshot", sessionId: this.id, entries: this.queue.snapshot() });
  }

  /** Queues a prompt (or starts it at once on an idle, unpaused session with an empty queue). */
  submit(prompt: string, opts: SubmitOptions = {}): QueueEntry {
    const q = this.queue.add(wellFormedText(prompt), opts.submitter ?? "client", opts.attachments, opts.noTools === true, opts.turnId, false, opts.origin);
    if (!this.busy && !this.paused && this.queue.length === 1 && !this.closed) {
      this.queue.shift();
      void this.runQueued(q, false);
    } else this.emit({ type: "queue_enqueued", sessionId: this.id, entry: { ...q.entry } });
    return { ...q.entry };
  }

  updateQueued(queueId: string, revision: number, prompt: string): QueueResult {
    const r = this.queue.update(queueId, revision, wellFormedText(prompt));
    if (r.ok) this.emit({ type: "queue_updated", sessionId: this.id, entry: r.entry });
    return r;
  }

  moveQueued(queueId: string, revision: number, beforeQueueId: string | null): QueueResult {
    const r = this.queue.move(queueId, revision, beforeQueueId);
    if (r.ok) this.emit({ type: "queue_moved", sessionId: this.id, entry: r.entry, beforeQueueId: this.queue.nextOf(queueId) });
    return r;
  }

  removeQueued(queueId: string, revision: number): QueueResult {
    const r = this.queue.remove(queueId, revision);
    if (r.ok) this.emit({ type: "queue_removed", sessionId: this.id, queueId });
    return r;
  }

  /** Drops every queued prompt (each reported `queue_removed`). */
  clearQueue(): QueueEntry[] {
    const all = this.queue.clear();
    for (const e of all) this.emit({ type: "queue_removed", sessionId: this.id, queueId: e.queue_id });
    return all;
  }

  /** Pauses (no automatic dequeue) or unpauses; unpausing an idle session dequeues at once. */
  pause(paused: boolean): void {
    if (this.paused === paused) return;
    this.paused = paused;
    this.emit({ type: "paused", sessionId: this.id, paused });
    if (!paused) this.pump();
  }

  // ── turns ─────────────────────────────────────────────────────────────────
  /**
   * Admits a turn now or refuses (`busy` while one runs or is being admitted here; a turn whose terminal was
   * already delivered is waited for, not refused).
   */
  async startTurn(prompt: string, opts: SubmitOptions = {}): Promise<StartResult> {
    await this.ending; // a turn that already ended is not "running": wait for its lease release
    if (this.closed) return { ok: false, error: "closed" };
    if (this.busy) return { ok: false, error: "busy" };
    this.admitting = true;
    const a = await this.admit();
    if (typeof a === "string") {
      this.admitting = false;
      this.pump();
      return { ok: false, error: a };
    }
    return this.begin(a, prompt, opts);
  }

  /** @internal Runs a turn on a lease the hub already holds (a session created by this turn). */
  beginAdmitted(lease: TurnLease, ctl: AbortController, prompt: string, opts: SubmitOptions): StartedTurn {
    this.admitting = true;
    return this.begin({ lease, history: null, ctl }, prompt, opts);
  }

  private admit(): Promise<Admitted | AdmissionError> {
    return admit(this.deps, this.id, this.cfg.cwd);
  }

  private begin(a: Admitted, raw: string, opts: SubmitOptions & { queueId?: string }): StartedTurn {
    // Every door's prompt as Unicode text (a lone surrogate escape becomes U+FFFD): the store refuses anything else.
    const prompt = wellFormedText(raw);
    const turnId = opts.turnId ?? this.newId();
    const run: Running = { turnId, ctl: a.ctl, steering: [], ...(opts.origin !== undefined ? { origin: opts.origin } : {}) };
    this.running = run;
    this.admitting = false;
    if (this.closed) run.ctl.abort(); // closed while it was being admitted: it ends cancelled at once
    const ref = { sessionId: this.id, turnId };
    this.emit({
      ...ref,
      type: "turn_started",
      prompt,
      submitter: opts.submitter ?? "client",
      ...(opts.origin !== undefined ? { origin: opts.origin } : {}),
      ...(opts.queueId !== undefined ? { queueId: opts.queueId } : {}),
      ...(opts.attachments !== undefined && opts.attachments.length > 0 ? { attachments: opts.attachments } : {}),
    });
    if (a.trimmed !== undefined) this.emit({ type: "session_trimmed", sessionId: this.id, ...a.trimmed });
    this.maybeTitle(a.history, prompt);
    const done = this.execute(run, a, prompt, opts);
    return { ok: true, turnId, done };
  }

  private maybeTitle(history: History | null, prompt: string): void {
    this.titled ??= history !== null && (history.checkpoint !== null || history.records.some((r) => r.kind === "user"));
    if (this.titled) return;
    this.titled = true;
    const title = titleFrom(prompt);
    if (title !== null) this.emit({ type: "title_changed", sessionId: this.id, title });
  }

  private async execute(run: Running, a: Admitted, prompt: string, opts: SubmitOptions): Promise<void> {
    const ref = { sessionId: this.id, turnId: run.turnId };
    const outcome = await runAgentTurn(this.turnCtx, run, a, prompt, opts);
    run.ended = true;
    this.emit(terminalEvent(ref, outcome, run.origin, run.answered === true));
    const ended = a.lease.end().catch(() => undefined);
    this.ending = ended;
    await ended;
    this.ending = null;
    this.running = null;
    if (this.nextConfig !== null) {
      this.cfg = { ...this.cfg, ...this.nextConfig };
      this.nextConfig = null;
    }
    for (const m of run.steering.splice(0).reverse()) {
      const q = this.queue.add(m.text, "steering", undefined, false, undefined, true);
      this.emit({ type: "queue_enqueued", sessionId: this.id, entry: { ...q.entry }, ...(m.ref !== undefined ? { steerRef: m.ref } : {}) });
    }
    this.pump();
  }

  /** Runs a dequeued entry; admission failures become a started-and-failed turn. */
  private async runQueued(q: Queued, dequeued: boolean): Promise<void> {
    const origin = q.origin;
    const turnId = q.turnId ?? this.newId();
    if (dequeued) this.emit({ type: "queue_dequeued", sessionId: this.id, queueId: q.entry.queue_id, turnId });
    this.admitting = true;
    mark("session.admit");
    const a = await this.admit();
    mark("session.admitted");
    const opts: SubmitOptions & { queueId: string } = {
      turnId,
      submitter: q.entry.submitter,
      queueId: q.entry.queue_id,
      noTools: q.noTools,
      ...(q.entry.attachments !== undefined ? { attachments: q.entry.attachments } : {}),
      ...(origin !== undefined ? { origin } : {}),
    };
    if (typeof a !== "string") {
      this.begin(a, q.entry.prompt, opts);
      return;
    }
    this.admitting = false;
    const ref = { sessionId: this.id, turnId };
    this.emit({ ...ref, type: "turn_started", prompt: q.entry.prompt, submitter: q.entry.submitter, queueId: q.entry.queue_id, ...(origin !== undefined ? { origin } : {}) });
    const failed: TurnOutcome = { status: "failed", assistantText: "", ...admissionFailure(a), usage: { ...EMPTY_USAGE } };
    this.emit(terminalEvent(ref, failed, origin));
    this.pump();
  }

  private pump(): void {
    if (this.busy) return;
    if (!this.paused && !this.closed) {
      const q = this.queue.shift();
      if (q !== undefined) {
        void this.runQueued(q, true);
        return;
      }
    }
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /** Starts a turn the server decided on (e.g. a background job's report): queued like any prompt, with `origin`. */
  startServerTurn(prompt: string, origin: TurnOrigin, opts: Omit<SubmitOptions, "origin"> = {}): QueueEntry {
    return this.submit(prompt, { ...opts, origin, submitter: opts.submitter ?? "server" });
  }

  /** Cancels the running turn; false when none runs. */
  cancel(turnId?: string): boolean {
    const r = this.running;
    if (r === null || (turnId !== undefined && r.turnId !== turnId)) return false;
    r.ctl.abort();
    return true;
  }

  /**
   * Injects a user message at the running turn's next step boundary (`steered` is emitted when it is); false when
   * no turn runs, or its terminal event is already out (it only settles its lease). `ref` is the door's ID for the message, echoed on `steered` (or on `queue_enqueued` as
   * `steerRef` when the turn ended first and the message became a prompt of its own).
   */
  steer(text: string, ref?: string): boolean {
    if (this.running === null || this.running.ended === true || this.running.ctl.signal.aborted) return false;
    this.running.steering.push({ text: wellFormedText(text), ...(ref !== undefined ? { ref } : {}) });
    return true;
  }

  /**
   * Puts a question to the session's user (the `question` tool) and waits for `answerQuestion`; `cancelled` when
   * the signal fires first (the request is withdrawn: `question_resolved` with a `cancelled` answer).
   */
  ask(question: Question, callId: string, signal: AbortSignal): Promise<QuestionAnswer> {
    const ref = { sessionId: this.id, turnId: this.running?.turnId ?? "" };
    return this.questions.ask(
      callId,
      question,
      signal,
      (questionId) => this.emit({ ...ref, type: "question_requested", questionId, callId, question }),
      (questionId) => this.emit({ ...ref, type: "question_resolved", questionId, callId, answer: { kind: "cancelled" } }),
    );
  }

  /** Answers a pending question; refused (with a reason) when it is unknown, answered, or the answer does not fit. */
  answerQuestion(questionId: string, input: AnswerInput): { ok: true } | { ok: false; error: string } {
    const r = this.questions.answer(questionId, input);
    if (!r.ok) return r;
    this.emit({ sessionId: this.id, turnId: this.running?.turnId ?? "", type: "question_resolved", questionId, callId: r.callId, answer: r.answer });
    return { ok: true };
  }

  /** A pending question by ID. */
  question(questionId: string): Question | undefined {
    return this.questions.get(questionId)?.question;
  }

  pendingQuestions(): string[] {
    return this.questions.ids();
  }

  /** Answers a pending approval; false when the ID is unknown or already answered. */
  resolveApproval(approvalId: string, approved: boolean): boolean {
    const r = this.approvals.resolve(approvalId, approved);
    if (r === null) return false;
    const turnId = this.running?.turnId ?? "";
    this.emit({ sessionId: this.id, turnId, type: "approval_resolved", approvalId, callId: r.callId, approved, cancelled: false });
    return true;
  }

  pendingApprovals(): string[] {
    return this.approvals.ids();
  }

  /**
   * Clears the model context (idle only): an empty checkpoint covering every record is appended, the queue is
   * dropped, `session_cleared` is emitted. Returns the admission error when it could not.
   */
  async clear(): Promise<{ ok: true } | { ok: false; error: AdmissionError }> {
    await this.ending;
    if (this.busy) return { ok: false, error: "busy" };
    this.admitting = true;
    const error = await writeEmptyCheckpoint(this.deps.manager, this.id, this.cfg.cwd);
    this.admitting = false;
    if (error !== null) {
      this.pump();
      return { ok: false, error };
    }
    this.queue.clear();
    this.titled = null;
    this.emit({ type: "session_cleared", sessionId: this.id });
    this.pump();
    return { ok: true };
  }

  /** Resolves when no turn runs and nothing will be dequeued (queue empty or paused). */
  idle(): Promise<void> {
    if (!this.busy && (this.paused || this.queue.length === 0)) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /** Stops: drops the queue, cancels the running turn, waits for it. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    this.queue.clear();
    this.running?.ctl.abort();
    if (this.busy) await new Promise<void>((r) => this.idleWaiters.push(r));
    await this.mcp.close();
  }
}
