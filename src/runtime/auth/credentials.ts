/**
 * Credential sources for turns and discovery. Each call re-reads the environment and the shared
 * store, so rotated keys, logouts and refreshes are picked up per request.
 *
 * Contracts:
 * - A missing credential throws `CredentialUnavailableError` (never a value-bearing message);
 *   `null` means no-auth mode only (custom provider with `auth: "none"`).
 * - Anthropic: a nonempty `ANTHROPIC_API_KEY` wins, else the stored API key (`api_key`).
 * - Custom: the configured `api_key_env` variable (`api_key`), or `null` for `auth: "none"`.
 * - openai-codex: the stored OAuth access token (`bearer`, with `accountId`), refreshed internally
 *   `refreshMarginMs` before expiry by `CodexTokenRefresher`; never through a client route.
 */
import {
  ANTHROPIC_PROVIDER_ID,
  CODEX_PROVIDER_ID,
  type AuthStore,
  type OAuthRecord,
} from "../../store/auth/auth-store.js";
import { looksLikeKey } from "../../core/text-policy.js";
import type { EnvLike } from "../../store/home.js";
import type { ProviderDef } from "../../store/settings/schema.js";
import type { CredentialSource } from "../types.js";
import { CodexOAuthError, type CodexOAuthConfig } from "./codex-oauth-config.js";
import type { CodexEndpoints } from "./codex-oauth.js";

export class CredentialUnavailableError extends Error {
  /** `missingEnv`: the unset variable a custom provider reads its key from (a name from settings, never a value). */
  constructor(readonly missingEnv?: string) {
    super("provider credential unavailable");
    this.name = "CredentialUnavailableError";
  }
}

export function anthropicCredentialSource(env: EnvLike, store: AuthStore): CredentialSource {
  return async () => {
    const fromEnv = env["ANTHROPIC_API_KEY"];
    if (fromEnv !== undefined && fromEnv !== "") return { kind: "api_key", value: fromEnv };
    const snap = await store.read();
    if (snap.anthropic === null) throw new CredentialUnavailableError();
    return { kind: "api_key", value: snap.anthropic.key };
  };
}

export function customCredentialSource(def: ProviderDef, env: EnvLike): CredentialSource {
  return () => {
    if (def.auth === "none") return Promise.resolve(null);
    const value = def.api_key_env === undefined ? undefined : env[def.api_key_env];
    // The variable is named in the failure unless the "name" looks like a key itself (pasted into api_key_env).
    const shown = def.api_key_env !== undefined && !looksLikeKey(def.api_key_env) ? def.api_key_env : undefined;
    if (value === undefined || value === "") return Promise.reject(new CredentialUnavailableError(shown));
    return Promise.resolve({ kind: "api_key", value });
  };
}

export interface CodexTokenRefresherOptions {
  store: AuthStore;
  oauth: CodexOAuthConfig;
  now?: () => number;
  /** Refresh when the access token expires within this window (default 5 min). */
  refreshMarginMs?: number;
}

/**
 * Keeps the stored Codex access token usable. One refresh in flight per instance; across
 * processes the generation check decides: a refresh commits only against the generation it read,
 * and on `auth_changed` (another process refreshed, logged in or out) the current store wins.
 * A refresh rejected by the issuer clears the stored refresh token (same generation check), so
 * readiness turns to `needs_login` once the access token expires.
 */
export class CodexTokenRefresher {
  /** Token-endpoint calls load `oauth4webapi`, so they are imported on the first refresh only. */
  private ep: Promise<{ ep: CodexEndpoints; refreshRecord: typeof import("./codex-oauth.js").refreshRecord }> | null = null;
  private readonly now: () => number;
  private readonly margin: number;
  private inflight: Promise<OAuthRecord> | null = null;

  constructor(private readonly opts: CodexTokenRefresherOptions) {
    new URL(opts.oauth.issuer); // an invalid issuer fails here, as it did when the endpoints were built eagerly
    this.now = opts.now ?? Date.now;
    this.margin = opts.refreshMarginMs ?? 5 * 60_000;
  }

  /** A currently valid record, refreshing if needed. Throws `CredentialUnavailableError`. */
  async current(): Promise<OAuthRecord> {
    const snap = await this.opts.store.read();
    const rec = snap.codex;
    if (rec === null) throw new CredentialUnavailableError();
    if (rec.expires_at - this.now() > this.margin) return rec;
    if (this.inflight === null) {
      this.inflight = this.refresh(snap.generation(CODEX_PROVIDER_ID), rec).finally(() => {
        this.inflight = null;
      });
    }
    return this.inflight;
  }

  private async refresh(generation: number, rec: OAuthRecord): Promise<OAuthRecord> {
    let next: OAuthRecord;
    try {
      this.ep ??= import("./codex-oauth.js").then((m) => ({ ep: m.codexEndpoints(this.opts.oauth), refreshRecord: m.refreshRecord }));
      const { ep, refreshRecord } = await this.ep;
      next = await refreshRecord(ep, rec, this.now());
    } catch (err) {
      if (err instanceof CodexOAuthError && err.reason === "refresh_rejected" && rec.refresh !== null) {
        await this.opts.store.commitOAuth(CODEX_PROVIDER_ID, generation, { ...rec, refresh: null }).catch(() => undefined);
      }
      return this.fallback(rec);
    }
    const outcome = await this.opts.store.commitOAuth(CODEX_PROVIDER_ID, generation, next);
    if (outcome === "committed") return next;
    return this.fallback(rec);
  }

  /** After a failed or lost refresh: whatever the store now holds, if still usable. */
  private async fallback(used: OAuthRecord): Promise<OAuthRecord> {
    const now = (await this.opts.store.read()).codex;
    if (now !== null && now.access !== used.access && now.expires_at > this.now()) return now;
    if (used.expires_at > this.now() && now !== null && now.access === used.access) return used;
    throw new CredentialUnavailableError();
  }
}

export function codexCredentialSource(refresher: CodexTokenRefresher): CredentialSource {
  return async () => {
    const rec = await refresher.current();
    return rec.account_id === null ? { kind: "bearer", value: rec.access } : { kind: "bearer", value: rec.access, accountId: rec.account_id };
  };
}

export { ANTHROPIC_PROVIDER_ID, CODEX_PROVIDER_ID };
