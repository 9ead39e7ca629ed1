/**
 * `AppServiceClient`: the typed API over one app-service v1 connection (a spawned `berth service` or given streams).
 *
 * Contract:
 * - `initialize()` must succeed (server success AND local preflight) before any other call; nothing is pipelined
 *   behind it. A failed preflight or renegotiation makes every later call reject with `IncompatibleServiceError`
 *   without sending anything.
 * - Calls to an operation the service did not advertise reject locally with `IncompatibleServiceError`.
 * - Each call sends exactly one request and never retries; an error response rejects with `ServiceError`.
 * - Identities are checked against the request: open/close/replay answer for the requested session, a turn started
 *   on a session runs on that session, a login answers for the requested provider.
 */
import type { Readable, Writable } from "node:stream";
import { isSafeId } from "../../core/ids.js";
import { utf8Length } from "../../core/utf8.js";
import { Connection } from "./connection.js";
import { IncompatibleServiceError, RequestError, ServiceError } from "./errors.js";
import * as P from "./payloads.js";
import { DEFAULT_LOCAL_BOUNDS, PROTOCOL_VERSION, preflight, type LocalBounds, type Operation, type Profile } from "./preflight.js";
import { Login, Turn } from "./streams.js";
import { DecodeError, fail, literal, type Obj } from "./validate.js";

export interface ClientOptions {
  /** The service's stdout. */
  input: Readable;
  /** The service's stdin. */
  output: Writable;
  /** Operations this client needs; preflight refuses a service that does not advertise them all. */
  requiredOperations?: readonly Operation[];
  localBounds?: Partial<LocalBounds>;
  /** Called once when the connection fails or the service's output ends. */
  onFailure?: (err: Error) => void;
}

/** What `berth chat` and most frontends need. Discovery is by the complete advertised set, so > 8 is fine. */
export const DEFAULT_REQUIRED_OPERATIONS: readonly Operation[] = [
  "status",
  "session.list",
  "session.create",
  "session.open",
  "session.replay",
  "session.close",
  "turn.start",
  "turn.cancel",
];

export interface ReplayOptions {
  after?: string | null;
  /** Page size; undefined means the server's default. */
  limit?: number | undefined;
}

/** A replay page plus `restarted`: true on the page after a `resync_required` (discard cached history first). */
export type ReplayStep = P.ReplayPage & { restarted: boolean };

export class AppServiceClient {
  private readonly conn: Connection;
  private incompatible: IncompatibleServiceError | null = null;
  private initializing = false;
  private readonly required: readonly Operation[];
  /** Sessions this client holds an explicit attachment on (create/open until close returns `closed`). */
  readonly attached = new Set<string>();

  constructor(opts: ClientOptions) {
    const local = { ...DEFAULT_LOCAL_BOUNDS, ...opts.localBounds };
    this.conn = new Connection(opts.input, opts.output, local, opts.onFailure);
    this.required = opts.requiredOperations ?? DEFAULT_REQUIRED_OPERATIONS;
  }

  get profile(): Profile | null {
    return this.conn.profile;
  }

  /** Resolves when the service's output has ended. */
  get closed(): Promise<void> {
    return this.conn.closed.promise;
  }

  /** Initializes and runs the full client preflight. Throws IncompatibleServiceError, ServiceError or ProtocolError. */
  async initialize(): Promise<Profile> {
    if (this.initializing) throw new RequestError("initialize is already in flight");
    this.initializing = true;
    // A renegotiation suspends every other call until it succeeds; a failed one leaves the client refusing them.
    this.conn.profile = null;
    try {
      const payload = await this.conn.send("initialize", { supported_protocol_versions: [PROTOCOL_VERSION], requested_capabilities: [] }, null, (p) => p);
      let profile: Profile;
      try {
        profile = preflight(payload, this.conn.local, this.required);
      } catch (err) {
        if (err instanceof DecodeError) throw new IncompatibleServiceError(err.message);
        throw err;
      }
      this.incompatible = null;
      this.conn.profile = profile;
      return profile;
    } catch (err) {
      this.incompatible =
        err instanceof IncompatibleServiceError ? err : new IncompatibleServiceError(err instanceof ServiceError ? `initialize failed (${err.code})` : "initialize failed");
      throw err instanceof ServiceError || err instanceof IncompatibleServiceError ? this.incompatible : err;
    } finally {
      this.initializing = false;
    }
  }

  private ready(method: Operation): Profile {
    if (this.incompatible !== null) throw this.incompatible;
    if (this.conn.failure !== null) throw this.conn.failure;
    const p = this.conn.profile;
    if (p === null) throw new RequestError("initialize the client first");
    if (!p.operations.has(method)) throw new IncompatibleServiceError(`operation '${method}' is not advertised`);
    return p;
  }

  /** Sends one request; `decode` runs in record order on success (`sid`/`requestId` from the response envelope). */
  private async call<T>(
    method: Operation,
    payload: Obj,
    sessionId: string | null,
    decode: (p: Obj, profile: Profile, sid: string | null, requestId: string) => T,
  ): Promise<T> {
    const profile = this.ready(method);
    if (sessionId !== null && !isSafeId(sessionId, profile.limits.max_id_bytes)) throw new RequestError("invalid session ID");
    return this.conn.send(method, payload, sessionId, (p, env) => decode(p, profile, env.sessionId, env.requestId as string));
  }

  private pageLimit(limit: number | undefined, advertised: number): number {
    const max = Math.min(advertised, this.conn.local.maxPageItems);
    if (limit === undefined) return max;
    if (!Number.isInteger(limit) || limit < 1) throw new RequestError("limit must be a positive integer");
    return Math.min(limit, max);
  }

  async status(): Promise<P.StatusResult> {
    return this.call("status", {}, null, P.decodeStatus);
  }

  async capabilities(): Promise<Obj> {
    return this.call("capabilities", {}, null, (p) => p);
  }

  async listSessions(opts: { after?: string | null; limit?: number } = {}): Promise<P.SessionListPage> {
    const limit = this.pageLimit(opts.limit, this.ready("session.list").limits.max_session_page_items);
    return this.call("session.list", { after: opts.after ?? null, limit }, null, (p, prof) => P.decodeSessionList(p, prof, limit));
  }

  async createSession(): Promise<P.SessionState> {
    const s = await this.call("session.create", {}, null, (p, prof, sid) => {
      const r = P.decodeSessionState(p, prof, ["open"], "session.create");
      if (sid !== null && sid !== r.session_id) fail("session.create response names another session");
      return r;
    });
    this.attached.add(s.session_id);
    return s;
  }

  async openSession(sessionId: string): Promise<P.SessionState> {
    const s = await this.call("session.open", {}, sessionId, (p, prof) => this.sameSession(P.decodeSessionState(p, prof, ["open"], "session.open"), sessionId));
    this.attached.add(sessionId);
    return s;
  }

  async closeSession(sessionId: string): Promise<P.SessionState> {
    const s = await this.call("session.close", {}, sessionId, (p, prof) => this.sameSession(P.decodeSessionState(p, prof, ["closed", "closing"], "session.close"), sessionId));
    if (s.status === "closed") this.attached.delete(sessionId);
    return s;
  }

  private sameSession(s: P.SessionState, sessionId: string): P.SessionState {
    if (s.session_id !== sessionId) fail("response payload names another session");
    return s;
  }

  /** One replay page, as sent by the service. */
  async replayPage(sessionId: string, opts: ReplayOptions = {}): Promise<P.ReplayPage> {
    const limit = this.pageLimit(opts.limit, this.ready("session.replay").limits.max_session_page_items);
    const after = opts.after ?? null;
    if (after !== null && utf8Length(after) > 128) throw new RequestError("replay cursor exceeds 128 bytes");
    return this.call("session.replay", { after, limit }, sessionId, (p, prof) => P.decodeReplayPage(p, prof, limit));
  }

  /**
   * Replays durable history as pages: follows `truncated` with `next_cursor`; on `resync_required` yields that
   * (empty) page, then restarts from the beginning with `restarted:true` (at most twice); passes `gap` through.
   * Ends at the snapshot end (`truncated:false`); the last page's `next_cursor` is where to poll later.
   */
  async *replay(sessionId: string, opts: ReplayOptions = {}): AsyncGenerator<ReplayStep> {
    let after = opts.after ?? null;
    let restarted = false;
    let resyncs = 0;
    for (;;) {
      const page = await this.replayPage(sessionId, { after, limit: opts.limit });
      if (page.resync_required) {
        if (++resyncs > 2) throw new RequestError("replay kept requiring resync; try again later");
        yield { ...page, restarted };
        after = null;
        restarted = true;
        continue;
      }
      yield { ...page, restarted };
      restarted = false;
      if (!page.truncated) return;
      if (page.events.length === 0 && page.next_cursor === after) throw new RequestError("replay made no progress");
      after = page.next_cursor;
    }
  }

  /**
   * Starts a turn (on `sessionId`, or a new session). Resolves once accepted, with a `Turn` whose updates are the
   * live deltas/activity and whose `result` is the terminal (authoritative `assistant_text`).
   */
  async startTurn(opts: { prompt: string; sessionId?: string | null }): Promise<Turn> {
    const profile = this.ready("turn.start");
    if (typeof opts.prompt !== "string" || opts.prompt.trim().length === 0) throw new RequestError("the prompt is empty");
    if (utf8Length(opts.prompt) > Math.min(profile.limits.max_string_bytes, this.conn.local.maxStringBytes)) throw new RequestError("the prompt is too long");
    const sessionId = opts.sessionId ?? null;
    return this.call("turn.start", { prompt: opts.prompt }, sessionId, (p, prof, envSid, requestId) => {
      const a = P.decodeTurnAccepted(p, prof);
      if (sessionId !== null && a.session_id !== sessionId) fail("turn.start accepted on another session");
      if (envSid !== null && envSid !== a.session_id) fail("turn.start response envelope names another session");
      for (const t of this.conn.turns.values()) if (t.turnId === a.turn_id) fail("turn.start reused an active turn ID");
      const turn = new Turn(requestId, a.turn_id, a.session_id, this.conn.pressure, (id) => this.cancelTurn(id));
      this.conn.turns.set(requestId, turn);
      return turn;
    });
  }

  /** `turn.cancel`: resolves on `cancellation_requested`; the turn still ends through its terminal event. */
  async cancelTurn(turnId: string): Promise<P.CancellationRequested> {
    const profile = this.ready("turn.cancel");
    if (!isSafeId(turnId, profile.limits.max_id_bytes)) throw new RequestError("invalid turn ID");
    return this.call("turn.cancel", { turn_id: turnId }, null, (p) => P.decodeCancellation(p, "turn.cancel"));
  }

  async authStatus(): Promise<{ providers: P.ProviderAuth[] }> {
    return this.call("auth.status", {}, null, P.decodeAuthStatus);
  }

  /** Starts a login; progress (incl. the authorization URL) arrives as the `Login`'s updates. */
  async startLogin(providerId: string): Promise<Login> {
    return this.call("auth.login.start", { provider_id: providerId }, null, (p, prof, _sid, requestId) => {
      const s = P.decodeLoginStarted(p, prof);
      if (s.provider_id !== providerId) fail("auth.login.start answered for another provider");
      if (this.conn.logins.size > 0) fail("a second login started while one is active");
      const login = new Login(requestId, s.login_id, s.provider_id, this.conn.pressure, {
        callback: (id, input) => this.submitLoginCallback(id, input),
        cancel: (id) => this.cancelLogin(id),
      });
      this.conn.logins.set(requestId, login);
      return login;
    });
  }

  async submitLoginCallback(loginId: string, input: string): Promise<{ status: "submitted" }> {
    if (input.length === 0 || utf8Length(input) > 4096) throw new RequestError("the callback input must be 1..4096 bytes");
    return this.call("auth.login.callback", { login_id: loginId, input }, null, (p) => ({
      status: literal(p, "status", "auth.login.callback", "submitted"),
    }));
  }

  async cancelLogin(loginId: string): Promise<P.CancellationRequested> {
    return this.call("auth.login.cancel", { login_id: loginId }, null, (p) => P.decodeCancellation(p, "auth.login.cancel"));
  }

  async logout(providerId: string): Promise<P.LogoutResult> {
    return this.call("auth.logout", { provider_id: providerId, confirmed: true }, null, (p) => {
      const r = P.decodeLogout(p);
      if (r.provider_id !== providerId) fail("auth.logout answered for another provider");
      return r;
    });
  }

  async catalogProviders(opts: { offset?: number; limit?: number } = {}): Promise<P.CatalogProvidersPage> {
    const limit = this.pageLimit(opts.limit, this.ready("catalog.providers").limits.max_catalog_page_items);
    return this.call("catalog.providers", { offset: opts.offset ?? 0, limit }, null, (p) => P.decodeCatalogProviders(p, limit));
  }

  async catalogModels(providerId: string, opts: { offset?: number; limit?: number } = {}): Promise<P.CatalogModelsPage> {
    const limit = this.pageLimit(opts.limit, this.ready("catalog.models").limits.max_catalog_page_items);
    return this.call("catalog.models", { provider_id: providerId, offset: opts.offset ?? 0, limit }, null, (p) => {
      const r = P.decodeCatalogModels(p, limit);
      for (const e of r.entries) if (e.provider_id !== providerId) fail("catalog.models returned another provider's model");
      return r;
    });
  }

  async catalogRefresh(providerId: string): Promise<{ provider_id: string; state: P.CatalogState }> {
    return this.call("catalog.refresh", { provider_id: providerId }, null, (p) => P.decodeCatalogRefresh(p));
  }

  async configGet(): Promise<P.EffectiveConfig> {
    return this.call("config.get", {}, null, (p) => P.decodeConfig(p));
  }

  async configSet(change: { scope: P.Scope; selection?: { provider_id: string; model_id: string }; thinking_level?: P.ThinkingLevel; fast?: boolean }): Promise<P.ConfigSetResult> {
    const payload: Obj = { scope: change.scope };
    if (change.selection !== undefined) payload.selection = { provider_id: change.selection.provider_id, model_id: change.selection.model_id };
    if (change.thinking_level !== undefined) payload.thinking_level = change.thinking_level;
    if (change.fast !== undefined) payload.fast = change.fast;
    if (Object.keys(payload).length === 1) throw new RequestError("config.set needs at least one change");
    return this.call("config.set", payload, null, (p) => {
      const r = P.decodeConfigSet(p);
      if (r.scope !== change.scope) fail("config.set answered for another scope");
      return r;
    });
  }

  /** Ends the service's input (it cancels active work and exits) and waits for its output to end. */
  close(): Promise<void> {
    return this.conn.close();
  }
}

