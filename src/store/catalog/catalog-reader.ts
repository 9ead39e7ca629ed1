/**
 * Cache-only catalog queries behind `catalog.providers` and `catalog.models`: no discovery,
 * no credential use, settings reloaded on every call. Paging is `page()` from cache.ts.
 * Throws `SettingsError` when settings are unreadable (adapter: `configuration_unavailable`).
 */
import type { EnvLike } from "../home.js";
import type { SettingsStore } from "../settings/settings-store.js";
import { toWireModel, type CatalogCache, type CatalogState, type WireModel } from "./cache.js";
import { findProvider, listProviders, providerFingerprint } from "./providers.js";

export interface ProviderListEntry {
  provider_id: string;
  label: string;
}

export class CatalogReader {
  constructor(private readonly opts: { settings: SettingsStore; cache: CatalogCache; env: EnvLike }) {}

  /** Built-ins plus configured custom providers, sorted by ID, deduplicated. */
  async providers(): Promise<ProviderListEntry[]> {
    const layers = await this.opts.settings.load();
    return listProviders(layers.global).map((p) => ({ provider_id: p.id, label: p.label }));
  }

  /** The provider's cached models with their state; `null` when the provider is unknown. */
  async models(providerId: string): Promise<{ state: CatalogState; entries: WireModel[] } | null> {
    const layers = await this.opts.settings.load();
    const entry = findProvider(layers.global, providerId);
    if (entry === undefined) return null;
    const view = await this.opts.cache.read(providerId, providerFingerprint(entry, this.opts.env));
    return { state: view.state, entries: view.models.map((m) => toWireModel(providerId, view.state, m)) };
  }
}
