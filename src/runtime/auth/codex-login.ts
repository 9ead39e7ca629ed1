/**
 * One Codex (ChatGPT) OAuth login: authorization code + PKCE (oauth4webapi), a loopback redirect
 * listener on 127.0.0.1, and manual submission of the final redirect URL or a bare code.
 *
 * Contracts (the wire adapter adds login IDs, one-login-per-service and request correlation):
 * - `CodexLogin.prepare()` observes the openai-codex generation (throws `AuthStorageError` on
 *   unreadable storage: reject the start, no worker exists), creates PKCE/state, and tries to
 *   bind the listener (failure is tolerated: manual submission still works).
 * - `run()` emits, never synchronously: `authorization_url` (url, open_browser:true) → `waiting` →
 *   `callback_received` → `callback_accepted` → exactly one terminal with `cleanup_complete:true`,
 *   emitted after the listener is closed and timers cleared. Failures stop the sequence early
 *   and go straight to their terminal. `run()` resolves with the terminal state after emitting it.
 * - The first callback of this sign-in wins (loopback or manual); any later submission answers `auth_busy`. A
 *   loopback request is this sign-in's only when it carries the attempt's `state` and a `code` or an `error` (the
 *   authorization server's redirect always does): any local process can request the callback URL, so one with a
 *   wrong or missing state, or with neither code nor error, is answered 400 naming the cause and consumes nothing
 *   (as the Codex CLI ignores it); the login keeps waiting, within its own time limit. A loopback request whose
 *   target does not parse as a URL is answered 400 too and consumes nothing.
 *   Manual input: trimmed, nonempty, ≤ 4096 bytes; a URL (or query string) must carry the
 *   attempt's OAuth state; a bare code skips the state check but stays tied to this login's PKCE
 *   verifier. Input is never echoed, logged or stored.
 * - `cancel()` before a callback ends with `cancelled`; after acceptance, an in-flight exchange
 *   finishes within its bounded timeout and then nothing is committed (`cancelled`); a commit
 *   already under way may still win (`exchange_succeeded`).
 * - The commit uses the generation observed by `prepare()`: a logout, login or refresh in between
 *   yields `auth_changed`. A fresh record never inherits another account's refresh token.
 * - Any other (unexpected) exception ends the flow with `internal_error`; its text is dropped, never emitted.
 * - `dispose()` (EOF) cancels and resolves once the terminal was emitted.
 */
import { timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import * as oauth from "oauth4webapi";
import { CODEX_PROVIDER_ID, type AuthStore } from "../../store/auth/auth-store.js";
import {
  authorizationUrl,
  CODEX_CALLBACK_PATH,
  CODEX_DEFAULT_PORT,
  codexEndpoints,
  exchangeCode,
  type CodexEndpoints,
  type CodexOAuthConfig,
} from "./codex-oauth.js";

export const MAX_CALLBACK_INPUT_BYTES = 4096;
export const DEFAULT_CALLBACK_TIMEOUT_MS = 5 * 60_000;

export type LoginTerminalState =
  | "exchange_succeeded"
  | "callback_timeout"
  | "callback_failed"
  | "exchange_failed"
  | "auth_changed"
  | "storage_failed"
  | "internal_error"
  | "cancelled";

export type LoginEvent =
  | { type: "progress"; state: "authorization_url"; url: string; open_browser: true }
  | { type: "progress"; state: "waiting" | "callback_received" | "callback_accepted" }
  | { type: "terminal"; state: LoginTerminalState; cleanup_complete: true };

export type SubmitResult = "submitted" | "auth_busy" | "invalid_input" | "unknown_login";
export type CancelResult = "cancellation_requested" | "unknown_login";

export interface CodexLoginOptions {
  store: AuthStore;
  oauth: CodexOAuthConfig;
  onEvent: (event: LoginEvent) => void;
  /** Loopback listener port (default 1455; 0 picks a free port — tests). */
  port?: number;
  callbackTimeoutMs?: number;
  now?: () => number;
  /**
   * Test-only fault seam: throw an unexpected error right after a successful token exchange, before the
   * commit, so the `internal_error` terminal is reachable through the real flow. Never set in production.
   */
  faultAfterExchange?: boolean;
}

type Signal =
  | { kind: "callback"; params: URLSearchParams; checkState: boolean }
  | { kind: "cancel" }
  | { kind: "timeout" };

const PAGE_OK = "<!doctype html><title>Berth</title><p>Sign-in received. You can close this window and return to Berth.</p>";
const PAGE_BUSY = "<!doctype html><title>Berth</title><p>This sign-in attempt already received a callback.</p>";

export class CodexLogin {
  private readonly ep: CodexEndpoints;
  private readonly now: () => number;
  private signalResolve!: (s: Signal) => void;
  private readonly signal: Promise<Signal>;
  private callbackTaken = false;
  private cancelRequested = false;
  private done = false;
  private runPromise: Promise<LoginTerminalState> | null = null;

  private constructor(
    private readonly opts: CodexLoginOptions,
    private readonly generation: number,
    private readonly verifier: string,
    private readonly state: string,
    private readonly url: string,
    private readonly redirectUri: string,
    private server: Server | null,
  ) {
    this.ep = codexEndpoints(opts.oauth);
    this.now = opts.now ?? Date.now;
    this.signal = new Promise((resolve) => (this.signalResolve = resolve));
    this.server?.on("request", (req: IncomingMessage, res: ServerResponse) => this.onHttp(req, res));
  }

  static async prepare(opts: CodexLoginOptions): Promise<CodexLogin> {
    const generation = (await opts.store.read()).generation(CODEX_PROVIDER_ID);
    const ep = codexEndpoints(opts.oauth);
    const verifier = oauth.generateRandomCodeVerifier();
    const challenge = await oauth.calculatePKCECodeChallenge(verifier);
    const state = oauth.generateRandomState();
    const wanted = opts.port ?? CODEX_DEFAULT_PORT;
    const server = await listen(wanted);
    const port = server === null ? wanted : (server.address() as AddressInfo).port;
    const redirectUri = `http://localhost:${port}${CODEX_CALLBACK_PATH}`;
    const url = authorizationUrl(ep, { redirectUri, state, codeChallenge: challenge });
    return new CodexLogin(opts, generation, verifier, state, url, redirectUri, server);
  }

  /** True once the terminal event was emitted. */
  get finished(): boolean {
    return this.done;
  }

  /** Whether the loopback listener could be bound (otherwise manual submission only). */
  get listening(): boolean {
    return this.server !== null;
  }

  run(): Promise<LoginTerminalState> {
    this.runPromise ??= this.flow();
    return this.runPromise;
  }

  submit(input: string): SubmitResult {
    if (this.done) return "unknown_login";
    const value = input.trim();
    if (value.length === 0 || Buffer.byteLength(input, "utf8") > MAX_CALLBACK_INPUT_BYTES) return "invalid_input";
    if (this.callbackTaken || this.cancelRequested) return "auth_busy";
    this.callbackTaken = true;
    this.signalResolve(parseManualInput(value));
    return "submitted";
  }

  cancel(): CancelResult {
    if (this.done) return "unknown_login";
    this.cancelRequested = true;
    this.signalResolve({ kind: "cancel" });
    return "cancellation_requested";
  }

  async dispose(): Promise<LoginTerminalState> {
    this.cancel();
    return this.run();
  }

  private emit(event: LoginEvent): void {
    try {
      this.opts.onEvent(event);
    } catch {
      // A failing sink must not break the flow or its cleanup.
    }
  }

  private async flow(): Promise<LoginTerminalState> {
    let terminal: LoginTerminalState;
    try {
      terminal = await this.steps();
    } catch {
      terminal = "internal_error";
    }
    await this.cleanup();
    this.done = true;
    this.emit({ type: "terminal", state: terminal, cleanup_complete: true });
    return terminal;
  }

  private async steps(): Promise<LoginTerminalState> {
    await Promise.resolve(); // never emit synchronously inside run()
    if (this.cancelRequested) return "cancelled";
    this.emit({ type: "progress", state: "authorization_url", url: this.url, open_browser: true });
    this.emit({ type: "progress", state: "waiting" });
    const timer = setTimeout(() => this.signalResolve({ kind: "timeout" }), this.opts.callbackTimeoutMs ?? DEFAULT_CALLBACK_TIMEOUT_MS);
    let sig: Signal;
    try {
      sig = await this.signal;
    } finally {
      clearTimeout(timer);
    }
    if (sig.kind === "cancel") return "cancelled";
    if (sig.kind === "timeout") {
      this.callbackTaken = true; // a late callback is refused
      return "callback_timeout";
    }
    this.emit({ type: "progress", state: "callback_received" });
    let validated: URLSearchParams;
    try {
      validated = oauth.validateAuthResponse(this.ep.as, this.ep.client, sig.params, sig.checkState ? this.state : oauth.skipStateCheck);
    } catch {
      return "callback_failed";
    }
    if (this.cancelRequested) return "cancelled";
    this.emit({ type: "progress", state: "callback_accepted" });
    let record;
    try {
      record = await exchangeCode(this.ep, validated, this.redirectUri, this.verifier, this.now());
    } catch {
      return "exchange_failed";
    }
    if (this.opts.faultAfterExchange === true) throw new Error("injected login fault after the token exchange");
    if (this.cancelRequested) return "cancelled";
    try {
      const outcome = await this.opts.store.commitOAuth(CODEX_PROVIDER_ID, this.generation, record);
      return outcome === "committed" ? "exchange_succeeded" : "auth_changed";
    } catch {
      return "storage_failed";
    }
  }

  private onHttp(req: IncomingMessage, res: ServerResponse): void {
    // Any local process can connect: a target node:http accepts but the URL parser refuses (`GET http://[`) is
    // answered 400 here, never thrown from the request handler, where it would end the process.
    let url: URL;
    try {
      url = new URL(req.url ?? "/", "http://localhost");
    } catch {
      res.writeHead(400, { "content-type": "text/plain", connection: "close" }).end("bad request");
      return;
    }
    if (req.method !== "GET" || url.pathname !== CODEX_CALLBACK_PATH) {
      res.writeHead(404, { "content-type": "text/plain", connection: "close" }).end("not found");
      return;
    }
    if (this.callbackTaken || this.cancelRequested || this.done) {
      res.writeHead(409, { "content-type": "text/html; charset=utf-8", connection: "close" }).end(PAGE_BUSY);
      return;
    }
    const foreign = notThisSignIn(url.searchParams, this.state);
    if (foreign !== null) {
      res.writeHead(400, { "content-type": "text/plain; charset=utf-8", connection: "close" }).end(`${foreign}; ignored, this sign-in is still waiting for its own callback\n`);
      return;
    }
    this.callbackTaken = true;
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", connection: "close" }).end(PAGE_OK);
    this.signalResolve({ kind: "callback", params: url.searchParams, checkState: true });
  }

  private async cleanup(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server === null) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}

/**
 * Why a loopback callback is not this sign-in's redirect (null when it is): the cause, never the expected state.
 * The state is compared in constant time (it is what keeps another local process from completing the login).
 */
function notThisSignIn(q: URLSearchParams, state: string): string | null {
  const got = q.get("state");
  if (got === null || got === "") return "the callback has no state: it is not from this sign-in's browser redirect";
  const a = Buffer.from(got);
  const b = Buffer.from(state);
  if (a.length !== b.length || !timingSafeEqual(a, b)) return "the callback's state does not match this sign-in: it is from another sign-in attempt or another program";
  if (!q.has("code") && !q.has("error")) return "the callback has neither a code nor an error";
  return null;
}

/** A URL or query string keeps its state for checking; anything else is a bare code. */
function parseManualInput(value: string): Signal {
  if (/^https?:\/\//i.test(value)) {
    try {
      return { kind: "callback", params: new URL(value).searchParams, checkState: true };
    } catch {
      return { kind: "callback", params: new URLSearchParams(), checkState: true };
    }
  }
  if (/(^|[?&])(code|state|error)=/.test(value)) {
    return { kind: "callback", params: new URLSearchParams(value.replace(/^.*\?/, "")), checkState: true };
  }
  return { kind: "callback", params: new URLSearchParams({ code: value }), checkState: false };
}

function listen(port: number): Promise<Server | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(null));
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}
