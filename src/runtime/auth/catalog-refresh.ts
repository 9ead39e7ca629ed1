/**
 * `catalog.refresh`: discovery for one provider, then a cache replacement.
 *
 * Contracts:
 * - Only this performs discovery (network, credentials — including an internal Codex token
 *   refresh — and the cache write); it never changes settings or the selection.
 * - Built-ins: discovered models in provider order, metadata discovered > bundled table.
 * - Custom providers: their settings `models` are a static catalog listed first (their metadata
 *   wins, `disabled` kept), followed by discovered models not already listed. When discovery fails
 *   (or the credential is missing) and the static list is nonempty, the static list alone is
 *   written as a fresh cache: a local server without a models endpoint stays usable.
 * - Any other failure leaves the existing cache untouched (so a stale cache stays stale, a fresh
 *   one stays fresh) and answers `catalog_refresh_failed` without details. An empty discovery
 *   result is a failure too (it would make the cache `unavailable`).
 */
import type { AuthStore } from "../../store/auth/auth-store.js";
import { cleanModels, type CatalogCache, type CatalogModel, type CatalogState } from "../../store/catalog/cache.js";
import { fallbackMeta } from "../../store/catalog/fallback.js";
import { builtinBaseUrl, findProvider, providerFingerprint, type ProviderEntry } from "../../store/catalog/providers.js";
import type { EnvLike } from "../../store/home.js";
import type { SettingsStore } from "../../store/settings/settings-store.js";
import type { CredentialSource } from "../types.js";
import { anthropicCredentialSource, codexCredentialSource, customCredentialSource, type CodexTokenRefresher } from "./credentials.js";
import { discoverModels, type DiscoveredModel } from "./discovery.js";
import type { FetchFn } from "./http.js";

export type RefreshOutcome =
  | { ok: true; provider_id: string; state: CatalogState }
  | { ok: false; code: "catalog_refresh_failed" | "unknown_provider" | "configuration_unavailable" };

export interface CatalogRefresherOptions {
  settings: SettingsStore;
  cache: CatalogCache;
  store: AuthStore;
  codex: CodexTokenRefresher;
  env: EnvLike;
  timeoutMs?: number;
  fetch?: FetchFn;
}

export class CatalogRefresher {
  constructor(private readonly opts: CatalogRefresherOptions) {}

  async refresh(providerId: string): Promise<RefreshOutcome> {
    let entry: ProviderEntry | undefined;
    try {
      entry = findProvider((await this.opts.settings.load()).global, providerId);
    } catch {
      return { ok: false, code: "configuration_unavailable" };
    }
    if (entry === undefined) return { ok: false, code: "unknown_provider" };
    const fingerprint = providerFingerprint(entry, this.opts.env);
    let discovered: DiscoveredModel[] | null;
    try {
      discovered = await this.discover(entry);
    } catch {
      discovered = null;
    }
    const models = cleanModels(this.combine(entry, discovered ?? []));
    const staticOnly = !entry.builtin && entry.def.models.length > 0;
    if ((discovered === null && !staticOnly) || models.length === 0) return { ok: false, code: "catalog_refresh_failed" };
    try {
      await this.opts.cache.write(entry.id, fingerprint, models);
    } catch {
      return { ok: false, code: "catalog_refresh_failed" };
    }
    const view = await this.opts.cache.read(entry.id, fingerprint);
    return { ok: true, provider_id: entry.id, state: view.state };
  }

  private async discover(entry: ProviderEntry): Promise<DiscoveredModel[]> {
    const env = this.opts.env;
    const timeoutMs = this.opts.timeoutMs ?? 15_000;
    let source: CredentialSource;
    let api: "anthropic" | "openai" | "codex";
    let baseUrl: string;
    if (entry.builtin) {
      source = entry.id === "anthropic" ? anthropicCredentialSource(env, this.opts.store) : codexCredentialSource(this.opts.codex);
      api = entry.id === "anthropic" ? "anthropic" : "codex";
      baseUrl = builtinBaseUrl(entry.id, env);
    } else {
      source = customCredentialSource(entry.def, env);
      api = entry.def.api === "anthropic" ? "anthropic" : "openai";
      baseUrl = entry.def.base_url;
    }
    const credential = await source();
    return discoverModels({ api, baseUrl, credential, timeoutMs, ...(this.opts.fetch ? { fetch: this.opts.fetch } : {}) });
  }

  private combine(entry: ProviderEntry, discovered: DiscoveredModel[]): CatalogModel[] {
    const out: CatalogModel[] = [];
    const seen = new Set<string>();
    if (!entry.builtin) {
      for (const def of entry.def.models) {
        if (seen.has(def.id)) continue;
        seen.add(def.id);
        const disc = discovered.find((d) => d.id === def.id);
        const meta = fallbackMeta(entry.id, def.id, def);
        out.push({
          model_id: def.id,
          label: def.label ?? disc?.label ?? meta.label ?? def.id,
          context_window: def.context_window ?? disc?.context_window ?? meta.context_window,
          max_output_tokens: def.max_output_tokens ?? disc?.max_output_tokens ?? meta.max_output_tokens,
          available_thinking_levels: meta.levels,
          disabled: def.disabled === true,
        });
      }
    }
    for (const d of discovered) {
      if (seen.has(d.id)) continue;
      seen.add(d.id);
      const meta = fallbackMeta(entry.id, d.id);
      out.push({
        model_id: d.id,
        label: d.label ?? meta.label ?? d.id,
        context_window: d.context_window ?? meta.context_window,
        max_output_tokens: d.max_output_tokens ?? meta.max_output_tokens,
        available_thinking_levels: meta.levels,
        disabled: false,
      });
    }
    return out;
  }
}
