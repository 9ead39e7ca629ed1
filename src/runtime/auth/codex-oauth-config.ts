/**
 * The Codex OAuth parameters and error type, apart from the token-endpoint calls (codex-oauth.ts), so a turn that
 * only reads a stored token never loads `oauth4webapi`. See codex-oauth.ts for the contract.
 */
import type { EnvLike } from "../../store/home.js";
import type { FetchFn } from "./http.js";

export const CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann";
export const CODEX_SCOPES = "openid profile email offline_access";
export const DEFAULT_OPENAI_AUTH_ISSUER = "https://auth.openai.com";
export const CODEX_CALLBACK_PATH = "/auth/callback";
export const CODEX_DEFAULT_PORT = 1455;

export interface CodexOAuthConfig {
  /** Issuer base URL, e.g. `https://auth.openai.com` (no trailing slash needed). */
  issuer: string;
  clientId: string;
  /** Network bound for one token-endpoint request. */
  timeoutMs: number;
  fetch?: FetchFn;
}

export function codexOAuthConfigFromEnv(env: EnvLike): CodexOAuthConfig {
  const issuer = env["BERTH_OPENAI_AUTH_ISSUER"];
  return { issuer: issuer !== undefined && issuer !== "" ? issuer : DEFAULT_OPENAI_AUTH_ISSUER, clientId: CODEX_CLIENT_ID, timeoutMs: 30_000 };
}

export class CodexOAuthError extends Error {
  constructor(readonly reason: "callback_invalid" | "exchange_failed" | "refresh_rejected" | "refresh_failed") {
    super(`codex oauth ${reason}`);
    this.name = "CodexOAuthError";
  }
}
