/**
 * The providers an agent built for its turns, by everything they were built from: a turn reuses the provider of an
 * unchanged definition, base URL and credential source (warmed again, so its connection is open or opening when the
 * request is made: at the turn's start, or after the previous turn as below), and a changed settings file,
 * environment or selection builds a new one at the next turn. A few entries, the oldest dropped first.
 *
 * After a turn (`warmAfterTurn`), the provider it used opens its next connection at the next event-loop check (the
 * turn's terminal event is emitted before it; a door that flushes its frames at a later check writes it right after
 * the connect's event-loop work; node-fetch.ts waits for the last connection to be released or closed), unless
 * another turn took a provider meanwhile (two checks later lost that race to clients that answer the terminal frame
 * at once: docs/scv.md, tenth wave). A server that closes
 * each connection after its answer then costs the next turn no `connect` on its critical path (a no-op while a
 * kept-alive connection idles in the pool, and for https: providers; node-fetch.ts `preconnect`). The next turn that
 * takes that same provider within `REWARM_MS` of that warm-up does not warm it again (its connection is open or
 * opening, or it was kept alive in the pool); later, or for another provider, `get` warms as before.
 */
import type { OpenedProvider } from "./providers/make.js";

/** How many built providers an agent keeps for reuse. */
export const MAX_BUILT_PROVIDERS = 8;

/** How long after a turn's warm-up the next turn skips its own (below node-fetch.ts `SPARE_MS`, a spare's life). */
export const REWARM_MS = 5000;

export class ProviderCache {
  private readonly built = new Map<string, OpenedProvider>();
  /** Counts `get` calls: a warm-up scheduled after a turn is skipped when another turn took a provider since. */
  private gets = 0;
  /** The provider `warmAfterTurn` last warmed, and when (`clock`). */
  private warmed: { provider: OpenedProvider; at: number } | null = null;

  constructor(private readonly clock: () => number = Date.now) {}

  /** The provider built for `key` (warmed), or the one `build` makes, kept under `key`. */
  async get(key: string, build: () => Promise<OpenedProvider>): Promise<OpenedProvider> {
    this.gets++;
    const cached = this.built.get(key);
    if (cached !== undefined) {
      const w = this.warmed;
      this.warmed = null;
      if (w === null || w.provider !== cached || this.clock() - w.at >= REWARM_MS) cached.warm();
      return cached;
    }
    const p = await build();
    if (this.built.size >= MAX_BUILT_PROVIDERS) this.built.delete(this.built.keys().next().value as string);
    this.built.set(key, p);
    return p;
  }

  /** Opens `p`'s next connection at the next event-loop check (see the module contract). */
  warmAfterTurn(p: OpenedProvider): void {
    const at = this.gets;
    setImmediate(() => {
      if (this.gets !== at) return;
      p.warm();
      this.warmed = { provider: p, at: this.clock() };
    });
  }
}
