/**
 * `auth.status`, `auth.login.start`, `auth.login.callback`, `auth.login.cancel`, `auth.logout` and the
 * `auth.login.progress` / `auth.login.terminal` events (app-service v1 §Authentication).
 * Wire projection only: login IDs, one login per service, request correlation and error mapping. The store,
 * readiness and the OAuth flow live in src/store/auth and src/runtime/auth.
 *
 * Contracts:
 * - Every auth request omits `session_id` (dispatcher: `invalid_request`); events carry `session_id:null`.
 * - Payload check order: unknown fields and mistyped present fields are rejected before the initialization
 *   check (`invalid_payload`); a missing required field is `invalid_payload` once initialized. Then state:
 *   provider support (`provider_unavailable`) → `confirmation_required` / `auth_busy` / `unknown_login`.
 * - Provider definitions are the GLOBAL settings read on the family's first successful load ("startup") and
 *   kept until restart; readiness itself (store, environment) is reread on every `auth.status`.
 * - At most one login per service. Its start request ID stays reserved until its one terminal event has been
 *   handed to the output; then the login ID becomes `unknown_login`.
 * - Codex logout requests cancellation of the active login before removing the record; the login can then
 *   only end `cancelled` (or, had its commit already won, `exchange_succeeded`, which the logout then removes).
 * - EOF (`drain`) cancels the active login and resolves after its terminal event was emitted.
 * - Nothing from callback input, tokens, account IDs, paths or environment values reaches a response or event;
 *   the authorization URL appears only in the `authorization_url` progress event.
 */
import { randomUUID } from "node:crypto";
import { LIMITS } from "./limits.js";
import { utf8Length } from "../../core/utf8.js";
import { ANTHROPIC_PROVIDER_ID, CODEX_PROVIDER_ID, type AuthStore } from "../../store/auth/auth-store.js";
import type { EnvLike } from "../../store/home.js";
import type { Settings } from "../../store/settings/schema.js";
import type { SettingsStore } from "../../store/settings/settings-store.js";
import { CodexLogin, DEFAULT_CALLBACK_TIMEOUT_MS, MAX_CALLBACK_INPUT_BYTES, type LoginEvent } from "../../runtime/auth/codex-login.js";
import { codexOAuthConfigFromEnv } from "../../runtime/auth/codex-oauth.js";
import { authStatus } from "../../runtime/auth/readiness.js";
import { emptyPayload, onlyKeys, type MethodDescriptor, type MethodFamily, type Outcome, type ParseResult, type RequestContext, type Reservation } from "./descriptor.js";

export interface AuthMethodsDeps {
  store: AuthStore;
  settings: SettingsStore;
  env: EnvLike;
  /**
   * Loopback callback port (default 1455, the redirect registered for the Codex client). Tests pass 0 (a free
   * port) through `BERTH_OPENAI_AUTH_CALLBACK_PORT`; see `callbackPortFromEnv`.
   */
  callbackPort?: number;
  /**
   * Callback wait (default and maximum: the spec's five minutes). Tests shorten it through
   * `BERTH_OPENAI_AUTH_CALLBACK_TIMEOUT_MS`; see `callbackTimeoutMsFromEnv`.
   */
  callbackTimeoutMs?: number;
}

/** `BERTH_OPENAI_AUTH_CALLBACK_PORT`: an integer 0..65535 (0 = any free port); anything else = default. */
export function callbackPortFromEnv(env: EnvLike): number | undefined {
  const v = env["BERTH_OPENAI_AUTH_CALLBACK_PORT"];
  if (v === undefined || !/^\d{1,5}$/.test(v)) return undefined;
  const n = Number(v);
  return n <= 65535 ? n : undefined;
}

/**
 * `BERTH_OPENAI_AUTH_CALLBACK_TIMEOUT_MS` (test/diagnostic override): a positive decimal integer of milliseconds,
 * clamped to the spec's five minutes (the wait can be shortened, never lengthened); anything else = default.
 */
export function callbackTimeoutMsFromEnv(env: EnvLike): number | undefined {
  const v = env["BERTH_OPENAI_AUTH_CALLBACK_TIMEOUT_MS"];
  if (v === undefined || !/^\d+$/.test(v)) return undefined;
  const n = Number(v);
  return n > 0 ? Math.min(n, DEFAULT_CALLBACK_TIMEOUT_MS) : undefined;
}

/**
 * `BERTH_OPENAI_AUTH_TEST_FAULT` (test-only fault seam): exactly `after_exchange` makes every login throw an
 * unexpected error after a successful token exchange, so the `internal_error` terminal has a wire test.
 * Anything else (unset, empty, other values) = no fault. Never set it outside tests: every login would fail.
 */
export function loginFaultFromEnv(env: EnvLike): boolean {
  return env["BERTH_OPENAI_AUTH_TEST_FAULT"] === "after_exchange";
}

/** Advertised arrays hold at most `max_array_items`; built-ins always stay in the list. */
const MAX_STATUS_PROVIDERS = LIMITS.max_array_items;
const LOGOUT_PROVIDERS: readonly string[] = [CODEX_PROVIDER_ID, ANTHROPIC_PROVIDER_ID];

interface ActiveLogin {
  id: string;
  login: CodexLogin | null;
  /** Resolves after the terminal event was emitted and the reservation released. */
  finished: Promise<void> | null;
}

type Fields = Record<string, unknown>;

/** Strict shape check shared by the auth payloads: only `keys`, each present one a string (or boolean for `confirmed`). */
function shape(p: Fields, keys: readonly string[]): ParseResult<Fields> {
  if (!onlyKeys(p, keys)) return { ok: false, error: "invalid_payload" };
  for (const k of keys) {
    if (!(k in p)) continue;
    const v = p[k];
    if (k === "confirmed" ? typeof v !== "boolean" : typeof v !== "string") return { ok: false, error: "invalid_payload" };
  }
  return { ok: true, value: p };
}

/**
 * A login ID as the client may send it: a nonempty string (`invalid_payload`) within the correlation-ID bound
 * (`limit_exceeded`, as for envelope IDs); `null` when it is fine.
 */
function loginIdProblem(v: unknown): "invalid_payload" | "limit_exceeded" | null {
  if (typeof v !== "string" || v.length === 0) return "invalid_payload";
  return utf8Length(v) > LIMITS.max_id_bytes ? "limit_exceeded" : null;
}

export function authMethods(deps: AuthMethodsDeps): MethodFamily {
  const oauthConfig = codexOAuthConfigFromEnv(deps.env);
  let active: ActiveLogin | null = null;
  // Read when the family loads (right after the first initialize); a failed read is retried per request.
  let startupSettings: Promise<Settings | null> = deps.settings.load().then(
    (l) => l.global,
    () => null,
  );

  /** The provider definitions seen at startup (first successful read); kept until restart. */
  const providerSettings = async (): Promise<Settings> => {
    const seen = await startupSettings;
    if (seen !== null) return seen;
    const global = (await deps.settings.load()).global;
    startupSettings = Promise.resolve(global);
    return global;
  };

  const status: MethodDescriptor<Record<string, never>> = {
    method: "auth.status",
    sessionId: "forbidden",
    parse: emptyPayload,
    async handle() {
      try {
        const list = await authStatus(deps.store, await providerSettings(), deps.env);
        const builtins = list.filter((p) => LOGOUT_PROVIDERS.includes(p.provider_id));
        const customs = list.filter((p) => !LOGOUT_PROVIDERS.includes(p.provider_id)).slice(0, MAX_STATUS_PROVIDERS - builtins.length);
        const keep = new Set([...builtins, ...customs]);
        return { payload: { providers: list.filter((p) => keep.has(p)).map((p) => ({ ...p })) } };
      } catch {
        return { error: "internal_error" };
      }
    },
  };

  const emitter = (ctx: RequestContext, loginId: string, reservation: Reservation) => (event: LoginEvent): void => {
    const base = { login_id: loginId, provider_id: CODEX_PROVIDER_ID };
    if (event.type === "progress") {
      const payload = event.state === "authorization_url" ? { ...base, state: event.state, url: event.url, open_browser: true } : { ...base, state: event.state };
      ctx.emit("auth.login.progress", null, payload).catch(() => undefined);
      return;
    }
    ctx.emit("auth.login.terminal", null, { ...base, state: event.state, cleanup_complete: true }).catch(() => undefined);
    // The terminal is handed to the output: the login ID and the start request ID are free again.
    if (active?.id === loginId) active = null;
    reservation.release();
  };

  const start: MethodDescriptor<Fields> = {
    method: "auth.login.start",
    sessionId: "forbidden",
    parse: (p) => shape(p, ["provider_id"]),
    async handle(ctx, p): Promise<Outcome> {
      const providerId = p["provider_id"];
      if (typeof providerId !== "string") return { error: "invalid_payload" };
      if (providerId !== CODEX_PROVIDER_ID) return { error: "provider_unavailable" };
      if (active !== null) return { error: "auth_busy" };
      const id = `login-${randomUUID()}`;
      const slot: ActiveLogin = { id, login: null, finished: null };
      active = slot;
      const reservation = ctx.hold();
      let login: CodexLogin;
      try {
        login = await CodexLogin.prepare({
          store: deps.store,
          oauth: oauthConfig,
          onEvent: emitter(ctx, id, reservation),
          ...(deps.callbackPort !== undefined ? { port: deps.callbackPort } : {}),
          ...(deps.callbackTimeoutMs !== undefined ? { callbackTimeoutMs: deps.callbackTimeoutMs } : {}),
          ...(loginFaultFromEnv(deps.env) ? { faultAfterExchange: true } : {}),
        });
      } catch {
        // Rejected start: no worker, no terminal event; the ID is released with this response.
        active = null;
        reservation.release();
        return { error: "internal_error" };
      }
      slot.login = login;
      slot.finished = login.run().then(
        () => undefined,
        () => undefined,
      );
      return { payload: { login_id: id, provider_id: CODEX_PROVIDER_ID, status: "started" } };
    },
  };

  /** The active login for `loginId`, or null (unknown, finished, or still preparing). */
  const find = (loginId: string): CodexLogin | null => (active !== null && active.id === loginId ? active.login : null);

  const callback: MethodDescriptor<Fields> = {
    method: "auth.login.callback",
    sessionId: "forbidden",
    parse(p) {
      const r = shape(p, ["login_id", "input"]);
      if (!r.ok) return r;
      const input = p["input"];
      if (typeof input === "string" && (input.trim().length === 0 || utf8Length(input) > MAX_CALLBACK_INPUT_BYTES))
        return { ok: false, error: "invalid_payload" };
      const bad = "login_id" in p ? loginIdProblem(p["login_id"]) : null;
      if (bad !== null) return { ok: false, error: bad };
      return r;
    },
    handle(_ctx, p): Outcome {
      const loginId = p["login_id"];
      const input = p["input"];
      if (typeof loginId !== "string" || typeof input !== "string") return { error: "invalid_payload" };
      const login = find(loginId);
      if (login === null) return { error: "unknown_login" };
      switch (login.submit(input)) {
        case "submitted":
          return { payload: { login_id: loginId, status: "submitted" } };
        case "auth_busy":
          return { error: "auth_busy" };
        case "invalid_input":
          return { error: "invalid_payload" };
        case "unknown_login":
          return { error: "unknown_login" };
      }
    },
  };

  const cancel: MethodDescriptor<Fields> = {
    method: "auth.login.cancel",
    sessionId: "forbidden",
    parse(p) {
      const r = shape(p, ["login_id"]);
      const bad = r.ok && "login_id" in p ? loginIdProblem(p["login_id"]) : null;
      if (bad !== null) return { ok: false, error: bad };
      return r;
    },
    handle(_ctx, p): Outcome {
      const loginId = p["login_id"];
      if (typeof loginId !== "string") return { error: "invalid_payload" };
      const login = find(loginId);
      if (login === null || login.cancel() !== "cancellation_requested") return { error: "unknown_login" };
      return { payload: { login_id: loginId, status: "cancellation_requested" } };
    },
  };

  const logout: MethodDescriptor<Fields> = {
    method: "auth.logout",
    sessionId: "forbidden",
    parse: (p) => shape(p, ["provider_id", "confirmed"]),
    async handle(_ctx, p): Promise<Outcome> {
      const providerId = p["provider_id"];
      if (typeof providerId !== "string") return { error: "invalid_payload" };
      if (!LOGOUT_PROVIDERS.includes(providerId)) return { error: "provider_unavailable" };
      if (p["confirmed"] !== true) return { error: "confirmation_required" };
      if (providerId === CODEX_PROVIDER_ID) active?.login?.cancel();
      try {
        const { removed } = await deps.store.logout(providerId);
        return { payload: { provider_id: providerId, status: "logged_out", removed, environment_unchanged: true } };
      } catch {
        return { error: "internal_error" };
      }
    },
  };

  return {
    descriptors: [status, start, callback, cancel, logout],
    /** EOF/output failure: cancel the active login and wait until its terminal event was emitted. */
    async drain() {
      const current = active;
      if (current === null) return;
      current.login?.cancel();
      if (current.finished !== null) await current.finished;
    },
  };
}
