/**
 * Auth readiness for `auth.status` and `status.provider_auth_ready`.
 * Contract: reads the environment and the shared store only — never refreshes, never mutates,
 * never touches the network. Throws `AuthStorageError` on unreadable/malformed storage (adapter:
 * `internal_error`). Output carries no values, variable names, paths or account identifiers.
 *
 * Rules: openai-codex → oauth; record present and (unexpired access or a refresh token) = ready,
 * present but expired without refresh = needs_login, absent = missing. anthropic → api_key;
 * nonempty `ANTHROPIC_API_KEY` = environment/ready, else stored key = shared_store/ready, else
 * missing. Custom → `auth:"none"` = none/none/ready; `api_key_env` set and nonempty =
 * api_key/environment/ready, else api_key/none/missing. Unknown providers are not ready.
 */
import type { AuthSnapshot, AuthStore } from "../../store/auth/auth-store.js";
import { listProviders, type ProviderEntry } from "../../store/catalog/providers.js";
import type { EnvLike } from "../../store/home.js";
import type { Settings } from "../../store/settings/schema.js";
import { resolveSelection } from "../../store/settings/effective.js";
import type { SettingsStore } from "../../store/settings/settings-store.js";

export interface ProviderReadiness {
  provider_id: string;
  auth_method: "oauth" | "api_key" | "none";
  source: "shared_store" | "environment" | "none";
  readiness: "ready" | "missing" | "needs_login";
  ready: boolean;
}

function entryReadiness(entry: ProviderEntry, snap: AuthSnapshot, env: EnvLike, now: number): ProviderReadiness {
  const make = (auth_method: ProviderReadiness["auth_method"], source: ProviderReadiness["source"], readiness: ProviderReadiness["readiness"]): ProviderReadiness => ({
    provider_id: entry.id,
    auth_method,
    source,
    readiness,
    ready: readiness === "ready",
  });
  if (entry.builtin && entry.id === "openai-codex") {
    const rec = snap.codex;
    if (rec === null) return make("oauth", "none", "missing");
    return make("oauth", "shared_store", rec.expires_at > now || rec.refresh !== null ? "ready" : "needs_login");
  }
  if (entry.builtin) {
    const key = env["ANTHROPIC_API_KEY"];
    if (key !== undefined && key !== "") return make("api_key", "environment", "ready");
    return snap.anthropic !== null ? make("api_key", "shared_store", "ready") : make("api_key", "none", "missing");
  }
  if (entry.def.auth === "none") return make("none", "none", "ready");
  const v = entry.def.api_key_env === undefined ? undefined : env[entry.def.api_key_env];
  return v !== undefined && v !== "" ? make("api_key", "environment", "ready") : make("api_key", "none", "missing");
}

/**
 * Readiness of every provider in `providerSettings` (the startup definitions for `auth.status`),
 * sorted by provider ID.
 */
export async function authStatus(store: AuthStore, providerSettings: Settings, env: EnvLike, now: number = Date.now()): Promise<ProviderReadiness[]> {
  const snap = await store.read();
  return listProviders(providerSettings).map((e) => entryReadiness(e, snap, env, now));
}

/** `status.provider_auth_ready` for the effective provider (from reloaded settings). */
export async function providerAuthReady(
  store: AuthStore,
  currentSettings: Settings,
  env: EnvLike,
  effectiveProviderId: string,
  now: number = Date.now(),
): Promise<boolean> {
  const entry = listProviders(currentSettings).find((e) => e.id === effectiveProviderId);
  if (entry === undefined) return false;
  const snap = await store.read();
  return entryReadiness(entry, snap, env, now).ready;
}

/**
 * `status.provider_auth_ready` end to end: reloads settings, resolves the effective provider
 * (env > project > global > default) and checks it. Throws `SettingsError` / `AuthStorageError`
 * (adapter: `internal_error`). Never refreshes, never touches the network.
 */
export async function statusProviderAuthReady(settings: SettingsStore, store: AuthStore, env: EnvLike, now: number = Date.now()): Promise<boolean> {
  const layers = await settings.load();
  return providerAuthReady(store, layers.global, env, resolveSelection(layers).provider_id, now);
}
