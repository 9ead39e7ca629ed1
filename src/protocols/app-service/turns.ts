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
 * `turn.cancel` aborts the worker (`cancellation_requested`); unknown/finished turns → `unknown_turn`.
 * `drain()` (EOF / output failure) cancels every active turn, waits for their terminals, then stops MCP servers.
 */
import { randomId } from "../../core/random-id.js";
import type { TurnOutcome } from "../../runtime/events.js";
import type { RunTurnRequest } from "../../runtime/agent.js";
import { DEFAULT_WINDOW, isValidSessionId, SessionError, type History, type HistoryBounds, type SessionManager } from "../../store/sessions/index.js";
import { isPlainObject } from "../../core/json-bounds.js";
import { onlyKeys, type MethodDescriptor, type MethodFamily, type ParseResult } from "./descriptor.js";
import { sessionErrorCode } from "./sessions.js";
import { TurnStream } from "./turn-events.js";

export const MAX_ACTIVE_TURNS = 8;

/** What the family needs from the runtime (an `Agent`). */
export interface TurnRunner {
  runTurn(req: RunTurnRequest): Promise<TurnOutcome>;
  close(): Promise<void>;
}

export interface TurnMethodsDeps {
  manager: SessionManager;
  runner: TurnRunner;
  /** Working directory for new sessions and tools. */
  cwd: string;
  maxActiveTurns?: number;
  newTurnId?: () => string;
  historyBounds?: HistoryBounds;
  activityQueue?: number;
}

interface StartParams {
  prompt: string;
}

interface ActiveTurn {
  turnId: string;
  sessionId: string;
  ctl: AbortController;
  done: Promise<void>;
}

export function parseStart(p: Record<string, unknown>): ParseResult<StartParams> {
  if (!onlyKeys(p, ["prompt", "options"])) return { ok: false, error: "invalid_payload" };
  if (typeof p.prompt !== "string" || !/\S/.test(p.prompt)) return { ok: false, error: "invalid_payload" };
  if ("options" in p && (!isPlainObject(p.options) || Object.keys(p.options).length > 0)) return { ok: false, error: "invalid_payload" };
  return { ok: true, value: { prompt: p.prompt } };
}

export function turnMethods(deps: TurnMethodsDeps): MethodFamily {
  const active = new Map<string, ActiveTurn>();
  let admitting = 0;
  const cap = deps.maxActiveTurns ?? MAX_ACTIVE_TURNS;
  const newTurnId = deps.newTurnId ?? (() => randomId("turn-"));
  const bounds: HistoryBounds = deps.historyBounds ?? { maxBytes: DEFAULT_WINDOW.maxBytes, maxRecords: DEFAULT_WINDOW.maxRecords };
  let draining = false;

  const start: MethodDescriptor<StartParams> = {
    method: "turn.start",
    sessionId: "optional",
    parse: parseStart,
    async handle(ctx, { prompt }) {
      if (draining || active.size + admitting >= cap) return { error: "too_many_active_turns" };
      const requested = ctx.sessionId;
      if (requested !== null && !isValidSessionId(requested)) return { error: "invalid_session_id" };
      admitting++;
      const ctl = new AbortController();
      let lease;
      let history: History | null = null;
      try {
        lease = await deps.manager.beginTurn({ sessionId: requested, cwd: deps.cwd, onCloseRequested: () => ctl.abort() });
      } catch (e) {
        admitting--;
        return { error: sessionErrorCode(e) };
      }
      if (!lease.created) {
        try {
          history = await deps.manager.store.readHistory(lease.sessionId, bounds);
          if (!history.complete) throw new SessionError("unavailable");
        } catch (e) {
          admitting--;
          await lease.end();
          return { error: sessionErrorCode(e) };
        }
      }
      admitting--;
      const turnId = newTurnId();
      const sessionId = lease.sessionId;
      const reservation = ctx.hold();
      const stream = new TurnStream(ctx.emit, turnId, sessionId, deps.activityQueue);
      stream.started();
      const turnLease = lease;
      const work = async (): Promise<void> => {
        let outcome: TurnOutcome;
        try {
          outcome = await deps.runner.runTurn({ turnId, writer: turnLease.writer, history, cwd: deps.cwd, prompt, signal: ctl.signal, sink: stream });
        } catch {
          outcome = { status: ctl.signal.aborted ? "cancelled" : "failed", assistantText: "", usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 0 } };
        }
        active.delete(turnId);
        stream.terminal(outcome.status === "compaction_required" ? "failed" : outcome.status, outcome.assistantText);
        reservation.release();
        await turnLease.end();
      };
      const t: ActiveTurn = { turnId, sessionId, ctl, done: Promise.resolve() };
      active.set(turnId, t);
      t.done = work().catch(() => undefined);
      return { payload: { turn_id: turnId, session_id: sessionId, status: "accepted" }, sessionId };
    },
  };

  const cancel: MethodDescriptor<{ turnId: string }> = {
    method: "turn.cancel",
    sessionId: "forbidden",
    parse(p) {
      if (!onlyKeys(p, ["turn_id"]) || typeof p.turn_id !== "string" || p.turn_id === "") return { ok: false, error: "invalid_payload" };
      return { ok: true, value: { turnId: p.turn_id } };
    },
    handle(_ctx, { turnId }) {
      const t = active.get(turnId);
      if (t === undefined) return { error: "unknown_turn" };
      t.ctl.abort();
      return { payload: { turn_id: turnId, status: "cancellation_requested" } };
    },
  };

  return {
    descriptors: [start, cancel],
    async drain() {
      draining = true;
      const all = [...active.values()];
      for (const t of all) t.ctl.abort();
      await Promise.all(all.map((t) => t.done));
      await deps.runner.close().catch(() => undefined);
    },
  };
}
