/**
 * The seam between the app-service dispatcher and each method family (service, sessions, turns, auth,
 * catalog, config). A family module exports a factory returning a `MethodFamily`; the composition root
 * (src/cli/service.ts) passes the families to the dispatcher. Dispatch is built from these descriptors only.
 */
import type { ErrorCode } from "./errors.js";

export const PROTOCOL_VERSION = 1;

/** The 20 operations of app-service v1, in spec order (advertised complete, never filtered). */
export const OPERATIONS = [
  "initialize",
  "status",
  "capabilities",
  "session.list",
  "session.create",
  "session.open",
  "session.replay",
  "session.close",
  "turn.start",
  "turn.cancel",
  "auth.status",
  "auth.login.start",
  "auth.login.callback",
  "auth.login.cancel",
  "auth.logout",
  "catalog.providers",
  "catalog.models",
  "catalog.refresh",
  "config.get",
  "config.set",
] as const;
export type Operation = (typeof OPERATIONS)[number];

/** The six events of app-service v1 (advertised complete). */
export const EVENTS = [
  "turn.started",
  "turn.assistant_delta",
  "turn.activity",
  "turn.terminal",
  "auth.login.progress",
  "auth.login.terminal",
] as const;
export type EventName = (typeof EVENTS)[number];

export type SessionIdRule = "forbidden" | "optional" | "required";

export type ParseResult<P> = { ok: true; value: P } | { ok: false; error: ErrorCode };

export type Outcome =
  | { payload: Record<string, unknown>; error?: undefined; sessionId?: string | null }
  | { error: ErrorCode; payload?: undefined; sessionId?: string | null };

/** Keeps a request ID reserved past its response (turn.start, auth.login.start). */
export interface Reservation {
  /** Releases the ID. Call after the terminal event has been handed to the output. Idempotent. */
  release(): void;
}

export interface RequestContext {
  readonly requestId: string;
  /** The outer `session_id` (envelope-validated: a string of at most max_id_bytes) or null. */
  readonly sessionId: string | null;
  readonly method: Operation;
  /**
   * Emits an event correlated to this request. Events emitted before this request's response is written are
   * held and written right after it, so a start response always precedes its first event.
   * Returns a promise that resolves when the output can take more (backpressure); producers of many events await it.
   * A string `payload` is the payload's compact JSON, written verbatim (the per-delta path encodes it itself).
   */
  emit: (event: EventName, sessionId: string | null, payload: Record<string, unknown> | string) => Promise<void>;
  /** Keeps this request ID reserved after the response until `release()` (long-lived requests). */
  hold(): Reservation;
}

export interface MethodDescriptor<P = unknown> {
  readonly method: Operation;
  readonly sessionId: SessionIdRule;
  /** `true` only for `initialize`: callable before initialization. */
  readonly preInit?: boolean;
  /**
   * `inline` (default): the dispatcher awaits the handler before reading the next record.
   * `worker`: the handler runs concurrently; its response is written when it settles (catalog/config network work).
   */
  readonly mode?: "inline" | "worker";
  /** Validates the payload object (already bounded by the envelope checks). Unknown fields must be rejected. */
  parse(payload: Record<string, unknown>): ParseResult<P>;
  handle(ctx: RequestContext, params: P): Promise<Outcome> | Outcome;
}

export interface MethodFamily {
  /** Each descriptor's `parse` and `handle` agree on its own payload type (method syntax lets them widen to `unknown` here). */
  readonly descriptors: ReadonlyArray<MethodDescriptor>;
  /**
   * Called once at EOF or output failure: cancel active work, wait for its terminal events to be emitted,
   * release resources. Families are drained in reverse registration order (turns before sessions).
   */
  drain?(): Promise<void>;
}

/**
 * A family whose modules load on first use (or in idle time after the first successful `initialize`), so the
 * service answers `initialize` without paying for stores, schemas and the runtime. Its method names are known
 * up front; everything else comes from the loaded family.
 */
export interface LazyFamily {
  readonly methods: readonly Operation[];
  load(): Promise<MethodFamily>;
  /**
   * `eager` (default): loaded right after the first successful `initialize`.
   * `idle`: loaded only once no request has arrived for a while, so compiling it never delays the first
   * session and turn requests (it still loads at once when one of its methods is called).
   * `session`: loaded once the first session request (`session.create` / `session.open`) has started and yielded
   * (its file's creation and fsync), or once no request has arrived for a while, whichever comes first: a session
   * request sent at once after `initialize` is read before it, its disk wait is used, and a prompt sent at once
   * after the session finds it loaded or loading.
   */
  readonly prefetch?: "eager" | "idle" | "session";
}

export function isLazyFamily(f: MethodFamily | LazyFamily): f is LazyFamily {
  return "load" in f;
}

/** Builds a parser for an empty-object payload (`{}` only). */
export function emptyPayload(p: Record<string, unknown>): ParseResult<Record<string, never>> {
  for (const _k in p) return { ok: false, error: "invalid_payload" };
  return { ok: true, value: {} };
}

/** Rejects any key not in `allowed`. */
export function onlyKeys(p: Record<string, unknown>, allowed: readonly string[]): boolean {
  for (const k of Object.keys(p)) if (!allowed.includes(k)) return false;
  return true;
}
