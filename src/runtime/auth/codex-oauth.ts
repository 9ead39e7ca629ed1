/**
 * OpenAI (Codex) OAuth parameters and token-endpoint calls through `oauth4webapi`.
 * The public client ID, scopes, `/oauth/authorize`, `/oauth/token` and the registered redirect
 * `http://localhost:1455/auth/callback` are those the Codex CLI uses (openai/codex
 * `codex-rs/login/src/server.rs`). The issuer base URL is a parameter; only `codexOAuthConfigFromEnv`
 * reads the environment (`BERTH_OPENAI_AUTH_ISSUER`).
 * Contract: every failure surfaces as `CodexOAuthError` with a fixed reason; no token, code,
 * provider body or URL is ever part of an error.
 */
import * as oauth from "oauth4webapi";
import type { OAuthRecord } from "../../store/auth/auth-store.js";
import { boundedFetch } from "./http.js";
import { CODEX_SCOPES, CodexOAuthError, type CodexOAuthConfig } from "./codex-oauth-config.js";

const MAX_TOKEN_RESPONSE_BYTES = 256 * 1024;
/** A token answer's lifetime counts for at most this long (its `expires_in` or `exp` may say more). */
export const MAX_TOKEN_LIFETIME_MS = 30 * 24 * 3600_000;
/** What a token or account ID must be to go into an HTTP header or form as it is: visible ASCII, no space. */
const HEADER_SAFE = /^[\x21-\x7e]+$/;

export { CODEX_CALLBACK_PATH, CODEX_CLIENT_ID, CODEX_DEFAULT_PORT, CODEX_SCOPES, CodexOAuthError, DEFAULT_OPENAI_AUTH_ISSUER, codexOAuthConfigFromEnv, type CodexOAuthConfig } from "./codex-oauth-config.js";

export interface CodexEndpoints {
  as: oauth.AuthorizationServer;
  client: oauth.Client;
  options: oauth.HttpRequestOptions<"POST", URLSearchParams>;
  authorizationEndpoint: string;
}

export function codexEndpoints(cfg: CodexOAuthConfig): CodexEndpoints {
  const base = new URL(cfg.issuer);
  const issuer = base.href.replace(/\/+$/, "");
  const as: oauth.AuthorizationServer = {
    issuer,
    authorization_endpoint: `${issuer}/oauth/authorize`,
    token_endpoint: `${issuer}/oauth/token`,
  };
  const loopbackHttp = base.protocol === "http:" && (base.hostname === "127.0.0.1" || base.hostname === "localhost" || base.hostname === "[::1]");
  const timeoutMs = cfg.timeoutMs;
  return {
    as,
    client: { client_id: cfg.clientId },
    options: {
      signal: () => AbortSignal.timeout(timeoutMs),
      [oauth.customFetch]: boundedFetch(MAX_TOKEN_RESPONSE_BYTES, cfg.fetch),
      // Plain HTTP is allowed only for a loopback issuer (tests, local fakes).
      ...(loopbackHttp ? { [oauth.allowInsecureRequests]: true } : {}),
    },
    authorizationEndpoint: `${issuer}/oauth/authorize`,
  };
}

export function authorizationUrl(ep: CodexEndpoints, p: { redirectUri: string; state: string; codeChallenge: string }): string {
  const url = new URL(ep.authorizationEndpoint);
  const q = url.searchParams;
  q.set("response_type", "code");
  q.set("client_id", ep.client.client_id);
  q.set("redirect_uri", p.redirectUri);
  q.set("scope", CODEX_SCOPES);
  q.set("code_challenge", p.codeChallenge);
  q.set("code_challenge_method", "S256");
  q.set("id_token_add_organizations", "true");
  q.set("codex_cli_simplified_flow", "true");
  q.set("state", p.state);
  q.set("originator", "codex_cli_rs");
  return url.href;
}

/** Exchanges a validated callback for a fresh record (never merged with any previous record). */
export async function exchangeCode(
  ep: CodexEndpoints,
  callback: URLSearchParams,
  redirectUri: string,
  verifier: string,
  now: number,
): Promise<OAuthRecord> {
  try {
    const res = await oauth.authorizationCodeGrantRequest(ep.as, ep.client, oauth.None(), callback, redirectUri, verifier, ep.options);
    const tokens = await oauth.processAuthorizationCodeResponse(ep.as, ep.client, res);
    return toRecord(tokens, null, null, now);
  } catch {
    throw new CodexOAuthError("exchange_failed");
  }
}

/**
 * Refreshes with `record.refresh`. A rejected grant (`invalid_grant` and other OAuth errors) is
 * `refresh_rejected` (the refresh token is dead); anything else is `refresh_failed` (transient).
 * The refreshed record keeps the old refresh token and account only when the issuer omits them.
 */
export async function refreshRecord(ep: CodexEndpoints, record: OAuthRecord, now: number): Promise<OAuthRecord> {
  if (record.refresh === null) throw new CodexOAuthError("refresh_rejected");
  try {
    const res = await oauth.refreshTokenGrantRequest(ep.as, ep.client, oauth.None(), record.refresh, ep.options);
    const tokens = await oauth.processRefreshTokenResponse(ep.as, ep.client, res);
    return toRecord(tokens, record.refresh, record.account_id, now);
  } catch (err) {
    throw new CodexOAuthError(err instanceof oauth.ResponseBodyError && err.status >= 400 && err.status < 500 ? "refresh_rejected" : "refresh_failed");
  }
}

/**
 * The record a token answer makes. A broken or hostile issuer cannot make it store garbage: a token or account ID
 * that could not be sent as it is (controls, spaces, non-ASCII) refuses the whole answer (the caller's
 * `exchange_failed` / `refresh_failed`, the stored record untouched), and an expiry further than
 * `MAX_TOKEN_LIFETIME_MS` away (up to infinite) is cut to it, so the token is still refreshed in time.
 */
function toRecord(t: oauth.TokenEndpointResponse, prevRefresh: string | null, prevAccount: string | null, now: number): OAuthRecord {
  const refresh = typeof t.refresh_token === "string" && t.refresh_token !== "" ? t.refresh_token : prevRefresh;
  if (!HEADER_SAFE.test(t.access_token) || (refresh !== null && !HEADER_SAFE.test(refresh))) throw new Error("unusable token");
  const idClaims = oauth.getValidatedIdTokenClaims(t);
  const accessClaims = decodeJwtPayload(t.access_token);
  const account = accountIdOf(idClaims) ?? accountIdOf(accessClaims) ?? prevAccount;
  let expiresAt: number;
  if (typeof t.expires_in === "number" && t.expires_in > 0) expiresAt = now + t.expires_in * 1000;
  else if (typeof accessClaims?.["exp"] === "number") expiresAt = accessClaims["exp"] * 1000;
  else expiresAt = now + 3600_000;
  if (account !== null && !HEADER_SAFE.test(account)) throw new Error("unusable account id");
  return {
    type: "oauth",
    access: t.access_token,
    refresh,
    expires_at: Math.max(0, Math.floor(Math.min(expiresAt, now + MAX_TOKEN_LIFETIME_MS))),
    account_id: account,
  };
}

function accountIdOf(claims: Record<string, unknown> | undefined | null): string | null {
  const auth = claims?.["https://api.openai.com/auth"];
  if (typeof auth !== "object" || auth === null) return null;
  const id = (auth as Record<string, unknown>)["chatgpt_account_id"];
  return typeof id === "string" && id !== "" ? id : null;
}

function decodeJwtPayload(token: string): Record<string, unknown> | null {
  const part = token.split(".")[1];
  if (part === undefined) return null;
  try {
    const v = JSON.parse(Buffer.from(part, "base64url").toString("utf8")) as unknown;
    return typeof v === "object" && v !== null ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
