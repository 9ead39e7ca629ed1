/**
 * `turn.start` / `turn.cancel` (app-service v1 §turn.start – §Turn completion and ordering).
 *
 * Admission (in order; a rejected start creates no worker and emits nothing): payload shape (`invalid_payload`)
 * → active-turn cap (`too_many_active_turns`, MAX_ACTIVE_TURNS = 8 per service) → session ID validation
 * (`invalid_session_id`) → implicit session creation or attachment through the shared SessionManager
 * (`session_busy` for a running turn, a closing attachment or another holder; `limit_exceeded` for the attachment
 * cap; `session_unavailable`) → bounded history read (`session_unavailable` when unreadable or incomplete).
 *
 * Lifecycle of an accepted turn: the start request ID stays reserved until the terminal event is handed to the
 * output; `turn.started` is emitted before the handler returns (the dispatcher writes it right after the
 * acceptance response); deltas/activity follow (turn-events.ts); exactly one `turn.terminal`; then the
 * reservation is released and the session lease ended (implicit attachments detach, closing ones close).
 * Durable status `compaction_required` is reported on the wire as `failed`.
 * `turn.cancel` aborts the worker (`cancellation_requested`); unknown/finished turns → `unknown_turn`; a `turn_id`
 * past max_id_bytes → `limit_exceeded`.
 * `drain()` (EOF / output failure) cancels every active turn, waits for their terminals, then stops MCP servers.
 *
 * A thin projection of the session runtime (runtime/session): admission, the lease, history and the run are the
 * `SessionHub`'s; this family keeps the wire's own rules (the active-turn cap, IDs, the event stream with its
 * sequence numbers and size checks in turn-events.ts). Tools run without approval (`approval: "never"`).
 */
import { randomId } from "../../store/random.js";
import { isPlainObject } from "../../core/json-bounds.js";
import { SessionHub, type AdmissionError, type SessionEvent, type TurnRunner } from "../../runtime/session/index.js";
import { isValidSessionId, type HistoryBounds, type SessionManager } from "../../store/sessions/index.js";
import type { ErrorCode } from "./errors.js";
import { onlyKeys, type RequestContext, type MethodDescriptor, type MethodFamily, type ParseResult } from "./descriptor.js";
import { TurnStream } from "./turn-events.js";
import { LIMITS } from "./limits.js";
import { utf8Length } from "../../core/utf8.js";

export const MAX_ACTIVE_TURNS = 8;

export type { TurnRunner };

export interface TurnMethodsDeps {
  manager: SessionManager;
  runner: TurnRunner;
  /** Working directory for new sessions and tools. */
  cwd: string;
  maxActiveTurns?: number;
  newTurnId?: () => string;
  historyBounds?: HistoryBounds;
  activityQueue?: number;
  /** I/O diagnostics (stderr): a turn that failed because its session could not be written names the cause there. */
  log?: (line: string) => void;
}

interface StartParams {
  prompt: string;
}

interface ActiveTurn {
  turnId: string;
  sessionId: string;
  stream: TurnStream;
  release: () => void;
  /** Settles once the turn ended and its lease was released. */
  done: Promise<void>;
}

export function parseStart(p: Record<string, unknown>): ParseResult<StartParams> {
  if (!onlyKeys(p, ["prompt", "options"])) return { ok: false, error: "invalid_payload" };
  if (typeof p.prompt !== "string" || !/\S/.test(p.prompt)) return { ok: false, error: "invalid_payload" };
  if ("options" in p && (!isPlainObject(p.options) || Object.keys(p.options).length > 0)) return { ok: false, error: "invalid_payload" };
  return { ok: true, value: { prompt: p.prompt } };
}

/** Admission refusals → wire codes (the session store's codes keep their app-service meaning). */
export function admissionCode(e: AdmissionError): ErrorCode {
  switch (e) {
    case "invalid_id":
      return "invalid_session_id";
    case "busy":
    case "lost":
      return "session_busy";
    case "unavailable":
    case "history_incomplete":
      return "session_unavailable";
    case "limit":
      return "limit_exceeded";
    case "closed":
    case "internal":
    case "invalid_record":
    default:
      return "internal_error";
  }
}

export function turnMethods(deps: TurnMethodsDeps): MethodFamily {
  const active = new Map<string, ActiveTurn>();
  /** Turns being admitted: their request context, until `turn_started` makes them active. */
  const admitting = new Map<string, RequestContext>();
  /** Admitted turns whose `done` is not yet bound to the runtime's (bound as `startTurn` returns). */
  const settled = new Map<string, (p: Promise<void>) => void>();
  const cap = deps.maxActiveTurns ?? MAX_ACTIVE_TURNS;
  const newTurnId = deps.newTurnId ?? (() => randomId("turn-"));
  const hub = new SessionHub({
    manager: deps.manager,
    runner: deps.runner,
    defaults: { cwd: deps.cwd, approval: "never" },
    // The app-service spec refuses a history past the admission bounds (`session_unavailable`); no trimming.
    historyPolicy: "refuse",
    ...(deps.historyBounds !== undefined ? { historyBounds: deps.historyBounds } : {}),
  });
  let draining = false;

  hub.subscribe((e: SessionEvent) => {
    if (e.type === "turn_started") {
      const ctx = admitting.get(e.turnId);
      if (ctx === undefined) return;
      admitting.delete(e.turnId);
      const stream = new TurnStream(ctx.emit, e.turnId, e.sessionId, deps.activityQueue);
      let settle!: (p: Promise<void>) => void;
      const done = new Promise<void>((r) => (settle = (p) => void p.then(r, r)));
      const reservation = ctx.hold();
      settled.set(e.turnId, settle);
      active.set(e.turnId, { turnId: e.turnId, sessionId: e.sessionId, stream, release: () => reservation.release(), done });
      stream.started();
      return;
    }
    if (!("turnId" in e)) return;
    const t = active.get(e.turnId);
    if (t === undefined) return;
    switch (e.type) {
      case "assistant_delta":
        return t.stream.delta(e.text);
      case "runtime":
        return t.stream.event(e.event);
      case "turn_completed":
      case "turn_cancelled":
      case "turn_failed":
        // The terminal carries no message (spec); a storage failure's cause and fix go to stderr instead.
        if (e.type === "turn_failed" && e.reason === "persistence") deps.log?.(`berth service: turn ${e.turnId} failed: ${e.message}`);
        active.delete(e.turnId);
        t.stream.terminal(e.type === "turn_completed" ? "completed" : e.type === "turn_cancelled" ? "cancelled" : "failed", e.text);
        t.release();
        return;
      case "approval_requested":
      case "approval_resolved":
      case "assistant_completed":
      case "context_compacted":
      case "queue_dequeued":
      case "tool_completed":
      case "tool_progress":
      case "tool_proposed":
      case "tool_started":
      case "steered":
      case "question_requested":
      case "question_resolved":
        return;
    }
  });

  const start: MethodDescriptor<StartParams> = {
    method: "turn.start",
    sessionId: "optional",
    parse: parseStart,
    async handle(ctx, { prompt }) {
      if (draining || active.size + admitting.size >= cap) return { error: "too_many_active_turns" };
      const requested = ctx.sessionId;
      if (requested !== null && !isValidSessionId(requested)) return { error: "invalid_session_id" };
      const turnId = newTurnId();
      admitting.set(turnId, ctx);
      const r = await hub.startTurn(requested, prompt, { turnId });
      admitting.delete(turnId);
      if (!r.ok) return { error: admissionCode(r.error) };
      const sessionId = r.sessionId as string;
      settled.get(turnId)?.(r.done);
      settled.delete(turnId);
      return { payload: { turn_id: turnId, session_id: sessionId, status: "accepted" }, sessionId };
    },
  };

  const cancel: MethodDescriptor<{ turnId: string }> = {
    method: "turn.cancel",
    sessionId: "forbidden",
    parse(p) {
      if (!onlyKeys(p, ["turn_id"]) || typeof p.turn_id !== "string" || p.turn_id === "") return { ok: false, error: "invalid_payload" };
      // A turn ID is a correlation ID: past max_id_bytes it is over a protocol limit, not merely unknown.
      if (utf8Length(p.turn_id) > LIMITS.max_id_bytes) return { ok: false, error: "limit_exceeded" };
      return { ok: true, value: { turnId: p.turn_id } };
    },
    handle(_ctx, { turnId }) {
      const t = active.get(turnId);
      if (t === undefined) return { error: "unknown_turn" };
      hub.get(t.sessionId)?.cancel(turnId);
      return { payload: { turn_id: turnId, status: "cancellation_requested" } };
    },
  };

  return {
    descriptors: [start, cancel],
    async drain() {
      draining = true;
      const all = [...active.values()];
      for (const t of all) hub.get(t.sessionId)?.cancel(t.turnId);
      await Promise.all(all.map((t) => t.done.catch(() => undefined)));
      await hub.close().catch(() => undefined);
    },
  };
}
