/**
 * An SCV session: a thin projection of one `SessionRuntime` onto the SCV v3 wire (docs/scv.md §Events).
 *
 * Contracts:
 * - Every frame carrying `session_id` and `seq` gets the next number of one per-session counter, assigned when the
 *   writer admits the frame, so `seq` order is wire order and never has gaps.
 * - Turn events carry the `request_id` of the `turn.start` that submitted the prompt (the queue entry's submitter).
 * - Semantic events are never dropped: they wait for writer capacity in order. Only a delta whose wait is
 *   interrupted by cancellation (turn.cancel, EOF, cleanup) is refused, which the runtime turns into the end of
 *   that (cancelled) turn.
 * - Requests are answered per the spec: `turn.cancel` and `approval.resolve` have no reply on success; refusals are
 *   `error` events with the reference's codes.
 */
import { truncateUtf8, utf8Length } from "../../core/utf8.js";
import type { Question, QueueEntry, SessionEvent, SessionRuntime, UserAttachment } from "../../runtime/session/index.js";
import type { ConnectionOutput, ScvSessionHandle } from "./connection.js";
import { ProgressShaper, type ProgressTimers } from "./progress.js";
import { isBlankPrompt, MAX_QUEUE_ENTRIES, MAX_QUEUE_PROMPT_BYTES, MAX_SERVER_FRAME_BYTES, MESSAGES, type ClientMessage, type WireAttachment, type WireError } from "./wire.js";
import { mark } from "../../runtime/debug-timing.js";

type SessionMessage = Parameters<ScvSessionHandle["handle"]>[0];
type Msg<T extends ClientMessage["type"]> = Extract<ClientMessage, { type: T }>;

/** Attachment checks done where files may be touched (the runtime); returns a refusal message or the list. */
export type AttachmentChecker = (list: WireAttachment[], withPaths: boolean) => Promise<{ ok: true; attachments: UserAttachment[] } | { ok: false; message: string }>;

interface TurnState {
  requestId: string;
  /** Interrupts this turn's waits for writer capacity. */
  ctl: AbortController;
  /** Set when the projection itself must fail the turn (an oversized completion frame). */
  failCode?: "response_limit";
  /** The serialized head of this turn's `assistant.delta` frames. */
  deltaPrefix?: string;
}

export class ScvSession implements ScvSessionHandle {
  private seq = 0;
  private readonly turns = new Map<string, TurnState>();
  /** The last known revision and submitter of each queued entry (for `queue.removed` / `queue.dequeued`). */
  private readonly revisions = new Map<string, number>();
  private readonly submitters = new Map<string, string>();
  /** The request_id of a pending queue/pause/clear request, for the events it causes. */
  private current: string | null = null;
  private pauseAnswered = false;
  private readonly unsubscribe: () => void;
  private closing: Promise<void> | null = null;
  /** The turn of each started tool call (for shaped progress events). */
  private readonly callTurns = new Map<string, string>();
  private readonly progress: ProgressShaper;

  constructor(
    private readonly rt: SessionRuntime,
    private readonly out: ConnectionOutput,
    private readonly checkAttachments: AttachmentChecker,
    /** Closes the runtime for good (the hub forgets it). */
    private readonly closeRuntime: () => Promise<void> = () => rt.close(),
    timers?: ProgressTimers,
  ) {
    this.progress = new ProgressShaper((callId, text) => {
      const turnId = this.callTurns.get(callId);
      if (turnId !== undefined) void this.turnFrame(turnId, "tool.progress", { call_id: callId, text });
    }, timers);
    this.unsubscribe = rt.subscribe((e) => this.onEvent(e));
  }

  get id(): string {
    return this.rt.id;
  }

  /** Emits a session frame (fields plus `seq`, assigned at admission). */
  private frame(type: string, requestId: string | null | undefined, fields: Record<string, unknown>, signal?: AbortSignal): boolean | Promise<boolean> {
    return this.out.emit(() => {
      const seq = ++this.seq;
      return JSON.stringify({ type, ...(requestId !== undefined ? { request_id: requestId } : {}), session_id: this.rt.id, ...fields, seq });
    }, signal);
  }

  /** `session.started` then `queue.snapshot` (request_id null). */
  announce(requestId: string, started: Record<string, unknown>): Promise<boolean> {
    void this.out.emit(() => JSON.stringify({ type: "session.started", request_id: requestId, session_id: this.rt.id, ...started }));
    const entries = this.rt.snapshot();
    for (const e of entries) {
      this.revisions.set(e.queue_id, e.revision);
      this.submitters.set(e.queue_id, e.submitter);
    }
    return Promise.resolve(this.frame("queue.snapshot", null, { entries: entries.map(wireEntry), paused: this.rt.isPaused }));
  }

  private error(code: WireError["code"], message: string, requestId: string, extra: Record<string, unknown> = {}): Promise<boolean> {
    return Promise.resolve(this.out.emit(() => JSON.stringify({ type: "error", request_id: requestId, code, message, fatal: false, ...extra })));
  }

  private position(queueId: string): number {
    return this.rt.snapshot().findIndex((e) => e.queue_id === queueId);
  }

  /**
   * The hot path (one frame per provider delta), kept out of `onEvent` so it stays small and optimized: a per-turn
   * prefix, the frame built and pushed in one step when the writer has room, no intermediate objects.
   */
  private onDelta(e: Extract<SessionEvent, { type: "assistant_delta" }>): boolean | Promise<boolean> {
    const t = this.turns.get(e.turnId);
    if (t === undefined) return true;
    const first = t.deltaPrefix === undefined;
    const prefix = (t.deltaPrefix ??=
      `{"type":"assistant.delta","request_id":${JSON.stringify(t.requestId)},"session_id":${JSON.stringify(this.rt.id)},"turn_id":${JSON.stringify(e.turnId)},"content":`);
    const text = e.text;
    const out = this.out;
    if (out.canPush()) {
      out.pushSeqFrame(prefix, JSON.stringify(text), ++this.seq);
      // The turn's first delta goes out at once: the rest of this step (a short answer's terminal record and
      // completion, written synchronously) would otherwise hold it until the scheduled flush.
      if (first) {
        out.flushNow();
        mark("scv.first_delta_written");
      }
      return true;
    }
    const r = out.emit(() => prefix + JSON.stringify(text) + ',"seq":' + ++this.seq + "}", t.ctl.signal);
    // A wait interrupted by cancellation drops this delta but does not refuse it: a refusal would end the turn
    // `failed`, while it is being cancelled (the runtime's signal is already aborted).
    return r === true || r === false ? r || t.ctl.signal.aborted : r.then((ok) => ok || t.ctl.signal.aborted);
  }

  private onEvent(e: SessionEvent): ReturnType<Parameters<SessionRuntime["subscribe"]>[0]> {
    if (e.type === "assistant_delta") return this.onDelta(e);
    switch (e.type) {
      case "turn_started": {
        const t: TurnState = { requestId: e.submitter, ctl: new AbortController() };
        this.turns.set(e.turnId, t);
        return void this.frame("turn.started", t.requestId, { turn_id: e.turnId, ...(e.origin !== undefined ? { origin: e.origin } : {}) });
      }
      case "assistant_completed": {
        const t = this.turns.get(e.turnId);
        if (t === undefined) return;
        const f = { turn_id: e.turnId, content: e.text };
        // An encoded completion frame over the server-frame limit fails the turn before it is emitted. JSON escapes
        // a character into at most six bytes, so a text far below the limit needs no trial encoding (a long answer
        // would otherwise be encoded twice).
        if (e.text.length * 6 + 1024 > MAX_SERVER_FRAME_BYTES && utf8Length(JSON.stringify(f)) + 256 > MAX_SERVER_FRAME_BYTES) {
          t.failCode = "response_limit";
          this.rt.cancel(e.turnId);
          return;
        }
        return void this.frame("assistant.completed", t.requestId, f);
      }
      case "tool_proposed":
        return void this.turnFrame(e.turnId, "tool.proposed", { call_id: e.callId, name: e.name, arguments: e.arguments });
      case "approval_requested":
        return void this.turnFrame(e.turnId, "approval.requested", {
          approval_id: e.approvalId,
          call_id: e.callId,
          name: e.name,
          risk: e.risk,
          cwd: e.cwd,
          summary: e.summary,
        });
      case "question_requested":
        // SCV v3 has no question frame: the `question` call asks approval-style (docs/scv.md "Questions").
        return void this.turnFrame(e.turnId, "approval.requested", {
          approval_id: e.questionId,
          call_id: e.callId,
          name: "question",
          risk: "read_only",
          cwd: this.rt.config.cwd,
          summary: questionSummary(e.question),
        });
      case "tool_started":
        this.callTurns.set(e.callId, e.turnId);
        return void this.turnFrame(e.turnId, "tool.started", { call_id: e.callId, name: e.name });
      case "tool_progress":
        if (this.callTurns.get(e.callId) === e.turnId) this.progress.line(e.callId, e.text);
        return;
      case "tool_completed":
        this.progress.complete(e.callId);
        this.callTurns.delete(e.callId);
        return void this.turnFrame(e.turnId, "tool.completed", {
          call_id: e.callId,
          name: e.name,
          success: e.success,
          output: e.output,
          truncated: e.truncated,
          ...(e.error !== undefined && !e.success ? { error: e.error } : {}),
          ...(e.jobs !== undefined && e.jobs.length > 0 ? { jobs: e.jobs } : {}),
        });
      case "context_compacted":
        return void this.turnFrame(e.turnId, "context.compacted", {
          before_tokens: e.beforeTokens,
          after_tokens: e.afterTokens,
          removed_messages: e.removedMessages,
        });
      case "turn_completed":
      case "turn_cancelled":
      case "turn_failed": {
        const t = this.turns.get(e.turnId);
        this.turns.delete(e.turnId);
        this.progress.clear();
        this.callTurns.clear();
        const rid = t?.requestId ?? null;
        const origin = e.origin !== undefined ? { origin: e.origin } : {};
        if (t?.failCode !== undefined)
          return void this.frame("turn.failed", rid, { turn_id: e.turnId, code: t.failCode, message: "an assistant message exceeds the server-frame limit", ...origin });
        if (e.type === "turn_completed") {
          const usage = e.usage.requests > 0 ? { input_tokens: e.usage.inputTokens, output_tokens: e.usage.outputTokens } : {};
          return void this.frame("turn.completed", rid, { turn_id: e.turnId, steps: e.steps, usage, ...origin });
        }
        if (e.type === "turn_cancelled") return void this.frame("turn.cancelled", rid, { turn_id: e.turnId, ...origin });
        return void this.frame("turn.failed", rid, { turn_id: e.turnId, code: e.code, message: e.message, ...origin });
      }
      case "queue_enqueued":
        this.revisions.set(e.entry.queue_id, e.entry.revision);
        this.submitters.set(e.entry.queue_id, e.entry.submitter);
        return void this.frame("queue.enqueued", e.entry.submitter, { entry: wireEntry(e.entry), position: this.position(e.entry.queue_id) });
      case "queue_updated":
        this.revisions.set(e.entry.queue_id, e.entry.revision);
        return void this.frame("queue.updated", this.current, { entry: wireEntry(e.entry) });
      case "queue_moved":
        this.revisions.set(e.entry.queue_id, e.entry.revision);
        return void this.frame("queue.moved", this.current, {
          queue_id: e.entry.queue_id,
          position: this.position(e.entry.queue_id),
          revision: e.entry.revision,
        });
      case "queue_removed": {
        const revision = this.revisions.get(e.queueId) ?? null;
        this.revisions.delete(e.queueId);
        this.submitters.delete(e.queueId);
        return void this.frame("queue.removed", this.current, { queue_id: e.queueId, revision });
      }
      case "queue_dequeued": {
        this.revisions.delete(e.queueId);
        const rid = this.submitters.get(e.queueId) ?? null;
        this.submitters.delete(e.queueId);
        return void this.frame("queue.dequeued", rid, { queue_id: e.queueId, turn_id: e.turnId });
      }
      case "queue_snapshot":
        return void this.frame("queue.snapshot", null, { entries: e.entries.map(wireEntry), paused: this.rt.isPaused });
      case "paused":
        this.pauseAnswered = true;
        return void this.frame("session.paused", this.current, { paused: e.paused });
      case "session_trimmed": {
        const running = this.rt.turn;
        const rid = running !== null ? (this.turns.get(running.turnId)?.requestId ?? null) : null;
        return void this.frame("session.trimmed", rid, { removed_messages: e.removedMessages, history_bytes: e.historyBytes });
      }
      case "session_cleared":
        this.revisions.clear();
        this.submitters.clear();
        return void this.frame("session.cleared", this.current, {});
      case "approval_resolved":
      case "runtime":
      case "title_changed":
      case "steered":
      case "question_resolved":
        return;
    }
  }

  private turnFrame(turnId: string, type: string, fields: Record<string, unknown>): boolean | Promise<boolean> {
    const t = this.turns.get(turnId);
    return this.frame(type, t?.requestId ?? null, { turn_id: turnId, ...fields });
  }

  /** Runs `f` with `current` set so the events it causes carry `requestId`. */
  private within<T>(requestId: string, f: () => T): T {
    const prev = this.current;
    this.current = requestId;
    try {
      return f();
    } finally {
      this.current = prev;
    }
  }

  async handle(msg: SessionMessage): Promise<void> {
    switch (msg.type) {
      case "turn.start":
        return this.turnStart(msg);
      case "turn.cancel": {
        // A turn whose terminal event was emitted is over for the client, even while the runtime still ends its lease.
        if (!this.turns.has(msg.turn_id)) {
          await this.error("turn_not_found", "no running turn with this ID", msg.request_id);
          return;
        }
        this.turns.get(msg.turn_id)?.ctl.abort();
        this.rt.cancel(msg.turn_id);
        return;
      }
      case "approval.resolve":
        if (this.rt.question(msg.approval_id) !== undefined && this.rt.answerQuestion(msg.approval_id, msg.approved ? { defer: true } : { decline: true }).ok) return;
        if (!this.rt.resolveApproval(msg.approval_id, msg.approved)) await this.error("approval_not_found", "no pending approval with this ID", msg.request_id);
        return;
      case "session.clear": {
        // Idle means: no turn the client saw start is running and nothing would be dequeued. A turn whose terminal
        // event was already emitted may still be ending its lease: wait for that instead of refusing.
        const pending = this.rt.snapshot().length > 0 && !this.rt.isPaused;
        if (this.turns.size === 0 && !pending && this.rt.busy) await this.rt.idle();
        if (this.rt.busy || this.turns.size > 0 || pending) {
          await this.error("turn_active", "a turn is running; cancel it or wait before clearing", msg.request_id);
          return;
        }
        const prev = this.current;
        this.current = msg.request_id;
        const r = await this.rt.clear();
        this.current = prev;
        if (!r.ok) await this.error(r.error === "busy" ? "turn_active" : "internal_error", r.error === "busy" ? "a turn is running" : "the session could not be cleared", msg.request_id);
        return;
      }
      case "session.mcp":
        // Berth extension: a snapshot of the session's MCP servers (what `/mcp` shows); no event stream.
        await this.frame("session.mcp", msg.request_id, {
          servers: this.rt.mcpServers().map((m) => ({ name: m.name, state: m.state, tools: m.toolCount, error: m.error ?? null })),
        });
        return;
      case "session.tools":
        // Berth extension: a snapshot of the tools the session offers now (what `/tools` shows).
        await this.frame("session.tools", msg.request_id, {
          tools: this.rt.tools().map((t) => ({ name: t.name, risk: t.risk, server: t.server ?? null, description: t.description })),
        });
        return;
      case "session.pause": {
        this.pauseAnswered = false;
        this.within(msg.request_id, () => this.rt.pause(msg.paused));
        if (!this.pauseAnswered) await this.frame("session.paused", msg.request_id, { paused: msg.paused });
        return;
      }
      case "queue.update":
      case "queue.move":
      case "queue.remove": {
        if (await this.queueRefused(msg)) return;
        const r = this.within(msg.request_id, () =>
          msg.type === "queue.update"
            ? this.rt.updateQueued(msg.queue_id, msg.revision, msg.prompt)
            : msg.type === "queue.move"
              ? this.rt.moveQueued(msg.queue_id, msg.revision, msg.before_queue_id)
              : this.rt.removeQueued(msg.queue_id, msg.revision),
        );
        if (r.ok) return;
        if (r.error === "not_found") await this.error("queue_not_found", "no queued entry with this ID", msg.request_id);
        else await this.error("queue_conflict", "the entry changed since that revision", msg.request_id, { entry: wireEntry(r.current) });
        return;
      }
    }
  }

  /**
   * The checks of a queue request the runtime's queue does not make, for an entry it would accept (an unknown ID or a
   * stale revision is left to it): `queue.update` keeps the turn.start rules (a prompt empty or only whitespace only
   * with attachments; the queue's byte bound → `queue_limit`); a `queue.move` whose `before_queue_id` is the entry itself is a no-op
   * answered `queue.moved` (revision unchanged, as the reference server does); one naming no queued entry says so.
   * Returns whether it answered the request.
   */
  private async queueRefused(msg: Msg<"queue.update"> | Msg<"queue.move"> | Msg<"queue.remove">): Promise<boolean> {
    if (msg.type === "queue.remove") return false;
    const q = this.rt.snapshot();
    const at = q.findIndex((e) => e.queue_id === msg.queue_id);
    const e = q[at];
    if (e === undefined || e.revision !== msg.revision) return false;
    if (msg.type === "queue.update") {
      if ((e.attachments?.length ?? 0) === 0 && isBlankPrompt(msg.prompt)) {
        await this.error("invalid_request", MESSAGES.blankPrompt, msg.request_id);
        return true;
      }
      const bytes = q.reduce((n, x) => n + (x === e ? 0 : utf8Length(x.prompt)), 0) + utf8Length(msg.prompt);
      if (bytes > MAX_QUEUE_PROMPT_BYTES) {
        await this.error("queue_limit", MESSAGES.queueLimit, msg.request_id);
        return true;
      }
      return false;
    }
    if (msg.before_queue_id === msg.queue_id) {
      await this.frame("queue.moved", msg.request_id, { queue_id: e.queue_id, position: at, revision: e.revision });
      return true;
    }
    if (msg.before_queue_id !== null && !q.some((x) => x.queue_id === msg.before_queue_id)) {
      await this.error("queue_not_found", "`before_queue_id` names no queued entry", msg.request_id);
      return true;
    }
    return false;
  }

  private async turnStart(msg: Msg<"turn.start">): Promise<void> {
    mark("scv.turn_start");
    let attachments: UserAttachment[] = [];
    if (msg.attachments.length > 0) {
      const r = await this.checkAttachments(msg.attachments, this.rt.config.noTools !== true);
      if (!r.ok) {
        await this.error("invalid_request", r.message, msg.request_id);
        return;
      }
      attachments = r.attachments;
    }
    // After a terminal event the runtime may still be ending the turn's lease: a prompt sent then starts at once
    // (as the client saw an idle session) rather than passing through the queue.
    if (this.turns.size === 0 && this.rt.busy && this.rt.snapshot().length === 0 && !this.rt.isPaused) await this.rt.idle();
    mark("scv.idle");
    if (this.rt.busy || this.rt.snapshot().length > 0 || this.rt.isPaused) {
      const q = this.rt.snapshot();
      const bytes = q.reduce((n, e) => n + utf8Length(e.prompt), 0);
      if (q.length >= MAX_QUEUE_ENTRIES || bytes + utf8Length(msg.prompt) > MAX_QUEUE_PROMPT_BYTES) {
        await this.error("queue_limit", MESSAGES.queueLimit, msg.request_id);
        return;
      }
    }
    this.rt.submit(msg.prompt, { submitter: msg.request_id, ...(attachments.length > 0 ? { attachments } : {}) });
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const t of this.turns.values()) t.ctl.abort();
      await this.closeRuntime();
      this.progress.clear();
      this.unsubscribe();
    })();
    return this.closing;
  }
}

export function wireEntry(e: QueueEntry): Record<string, unknown> {
  return {
    queue_id: e.queue_id,
    revision: e.revision,
    prompt: e.prompt,
    submitter: e.submitter,
    ...(e.attachments !== undefined && e.attachments.length > 0 ? { attachments: e.attachments } : {}),
  };
}

/** A question as one approval summary line (≤ 1 KiB): the question, its choices, and what the answers mean. */
function questionSummary(q: Question): string {
  const choices = q.options.length > 0 ? ` Choices: ${q.options.map((o, i) => `${i + 1}) ${o}`).join(", ")}.` : "";
  const line = `Question: ${q.text}${choices} Approve to answer in your next message; deny to decline.`.replace(/\s+/g, " ");
  return truncateUtf8(line, 1024);
}
