/**
 * The state of one `berth acp` connection: the session hub (one runtime per open session, shared agent), the
 * sessions open on this connection, and the stores the families read.
 *
 * Contracts:
 * - A session is open on this connection after `session/new`, `session/load` or `session/resume`; requests naming
 *   any other session are `-32002`. `ready` gives a request the session it names once every load or resume of that
 *   session read before the request (`order`, in stdin's order) has been answered: at once when none is pending;
 *   after them, `-32002` naming the failure of the one answered last when the session is not open.
 * - `session/cancel` acts as it is read (`order`): on the running or starting turn, and on a prompt read before it
 *   whose turn has not started yet, never on one read after it.
 * - `endOfInput` (the client's EOF, as it is read) cancels every running turn, and every prompt read before it;
 *   other requests run on. `shutdown` (after the EOF's answers, or a signal) cancels every running turn, waits for
 *   them, and stops the agent's tools; from either on, no turn waits for its text to be written (an editor may keep
 *   stdout open without reading).
 * - At most `MAX_OPEN_SESSIONS` sessions are open on this connection, those being opened counted: one more
 *   (`session/new`, or `session/load` / `session/resume` of a session not open here) is `-32600`, taken before
 *   anything is stored, so an editor that never closes sessions cannot make memory grow without bound.
 * - `claim` marks a session busy on this connection with a prompt turn or a `session/load` replay, checking and
 *   marking in one synchronous step: of two requests in one write, the second always sees the first's claim,
 *   whatever awaits the handlers make afterwards. `close` drops the session's prompt claim (it ends that turn).
 * - From the moment a `session/close` is read until it is answered, its session is closed for every other request
 *   (`get` is `-32002`, as once it is gone), even while the close still waits for an earlier lifecycle request of that
 *   session: a prompt or mode change sent after a close never runs on the session being closed.
 * - `serial` runs a session's lifecycle requests (`session/load`, `session/resume`, `session/close`) one after
 *   another in arrival order: one that arrives while an earlier one of the same session is still being handled
 *   starts once that one has been answered; with none pending it starts at once (no await before its first step).
 */
import { isAbsolute } from "node:path";
import { RequestError, type AgentContext } from "@agentclientprotocol/sdk";
import { wellFormed } from "../../core/text-policy.js";
import { statusProviderAuthReady } from "../../runtime/auth/readiness.js";
import { canonicalWorkspace } from "../../runtime/session/files.js";
import { SessionHub } from "../../runtime/session/index.js";
import type { AuthStore } from "../../store/auth/auth-store.js";
import { CatalogCache } from "../../store/catalog/cache.js";
import { CatalogReader } from "../../store/catalog/catalog-reader.js";
import { DEFAULT_WINDOW, SessionError, SessionManager, SessionStore, storageProblemOf, type History } from "../../store/sessions/index.js";
import { ConfigService } from "../../store/settings/config.js";
import type { McpServerDef } from "../../store/settings/schema.js";
import { SettingsStore } from "../../store/settings/settings-store.js";
import { onceLogger, sessionApprovalPolicy } from "../../store/settings/approval-policy.js";
import { approvalOf, modeOfPolicy, type ConfigSources, type ModeId } from "./config-options.js";
import type { AcpConnectionState, AcpDeps } from "./context.js";
import { ACP_ERRORS, MAX_OPEN_SESSIONS } from "./errors.js";
import { errorLabel } from "./handle.js";
import { ReadOrder } from "./read-order.js";
import { AcpSession } from "./session.js";
import { Unawaited } from "./unawaited.js";

/** What a session is busy with on this connection. */
export type SessionActivity = "prompt" | "load";

export class AcpConnection {
  readonly store: SessionStore;
  readonly sources: ConfigSources;
  private readonly settings: SettingsStore;
  readonly hub: SessionHub;
  private readonly sessions = new Map<string, AcpSession>();
  private readonly claims = new Map<string, { what: SessionActivity }>();
  /** The end of the last lifecycle request queued per session (dropped once nothing is queued). */
  private readonly lifecycle = new Map<string, Promise<void>>();
  /** Sessions being opened (counted against `MAX_OPEN_SESSIONS` until they are in `sessions` or failed). */
  private opening = 0;
  /** Sessions with a `session/close` read and not yet answered, and how many. */
  private readonly closing = new Map<string, number>();
  /** Requests to the editor no turn waits for, bounded across the connection's sessions. */
  private readonly unawaited = new Unawaited();
  private ended = false;
  /** The opens and cancels in the order the editor sent them (the wire feeds it: `order.observe`). */
  readonly order = new ReadOrder(
    (id) => this.sessions.has(id),
    (id) => this.sessions.get(id)?.cancel(),
  );

  constructor(
    private readonly deps: AcpDeps,
    readonly state: AcpConnectionState,
    private readonly auth: AuthStore,
  ) {
    this.store = new SessionStore({ home: deps.home });
    this.settings = new SettingsStore({ home: deps.home, projectDir: deps.cwd, env: deps.env });
    const cache = new CatalogCache({ home: deps.home });
    this.sources = {
      config: new ConfigService({ settings: this.settings, cache, env: deps.env }),
      catalog: new CatalogReader({ settings: this.settings, cache, env: deps.env }),
      settings: this.settings,
    };
    this.hub = new SessionHub({
      manager: new SessionManager(this.store),
      runner: deps.runner,
      defaults: { cwd: deps.cwd, approval: approvalOf("ask") },
    });
  }

  /** One diagnostic line to stderr (safe to pass around unbound). */
  readonly log = (line: string): void => this.deps.log(line);
  /** Each approval-policy note once per process. */
  private readonly noteOnce = onceLogger((note) => this.deps.log(`berth acp: ${note}`));

  /**
   * `-32602` unless `cwd` is absolute, Unicode text and names an existing directory (a session there would fail
   * every tool call).
   * The path is kept as the editor gave it, not canonicalized: `session/list`'s `cwd` filter and replayed paths stay
   * its own.
   */
  async checkWorkspace(cwd: string): Promise<void> {
    if (!isAbsolute(cwd)) throw ACP_ERRORS.relativeCwd();
    // A lone surrogate names no path (the file system would read U+FFFD) and the store keeps only Unicode text: the
    // session could not be written, and the error would then blame the store.
    if (!wellFormed(cwd)) throw ACP_ERRORS.badCwd("cwd is not valid Unicode text (it holds a lone UTF-16 surrogate)");
    const r = await canonicalWorkspace(cwd);
    if (!r.ok) throw ACP_ERRORS.badCwd(r.message);
  }

  /** `-32000` unless the selected provider has credentials. */
  async requireAuth(): Promise<void> {
    let ready: boolean;
    try {
      ready = await statusProviderAuthReady(this.settings, this.auth, this.deps.env);
    } catch (e) {
      this.deps.log(`berth acp: cannot read settings or the auth store (${errorLabel(e)})`);
      throw ACP_ERRORS.internal();
    }
    if (!ready) throw ACP_ERRORS.authRequired();
  }

  /** The settings' MCP servers (global scope, where `mcp_servers` lives). */
  async settingsMcp(): Promise<Record<string, McpServerDef>> {
    try {
      return { ...((await this.settings.load()).global.mcp_servers ?? {}) };
    } catch {
      return {};
    }
  }

  /**
   * The session's durable history, its last turn settled when a process that died left it open (the runtime closes
   * it `failed`, as every door's open does: docs/sessions.md, "Crash and resume"); `-32002` when no such session is
   * stored. For `"load"`, a last turn another live Berth process is running, or one that cannot be settled now (no
   * writer lease left in this process), is `-32600`: a replay would show its answer unfinished as the conversation
   * so far. `"resume"` shows nothing, so it takes the session either way (its prompt is refused while the other
   * process holds it, and the prompt's own admission settles what is left open).
   */
  async readHistory(id: string, purpose: "load" | "resume"): Promise<History> {
    const bounds = { maxBytes: DEFAULT_WINDOW.maxBytes, maxRecords: DEFAULT_WINDOW.maxRecords };
    try {
      const r = await this.hub.manager.settledHistory(id, bounds).catch((e: unknown) => {
        // No writer lease left to settle with: a resume needs none (its prompt's admission settles the turn).
        if (e instanceof SessionError && e.code === "limit" && purpose === "resume") return { history: null, running: null };
        throw e;
      });
      if (r.running === "elsewhere" && purpose === "load") throw ACP_ERRORS.loadWhileRunningElsewhere();
      return r.history ?? (await this.store.readHistory(id, bounds));
    } catch (e) {
      if (e instanceof RequestError) throw e;
      if (e instanceof SessionError && (e.code === "invalid_id" || e.code === "unavailable")) throw ACP_ERRORS.sessionMissing(id);
      if (e instanceof SessionError && e.code === "limit") throw ACP_ERRORS.tooManyTurnsToLoad();
      const problem = storageProblemOf(e);
      this.deps.log(`berth acp: cannot read a session's history (${problem ?? errorLabel(e)})`);
      throw ACP_ERRORS.storage(problem);
    }
  }

  /** The mode a session in `cwd` starts in: settings' `approval_policy` (notes on what was ignored go to stderr once). */
  private async startMode(cwd: string): Promise<ModeId> {
    const r = await sessionApprovalPolicy({ home: this.deps.home, env: this.deps.env, launch: this.settings, launchDir: this.deps.cwd }, cwd);
    this.noteOnce(r.notes);
    return modeOfPolicy(r.policy);
  }

  /** Holds one of the `MAX_OPEN_SESSIONS` places until `run` settles (`-32600` when none is left). */
  private async withPlace<T>(run: () => Promise<T>): Promise<T> {
    if (this.sessions.size + this.opening >= MAX_OPEN_SESSIONS) throw ACP_ERRORS.tooManySessions();
    this.opening++;
    try {
      return await run();
    } finally {
      this.opening--;
    }
  }

  create(cwd: string, mcp: Record<string, McpServerDef> | undefined, client: AgentContext): Promise<AcpSession> {
    return this.withPlace(async () => {
      const mode = await this.startMode(cwd);
      let rt;
      try {
        rt = await this.hub.create({ cwd, approval: approvalOf(mode), ...(mcp !== undefined ? { mcpServers: mcp } : {}) });
      } catch (e) {
        const problem = storageProblemOf(e);
        this.deps.log(`berth acp: cannot create a session (${problem ?? errorLabel(e)})`);
        throw ACP_ERRORS.storage(problem);
      }
      const s = new AcpSession(rt, client, { mode, model: null, reasoning: null }, this.state.client, this.unawaited);
      this.sessions.set(s.id, s);
      return s;
    });
  }

  /** Opens (or reattaches, keeping its mode) a stored session on this connection. */
  async open(id: string, cwd: string, mcp: Record<string, McpServerDef> | undefined, client: AgentContext): Promise<AcpSession> {
    const have = this.sessions.get(id);
    if (have !== undefined) {
      have.configure({ cwd, ...(mcp !== undefined ? { mcpServers: mcp } : {}) });
      return have;
    }
    return this.withPlace(async () => {
      const mode = await this.startMode(cwd);
      const again = this.sessions.get(id); // opened meanwhile by a request pipelined behind this one
      if (again !== undefined) {
        again.configure({ cwd, ...(mcp !== undefined ? { mcpServers: mcp } : {}) });
        return again;
      }
      const rt = this.hub.open(id, { cwd, approval: approvalOf(mode), ...(mcp !== undefined ? { mcpServers: mcp } : {}) });
      const s = new AcpSession(rt, client, { mode, model: null, reasoning: null }, this.state.client, this.unawaited);
      this.sessions.set(id, s);
      return s;
    });
  }

  /** The session open on this connection and not being closed; `-32002` otherwise. */
  get(id: string): AcpSession {
    const s = this.sessions.get(id);
    if (s === undefined || this.closing.has(id)) throw ACP_ERRORS.unknownSession(id);
    return s;
  }

  /**
   * The session a request (JSON-RPC id `requestId`) names, once every `session/load` / `session/resume` of it read
   * before the request has been answered: at once (as `get`) when none was pending when it was read. After the wait,
   * `-32002` when the session is not open (or is being closed), naming the failure of the open answered last when it
   * failed. The wait is as long as those opens take, each bounded by its own bounds.
   */
  ready(id: string, requestId: unknown): AcpSession | Promise<AcpSession> {
    const mark = this.order.markOf(requestId);
    if (mark === undefined || mark.opens.length === 0 || this.closing.has(id)) return this.get(id);
    return ReadOrder.settled(mark.opens).then((last) => {
      const s = this.sessions.get(id);
      if (s !== undefined && !this.closing.has(id)) return s;
      if (last?.error != null) throw ACP_ERRORS.openFailed(id, last.method, last.error.message);
      throw ACP_ERRORS.unknownSession(id);
    });
  }

  /** Marks session `id` closed for other requests from a `session/close`'s arrival; call the result once answered. */
  closingFrom(id: string): () => void {
    this.closing.set(id, (this.closing.get(id) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = (this.closing.get(id) ?? 1) - 1;
      if (n === 0) this.closing.delete(id);
      else this.closing.set(id, n);
    };
  }

  find(id: string): AcpSession | undefined {
    return this.sessions.get(id);
  }

  /**
   * Marks session `id` busy with `what` unless it already is: returns the release (call it once done), or what the
   * session is busy with. Check and mark happen with no await between them.
   */
  claim(id: string, what: SessionActivity): { release: () => void } | { busy: SessionActivity } {
    const held = this.claims.get(id);
    if (held !== undefined) return { busy: held.what };
    const mine = { what };
    this.claims.set(id, mine);
    return {
      release: () => {
        if (this.claims.get(id) === mine) this.claims.delete(id);
      },
    };
  }

  /**
   * Runs `step` after every lifecycle request of session `id` that arrived before it was answered (at once when
   * there is none): a load and a close of one session never interleave, so the later one decides its state.
   */
  serial<T>(id: string, step: () => Promise<T>): Promise<T> {
    const before = this.lifecycle.get(id);
    const run = before === undefined ? step() : before.then(step);
    const done = run.then(
      () => undefined,
      () => undefined,
    );
    this.lifecycle.set(id, done);
    void done.then(() => {
      if (this.lifecycle.get(id) === done) this.lifecycle.delete(id);
    });
    return run;
  }

  /** Closes a session on this connection; false when it was not open here. */
  async close(id: string): Promise<boolean> {
    const s = this.sessions.get(id);
    if (s === undefined) return false;
    this.sessions.delete(id);
    // Its turn is cancelled and waited for below; a later session/load must not meet it. (A load's claim is never
    // held here: lifecycle requests of one session run one at a time.)
    if (this.claims.get(id)?.what === "prompt") this.claims.delete(id);
    this.order.forget(id);
    await this.hub.closeSession(id);
    s.close();
    return true;
  }

  /** Whether the client's input has ended (`endOfInput`): a prompt read before the end but started after it is cancelled. */
  get inputEnded(): boolean {
    return this.ended;
  }

  /**
   * The client's input has ended: every running turn is cancelled (as by `session/cancel`, also one still starting)
   * and no turn waits for its text to be written any more; every other request goes on to its answer.
   */
  endOfInput(): void {
    this.ended = true;
    for (const s of this.sessions.values()) {
      s.stopWaiting();
      s.cancel();
    }
  }

  async shutdown(): Promise<void> {
    // Running turns are cancelled below; none may wait on a write the editor will not read (it may hold stdout
    // open without reading it).
    for (const s of this.sessions.values()) s.stopWaiting();
    await this.hub.close();
    for (const s of this.sessions.values()) s.close();
    this.sessions.clear();
  }
}
