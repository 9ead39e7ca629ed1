/**
 * Bounded HTTP inspection: `/status`, `/sessions` and `/providers` bodies under one shared,
 * non-queued permit. Contracts:
 *  - contention answers 503 `{"error":"inspection_busy","retryable":true}` at once (no waiter);
 *  - a poisoned host state or a failed collection answers `inspection_unavailable`, and copied
 *    metadata or an encoding over the wire limit answers `inspection_limit` (both
 *    `retryable:false`); a partial list or a partly healthy status is never returned;
 *  - the permit is held through collection, sorting and encoding, and released before the
 *    response is written.
 */
import type { ServerResponse } from "node:http";
import { sessionStatus } from "./projection.js";
import type { Json } from "./model.js";
import type { HostState } from "./state.js";

/** At most this many provider entries per `/providers` answer (`complete:false` beyond it). */
export const PROVIDERS_BOUND = 1024;

class LimitExceeded extends Error {}

/** Counts copied metadata bytes (UTF-8) against the limit while a body is collected. */
export class Budget {
  private used = 0;
  constructor(readonly limit: number) {}
  /** Returns `s` after charging its UTF-8 length; throws when the budget is exceeded. */
  copy(s: string): string {
    this.used += Buffer.byteLength(s);
    if (this.used > this.limit) throw new LimitExceeded("copied metadata exceeds the limit");
    return s;
  }
}

/**
 * One JSON answer of the daemon's HTTP listener (inspection routes and host.ts's own): never cached, and `nosniff`
 * so a browser never reads a body that echoes request text as anything but JSON.
 */
export function json(res: ServerResponse, code: number, body: unknown): void {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  res.writeHead(code, { "content-type": "application/json", "cache-control": "no-store", "x-content-type-options": "nosniff" });
  res.end(text);
}

/**
 * `/status` persistence diagnostics (spec "Ingress concurrency boundary"): aggregate only, never a
 * session URI or content. This store has no whole-host save: every write is a checkpoint row
 * committed in one SQLite transaction per event-loop turn, so `activeFullSave` is the commit under
 * way (stage `commit`), `pendingCheckpoints` the writes queued for the next commit, and
 * `activeCheckpoints` the writes inside the commit under way. (`persistence: null` would mean
 * persistence is disabled; this host always persists.)
 */
export function persistenceDiagnostics(st: HostState): Json {
  const d = st.store.diagnostics();
  return {
    engine: "sqlite",
    activeFullSave: d.activeCommit ? { stage: "commit", ageMs: d.activeCommit.ageMs, rootBytes: null } : null,
    pendingCheckpoints: d.pendingWrites,
    activeCheckpoints: d.activeCommit ? d.activeCommit.writes : 0,
  };
}

export class Inspector {
  private permit = false;

  constructor(
    private readonly state: HostState,
    /** Maximum bytes of copied metadata and of the encoded body. */
    readonly limit: number,
    /** Test hook: hold the permit this long (ms) before collecting, to exercise contention. */
    private readonly holdMs = 0,
  ) {}

  /** Answer one inspection request with the body `build` collects. */
  inspect(res: ServerResponse, build: (budget: Budget) => unknown): void {
    if (this.permit) return json(res, 503, { error: "inspection_busy", retryable: true });
    this.permit = true;
    const finish = () => {
      let code = 200;
      let body: unknown;
      try {
        if (this.state.poisoned !== undefined) throw new Error("host state is unavailable");
        const collected = build(new Budget(this.limit));
        const text = JSON.stringify(collected);
        if (Buffer.byteLength(text) > this.limit) throw new LimitExceeded("encoded body exceeds the limit");
        body = text;
      } catch (e) {
        code = 503;
        body = e instanceof LimitExceeded ? { error: "inspection_limit", retryable: false } : { error: "inspection_unavailable", retryable: false };
      } finally {
        this.permit = false;
      }
      json(res, code, body);
    };
    if (this.holdMs > 0) setTimeout(finish, this.holdMs);
    else finish();
  }

  /** Aggregate health without identities or content. */
  status(startedAt: number, backendConnections: number): unknown {
    const st = this.state;
    let connected = 0;
    for (const s of st.sessions.values()) if (s.route) connected++;
    return {
      ok: true,
      uptimeMs: Date.now() - startedAt,
      sessions: st.sessions.size,
      connectedSessions: connected,
      backendConnections,
      providers: st.providers.size,
      pendingBackendCommands: st.pending.size,
      pendingCreations: st.creations.size,
      serverSeq: st.serverSeq,
      persistence: persistenceDiagnostics(st),
      observedAt: new Date().toISOString(),
    };
  }

  /** Every session, sorted by ID. */
  sessions(budget: Budget): unknown {
    const st = this.state;
    const items = [...st.sessions.values()].map((s) => ({
      id: budget.copy(s.uri),
      provider: budget.copy(s.provider),
      title: budget.copy(s.title),
      lifecycle: s.lifecycle,
      status: sessionStatus(st, s),
      connected: s.route !== undefined,
      createdAt: s.createdAt,
      modifiedAt: s.modifiedAt,
    }));
    items.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return { sessions: items, observedAt: new Date().toISOString() };
  }

  /**
   * Live provider routes (all, or the one named by `provider`), sorted by provider ID: current
   * connection and source IDs, protocol version, readiness and its receipt age (monotonic).
   * A provider without a live route is reported `connected:false` with no readiness; a
   * missing receipt (`ready:null`) is not proof of readiness.
   */
  providers(budget: Budget, only: string | null): unknown {
    const st = this.state;
    const now = performance.now();
    const ids = only !== null ? [only] : [...st.providers.keys()].sort();
    const out: Json[] = [];
    for (const id of ids.slice(0, PROVIDERS_BOUND)) {
      const r = st.providers.get(id);
      if (!r) {
        out.push({ provider: budget.copy(id.slice(0, 512)), connected: false, ready: null, readyAgeMs: null });
        continue;
      }
      const e: Json = {
        provider: budget.copy(id),
        connected: true,
        connectionId: r.connectionId,
        instanceId: budget.copy(r.instanceId),
        protocolVersion: r.version,
        ready: r.ready,
        readyAgeMs: r.readyAt === null ? null : Math.max(0, Math.round(now - r.readyAt)),
      };
      if (r.source) e.source = { serviceId: budget.copy(r.source.serviceId), instanceId: budget.copy(r.source.instanceId) };
      out.push(e);
    }
    return { providers: out, complete: ids.length <= PROVIDERS_BOUND, observedAt: new Date().toISOString() };
  }
}
