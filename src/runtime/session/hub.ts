/**
 * `SessionHub`: opens, creates and lists sessions for one door (one per process or per server), and owns the
 * agent they share. Contracts:
 * - `open(id, config)` returns the open `SessionRuntime` of that session (creating it, dormant: no lease is held
 *   until a turn runs); a second `open` returns the same runtime (its configuration unchanged).
 * - `create(config)` creates a durable session (its header records `cwd`) and opens it.
 * - `startTurn(null, …)` creates a session *as part of* admitting a turn (the turn holds the new session's
 *   lease), for doors whose first prompt creates the session (app-service `turn.start` without a session).
 * - `list` pages the store's sessions (every session any door made) with the title policy applied, marking the
 *   open ones.
 * - `subscribe` receives every event of every runtime this hub opened (each carries its `sessionId`).
 * - `close()` closes every runtime (cancelling running turns, waiting for them), then the agent.
 */
import { randomUUID } from "../../store/random.js";
import { titleFrom } from "../../core/text-policy.js";
import { isValidSessionId, type SessionManager, type TurnLease } from "../../store/sessions/index.js";
import { ListenerSet } from "./listeners.js";
import { SessionRuntime } from "./runtime.js";
import { admissionError, type SessionDeps, type StartResult, type TurnRunner } from "./deps.js";
import type { SessionConfig, SessionListener, SessionSummary, SubmitOptions } from "./types.js";
import { createQuestionTool } from "../tools/question.js";
import type { Tool } from "../types.js";

export interface SessionHubOptions {
  manager: SessionManager;
  runner: TurnRunner;
  /** Defaults for sessions opened without a configuration (cwd, approval mode, …). */
  defaults: SessionConfig;
  historyBounds?: SessionDeps["historyBounds"];
  historyPolicy?: SessionDeps["historyPolicy"];
  newId?: () => string;
}

export class SessionHub {
  private readonly runtimes = new Map<string, SessionRuntime>();
  private readonly listeners = new ListenerSet();
  private readonly deps: SessionDeps;

  constructor(private readonly o: SessionHubOptions) {
    this.deps = {
      manager: o.manager,
      runner: o.runner,
      newId: o.newId ?? randomUUID,
      ...(o.historyBounds !== undefined ? { historyBounds: o.historyBounds } : {}),
      ...(o.historyPolicy !== undefined ? { historyPolicy: o.historyPolicy } : {}),
    };
  }

  get manager(): SessionManager {
    return this.o.manager;
  }

  subscribe(listener: SessionListener): () => void {
    return this.listeners.add(listener);
  }

  /** The open runtime of a session, if any. */
  get(sessionId: string): SessionRuntime | undefined {
    return this.runtimes.get(sessionId);
  }

  /** Every open runtime. */
  all(): SessionRuntime[] {
    return [...this.runtimes.values()];
  }

  private adopt(sessionId: string, config: SessionConfig): SessionRuntime {
    const rt = new SessionRuntime(this.deps, sessionId, config);
    // Same contract as a runtime's own listeners: any `false` refuses a delta; every promise is awaited.
    rt.subscribe((e) => this.listeners.deliver(e));
    this.runtimes.set(sessionId, rt);
    rt.prepareTools(); // its MCP servers start now, off the first prompt's path
    return rt;
  }

  /** Opens a session by ID (no lease yet). The ID must be valid; existence is checked at the first turn. */
  open(sessionId: string, config?: Partial<SessionConfig>): SessionRuntime {
    const have = this.runtimes.get(sessionId);
    if (have !== undefined) return have;
    if (!isValidSessionId(sessionId)) throw new RangeError("invalid session id");
    return this.adopt(sessionId, { ...this.o.defaults, ...config });
  }

  /** Creates a durable session and opens it. */
  async create(config?: Partial<SessionConfig>): Promise<SessionRuntime> {
    const cfg = { ...this.o.defaults, ...config };
    const handle = await this.o.manager.store.create(cfg.cwd);
    await handle.release();
    return this.adopt(handle.id, cfg);
  }

  /**
   * Admits a turn on `sessionId`, or on a new session when null (created and leased by this turn). Refusals emit
   * nothing; see `SessionRuntime.startTurn`.
   */
  async startTurn(sessionId: string | null, prompt: string, opts: SubmitOptions = {}, config?: Partial<SessionConfig>): Promise<StartResult & { sessionId?: string }> {
    if (sessionId !== null) {
      const rt = this.open(sessionId, config);
      const r = await rt.startTurn(prompt, opts);
      return r.ok ? { ...r, sessionId } : r;
    }
    const cfg = { ...this.o.defaults, ...config };
    const ctl = new AbortController();
    let lease: TurnLease;
    try {
      lease = await this.o.manager.beginTurn({ sessionId: null, cwd: cfg.cwd, onCloseRequested: () => ctl.abort() });
    } catch (e) {
      return { ok: false, error: admissionError(e) };
    }
    const rt = this.runtimes.get(lease.sessionId) ?? this.adopt(lease.sessionId, cfg);
    return { ...rt.beginAdmitted(lease, ctl, prompt, opts), sessionId: lease.sessionId };
  }

  /**
   * Session-bound tools this hub's door can serve (for `Agent`'s `sessionTools`): the `question` tool, bound to
   * the open runtime of `sessionId` (none for a session this hub has not opened).
   */
  questionTools(s: { sessionId: string }): Tool[] {
    const rt = this.runtimes.get(s.sessionId);
    if (rt === undefined) return [];
    return [createQuestionTool((q, callId, signal) => rt.ask(q, callId, signal))];
  }

  /** The working directory recorded in a stored session's header (null when it cannot be read). */
  async cwdOf(sessionId: string): Promise<string | null> {
    try {
      const w = await this.o.manager.store.readWindow(sessionId, { maxBytes: 4096, maxRecords: 1, quantumBytes: 4096 });
      return w === "unchanged" ? null : w.header.cwd;
    } catch {
      return null;
    }
  }

  /** A page of the store's sessions (title policy applied), oldest ID first. */
  async list(after: string | null, limit: number): Promise<{ sessions: SessionSummary[]; nextAfter: string | null; truncated: boolean; incomplete: boolean }> {
    const page = await this.o.manager.store.list(after, limit);
    return {
      sessions: page.entries.map((e) => ({ sessionId: e.id, title: titleFrom(e.titleSource), createdAt: e.createdAt, cwd: e.cwd, updatedAtMs: e.updatedAtMs, open: this.runtimes.has(e.id) })),
      nextAfter: page.nextAfter,
      truncated: page.truncated,
      incomplete: page.incomplete,
    };
  }

  /** Closes one runtime (cancels its turn, drops its queue) and forgets it. */
  async closeSession(sessionId: string): Promise<void> {
    const rt = this.runtimes.get(sessionId);
    if (rt === undefined) return;
    this.runtimes.delete(sessionId);
    await rt.close();
  }

  /** Closes every runtime, then stops the agent's tools. Idempotent. */
  async close(): Promise<void> {
    const all = [...this.runtimes.values()];
    this.runtimes.clear();
    await Promise.all(all.map((r) => r.close()));
    await this.o.runner.close().catch(() => undefined);
  }
}
