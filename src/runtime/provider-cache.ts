/**
 * The providers an agent built for its turns, by everything they were built from: a turn reuses the provider of an
 * unchanged definition, base URL and credential source (warmed again: its connection still opens at the turn's
 * start), and a changed settings file, environment or selection builds a new one at the next turn. A few entries,
 * the oldest dropped first.
 */
import type { OpenedProvider } from "./providers/make.js";

/** How many built providers an agent keeps for reuse. */
export const MAX_BUILT_PROVIDERS = 8;

export class ProviderCache {
  private readonly built = new Map<string, OpenedProvider>();

  /** The provider built for `key` (warmed), or the one `build` makes, kept under `key`. */
  async get(key: string, build: () => Promise<OpenedProvider>): Promise<OpenedProvider> {
    const cached = this.built.get(key);
    if (cached !== undefined) {
      cached.warm();
      return cached;
    }
    const p = await build();
    if (this.built.size >= MAX_BUILT_PROVIDERS) this.built.delete(this.built.keys().next().value as string);
    this.built.set(key, p);
    return p;
  }
}
