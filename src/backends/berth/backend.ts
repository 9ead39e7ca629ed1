/**
 * Berth's own runtime as a live backend: provider `berth` on a version-11 provider connection, with every Berth
 * session multiplexed over it (v8 `register_session`). A client of the host (it speaks the host's backend wire
 * over its socket) and a thin projection of the session runtime (`runtime/session`).
 *
 * Contracts:
 *  - `create_session` creates a durable Berth session (and records it in the registry) before it is accepted;
 *    the session is then registered with the exact `requestedSession` and one-time `creationToken`, which the
 *    host checks (→ `session/ready`). The token is kept, owner-only, only until that claim succeeds.
 *  - Known sessions are re-registered (dormant) after every (re)connection: the registry's, and every session of
 *    the Berth store (made by `berth chat`, the app-service, …), so each is visible to AHP clients. The host maps
 *    their stable `sourceId` (`berth:<session id>`) back to the same AHP session.
 *  - Commands: `prompt` (admitted once the session's writer lease is held), `abort`, `confirm_tool` (answers the
 *    runtime's pending approval), `follow_up` (queued in the session runtime; its `user_message` names the
 *    pending-message `id`), `steer` (injected at the running turn's next step boundary; its `user_message` names
 *    the pending-message `id`), `configure` (model / reasoning level of every chat of the session: now when idle,
 *    else from the next turn; durable in the registry), `complete_input` (answers a `question`), and the v3 chat
 *    commands (see `chats.ts`). Each `commandId` is executed at most once; a repeated ID gets the same result.
 *  - Every chat of a session is a Berth session of its own (the primary chat is the session's own); see
 *    docs/host.md "Berth's runtime as a backend".
 *  - Events are `sequenced_event`s per logical registration, starting at 1; an admitted prompt's events follow
 *    its `command_result`.
 *  - History resync after each registration: see `resync.ts`.
 *  - An event refusal re-registers its session only when it names the current registration (see `fences.ts`),
 *    and a session never has two registrations in flight; a registration answered after its session was disposed
 *    never revives it (see `registrations.ts`).
 *  - `dispose_session` / `dispose_chat` are accepted only once the registry marks the session / chat disposed and
 *    its turns stopped (bounded); a failed registry write refuses it and it stays served (see `disposal.ts`).
 *  - Losing the host connection cancels running turns (their events have nowhere to go) and reconnects with
 *    bounded exponential backoff; `close()` cancels and waits for running turns.
 */
import { randomUUID } from "node:crypto";
import { SingleFlight } from "../../core/single-flight.js";
import { SessionHub, type ApprovalMode, type SessionRuntime, type TurnRunner } from "../../runtime/session/index.js";
import { SessionError, type SessionManager } from "../../store/sessions/index.js";
import { HostProjection } from "./projection.js";
import { localDirectoryFromUri } from "../../store/host/working-dir.js";
import { selectionOf } from "./parse.js";
import { ChatCommands, withSelection, type Lane } from "./chats.js";
import { SessionCommands } from "./commands.js";
import { HostLink } from "./link.js";
import { lanesOf, liveSession, SessionTable, type LiveSession } from "./sessions.js";
import { HistoryResync } from "./resync.js";
import { refusalIgnored } from "./fences.js";
import { Registrations } from "./registrations.js";
import { Disposals, DISPOSE_WAIT_MS } from "./disposal.js";

import type { Json } from "../../core/json-bounds.js";

export const PROVIDER_ID = "berth";
const PROTOCOL_VERSION = 11;
const MAX_REMEMBERED_RESULTS = 4096;
/** Turns in one history page (`hello.history`, `turns_loaded`). */
export const HISTORY_PAGE_TURNS = 20;

export interface BerthRuntimeOptions {
  socketPath: string;
  manager: SessionManager;
  runner: TurnRunner;
  /** Working directory for sessions created without one. */
  cwd: string;
  /** The adapter registry (AHP-created sessions), owner-only; lives in the host state directory. */
  registryPath: string;
  log: (msg: string) => void;
  /** Which tool calls need the AHP client's confirmation (default `on-risk`: every tool that is not read-only). */
  approval?: ApprovalMode;
  /**
   * The policy for a session working in a directory (settings' `approval_policy`), read as each prompt is admitted so
   * a settings change applies from the next turn on; overrides `approval`. Must not reject.
   */
  approvalPolicy?: (cwd: string) => Promise<ApprovalMode>;
  /** Turns per history page (default `HISTORY_PAGE_TURNS`). */
  historyPage?: number;
  /** Bytes of a session file one `fetch_turns` page reads at most (default: the 64 MiB transcript window). */
  historyWindowBytes?: number;
  /** How long an accepted `dispose_session` / `dispose_chat` waits for its turns to stop (default `DISPOSE_WAIT_MS`). */
  disposeWaitMs?: number;
}

export type { LiveSession } from "./sessions.js";

const sourceOf = (sessionId: string) => `berth:${sessionId}`;

/**
 * Why a prompt was not admitted. `busy` with no turn of this runtime running is another process's turn (another
 * door, `berth chat`, an editor): it holds the session's writer lease.
 */
function refusal(error: string, runningHere: boolean): string {
  if (error === "busy")
    return runningHere ? "a turn is already running" : "another Berth process is running a turn in this session (it holds the session's writer lease); wait for it to end, or stop it there, and send this prompt again";
  return error === "history_incomplete" ? "session unavailable" : `session ${error}`;
}

export class BerthRuntimeBackend {
  readonly instanceId = randomUUID();
  private readonly link: HostLink;
  private closed = false;
  private readonly table: SessionTable;
  private readonly registrations: Registrations;
  private readonly disposals: Disposals;
  private readonly results = new Map<string, { accepted: boolean; error?: string }>();
  private readonly inflight = new Set<string>();
  readonly hub: SessionHub;
  private readonly chatCmds: ChatCommands;
  private readonly cmds: SessionCommands;
  private readyResolve!: () => void;
  /** Resolves once the provider is registered with the host for the first time. */
  readonly ready = new Promise<void>((r) => (this.readyResolve = r));
  private discovery: Promise<void> = Promise.resolve();
  /** `approvalPolicy` reads in flight, by directory: admissions arriving meanwhile share one (and keep their order). */
  private readonly policyReads = new SingleFlight<string, ApprovalMode>();
  private readonly resync: HistoryResync;

  constructor(private readonly o: BerthRuntimeOptions) {
    this.table = new SessionTable(o.registryPath);
    this.hub = new SessionHub({ manager: o.manager, runner: o.runner, defaults: { cwd: o.cwd, approval: o.approval ?? "on-risk" } });
    this.chatCmds = new ChatCommands({
      manager: o.manager,
      hub: this.hub,
      page: o.historyPage ?? HISTORY_PAGE_TURNS,
      ...(o.historyWindowBytes !== undefined ? { windowBytes: o.historyWindowBytes } : {}),
      emit: (s, lane, ev) => this.emit(s, lane, ev),
      runtimeOf: (s, lane) => this.runtimeOf(s, lane),
      save: () => this.saveRegistry(),
      registryPath: o.registryPath,
      answer: (id, ok, err) => this.answer(id, ok, err),
      admitTurn: (s, lane, text, turnId, reply) => this.admitTurn(s, lane, text, turnId, undefined, reply),
    });
    this.cmds = new SessionCommands({
      chats: this.chatCmds,
      disposeChat: (id, s, cmd) => this.disposals.chat(id, s, cmd),
      answer: (id, ok, err) => this.answer(id, ok, err),
      emit: (s, lane, ev) => this.emit(s, lane, ev),
      runtimeOf: (s, lane) => this.runtimeOf(s, lane),
      save: () => this.saveRegistry(),
      registryPath: o.registryPath,
      admitTurn: (s, lane, text, turnId, pendingId, reply) => this.admitTurn(s, lane, text, turnId, pendingId, reply),
    });
    this.resync = new HistoryResync({ manager: o.manager, emit: (s, lane, ev) => this.emit(s, lane, ev), sourceOf });
    this.registrations = new Registrations({
      base: {
        protocolVersion: PROTOCOL_VERSION,
        instanceId: this.instanceId,
        provider: PROVIDER_ID,
        displayName: "Berth",
        toolCapabilities: { confirmations: true },
        inputCapabilities: { questionKinds: ["single_select", "text"], freeform: true, maxQuestions: 1, maxOptions: 16 },
        chatCapabilities: { create: true, dispose: true, fork: true, sideChat: true, pagedHistory: true },
      },
      sourceOf,
      newestPage: (s) => this.chatCmds.newestPage(s.primary),
      send: (f) => this.send(f),
      connected: () => this.link.connected,
      log: o.log,
    });
    this.disposals = new Disposals({
      table: this.table,
      registrations: this.registrations,
      hub: this.hub,
      registryPath: o.registryPath,
      waitMs: o.disposeWaitMs ?? DISPOSE_WAIT_MS,
      answer: (id, ok, err) => this.answer(id, ok, err),
      log: o.log,
    });
    this.link = new HostLink(o.socketPath, {
      onOpen: () => this.hello(),
      onFrame: (f) => this.onFrame(f),
      onClose: () => this.onClose(),
      log: o.log,
    });
  }

  /** Session-bound tools for the agent (`Agent`'s `sessionTools`): the `question` tool of open sessions. */
  sessionTools(s: { sessionId: string }): ReturnType<SessionHub["questionTools"]> {
    return this.hub.questionTools(s);
  }

  start(): void {
    this.link.start();
  }

  // ── Registry ──────────────────────────────────────────────────────────────
  /** Durably rewrite the registry (serialized; resolves once this version is on disk). */
  private saveRegistry(): Promise<void> {
    return this.table.save();
  }

  /** A store session's working directory, from its header (the daemon's when unreadable). */
  private async resolveCwd(s: LiveSession): Promise<void> {
    if (s.entry.cwd !== "") return;
    s.entry.cwd = (await this.hub.cwdOf(s.entry.sessionId)) ?? this.o.cwd;
  }

  /** A chat's runtime, opened (and projected) on first use; `resolveCwd` first for store sessions. */
  private runtimeOf(s: LiveSession, lane: Lane): SessionRuntime {
    if (lane.rt !== undefined) return lane.rt;
    if (s.entry.cwd === "") s.entry.cwd = this.o.cwd;
    const selection = selectionOf(s.entry.model, s.entry.thinkingLevel);
    const rt = this.hub.open(lane.sessionId, { cwd: s.entry.cwd, ...(selection !== undefined ? { selection } : {}) });
    const primary = lane === s.primary;
    const projection = new HostProjection(
      (ev) => this.emit(s, lane, ev),
      (title) => {
        if (!primary || s.entry.title !== "New Session") return false;
        s.entry.title = title;
        if (s.registered) void this.saveRegistry().catch(() => undefined);
        return true;
      },
    );
    rt.subscribe((e) => projection.on(e));
    lane.rt = rt;
    lane.projection = projection;
    return rt;
  }

  // ── Connection ────────────────────────────────────────────────────────────
  private hello(): void {
    this.send({
      type: "provider_hello",
      protocolVersion: PROTOCOL_VERSION,
      instanceId: this.instanceId,
      providers: [{ id: PROVIDER_ID, displayName: "Berth", description: "Berth's own agent runtime", multipleChats: { create: true, dispose: true, fork: true, sideChat: true, pagedHistory: true } }],
      source: { serviceId: "berth-runtime", instanceId: this.instanceId },
    });
  }

  private onClose(): void {
    for (const s of this.table.sessions.values()) {
      s.logicalId = undefined;
      for (const l of lanesOf(s)) l.rt?.cancel(); // the host that owns the turn's transcript is gone
    }
    this.registrations.clear();
  }

  private send(frame: Json): boolean {
    return this.link.send(frame);
  }

  /** Send one sequenced event for a chat; waits for drain when the socket is backed up. */
  private emit(s: LiveSession, lane: Lane, event: Json): void | Promise<void> {
    if (lane.disposed === true) return; // the host removed the chat, and would refuse the event (see `disposal.ts`)
    if (lane.held !== null) {
      lane.held.push(event);
      return;
    }
    if (!s.uri || !s.logicalId || !this.link.connected) return;
    s.seq++;
    const frame: Json = { type: "sequenced_event", session: s.uri, sequence: s.seq, backendConnectionId: s.logicalId, event };
    if (lane.chatUri !== undefined) frame.chat = lane.chatUri;
    return this.link.sendOrWait(frame);
  }

  /** Register `s` (see `registrations.ts`); the host's answer routes it (`onRegistered`). */
  private register(s: LiveSession): Promise<void> {
    return this.registrations.register(s);
  }

  // ── Frames ────────────────────────────────────────────────────────────────
  private onFrame(f: Json): void {
    switch (f.type) {
      case "provider_registered":
        this.send({ type: "provider_status", ready: true });
        for (const s of this.table.sessions.values()) void this.register(s);
        this.discovery = this.table.discover(this.hub).then(async (found) => {
          // Ready once every session is known; store sessions register one by one after (each reads its history).
          this.readyResolve();
          for (const s of found) if (this.link.connected && this.table.sessions.get(s.entry.sessionId) === s) await this.register(s);
        });
        return;
      case "session_registered":
        return this.onRegistered(f);
      case "provider_command":
        return this.onCommand(f, true);
      case "command":
        return this.onCommand(f, false);
      case "error":
        return this.onError(f);
      case "event_rejected":
      case "event_resync_required":
      case "event_epoch_mismatch":
      case "event_epoch_required":
        return this.onRefusal(f);
      default:
        return; // event_ack, pong, session_unregistered
    }
  }

  /** An event refusal: never expected (one ordered stream per registration); one for the current one starts a new epoch. */
  private onRefusal(f: Json): void {
    const s = typeof f.session === "string" ? this.table.byUri.get(f.session) : undefined;
    const what = `${String(f.type)}${typeof f.error === "string" ? `: ${f.error.slice(0, 200)}` : ""}`;
    if (!s) return this.o.log(`berth runtime: host refused an event (${what}) of a session not served here; ignored`);
    const why = refusalIgnored(f, s.logicalId);
    if (why !== undefined) return this.o.log(`berth runtime: host refused an event (${what}); ignored: ${why}`);
    this.o.log(`berth runtime: host refused an event (${what}); registering the session again`);
    s.logicalId = undefined;
    void this.register(s);
  }

  private onRegistered(f: Json): void {
    const s = this.registrations.answered(f);
    if (!s) return;
    s.uri = f.session as string;
    s.logicalId = f.backendConnectionId as string;
    if (typeof f.chat === "string") s.primaryChat = f.chat;
    s.seq = 0;
    this.table.byUri.set(s.uri, s);
    const cursors: Record<string, unknown> = typeof f.sourceCursors === "object" && f.sourceCursors !== null ? (f.sourceCursors as Record<string, unknown>) : {};
    if (typeof f.sourceCursor === "string" && s.primaryChat !== undefined) cursors[s.primaryChat] = f.sourceCursor;
    const logicalId = s.logicalId;
    this.resync.begin(s, cursors, logicalId);
    if (s.entry.creationToken) {
      delete s.entry.creationToken;
      delete s.entry.requestedSession;
      void this.saveRegistry().catch((e: unknown) => this.o.log(`berth runtime: registry write failed: ${String(e)}`));
    }
  }

  private onError(f: Json): void {
    if (this.registrations.refused(f)) return;
    if (f.fatal === true) this.o.log(`berth runtime: host closed the provider connection (${String(f.code)})`);
  }

  private answer(commandId: string, accepted: boolean, error?: string): void {
    const r = accepted ? { accepted } : { accepted, error: (error ?? "refused").slice(0, 4096) };
    this.results.set(commandId, r);
    if (this.results.size > MAX_REMEMBERED_RESULTS) this.results.delete(this.results.keys().next().value as string);
    this.inflight.delete(commandId);
    this.send({ type: "command_result", commandId, ...r });
  }

  private onCommand(f: Json, provider: boolean): void {
    const commandId = f.commandId;
    if (typeof commandId !== "string") return; // nothing to correlate an answer with
    const prior = this.results.get(commandId);
    if (prior) return void this.send({ type: "command_result", commandId, ...prior });
    if (this.inflight.has(commandId)) return; // the first delivery will answer
    const cmd = f.command as Json | null | undefined;
    // A correlatable command is always answered, even a malformed one: the host would otherwise wait for it.
    if (typeof cmd !== "object" || cmd === null || Array.isArray(cmd) || typeof cmd.type !== "string")
      return this.answer(commandId, false, "the command must be an object with a string type");
    if (f.backendInstanceId !== this.instanceId) return this.answer(commandId, false, "unknown backend instance");
    this.inflight.add(commandId);
    if (provider) {
      if (cmd.type === "create_session") return void this.createSession(commandId, cmd);
      if (cmd.type === "dispose_session") return this.disposals.run(commandId, cmd);
      return this.answer(commandId, false, `unsupported provider command ${cmd.type.slice(0, 64)}`);
    }
    const s = typeof f.session === "string" ? this.table.byUri.get(f.session) : undefined;
    if (!s || f.backendConnectionId !== s.logicalId) return this.answer(commandId, false, "unknown session or route");
    const lane = f.chat === undefined || f.chat === s.primaryChat ? s.primary : typeof f.chat === "string" ? s.chats.get(f.chat) : undefined;
    if (lane === undefined) return this.answer(commandId, false, "unknown chat");
    this.cmds.run(commandId, s, lane, cmd as Json & { type: string });
  }

  // ── Provider commands ─────────────────────────────────────────────────────
  private async createSession(commandId: string, cmd: Json): Promise<void> {
    const uri = cmd.session;
    const token = cmd.creationToken;
    if (typeof uri !== "string" || typeof token !== "string") return this.answer(commandId, false, "create_session needs session and creationToken");
    const dirs = Array.isArray(cmd.workingDirectories) ? cmd.workingDirectories : [];
    let cwd = this.o.cwd;
    if (dirs.length > 0) { const wd = localDirectoryFromUri(dirs[0]); if (!wd.ok) return this.answer(commandId, false, wd.error); cwd = wd.path; }
    let sessionId: string;
    try {
      const handle = await this.o.manager.store.create(cwd);
      sessionId = handle.id;
      await handle.release();
      const s = liveSession({ sessionId, cwd, title: "New Session", requestedSession: uri, creationToken: token }, true);
      this.table.sessions.set(sessionId, s);
      await this.saveRegistry();
      this.answer(commandId, true); // durably admitted; now "launch": claim the reserved URI
      void this.register(s);
    } catch (e) {
      this.answer(commandId, false, e instanceof SessionError ? `session store: ${e.code}` : "could not create the session");
    }
  }

  // ── Turns ─────────────────────────────────────────────────────────────────
  /**
   * Admit a turn (writer lease + complete history), report admission through `reply` (before any
   * event of the turn), then run it. Never rejects.
   */
  private async admitTurn(s: LiveSession, lane: Lane, text: string, turnId: string, pendingId: string | undefined, reply: (ok: boolean, error?: string) => void): Promise<void> {
    await this.resolveCwd(s);
    const policy = this.o.approvalPolicy;
    const cwd = s.entry.cwd === "" ? this.o.cwd : s.entry.cwd;
    const approval = policy !== undefined ? await this.policyReads.run(cwd, () => policy(cwd).catch((): ApprovalMode => this.o.approval ?? "on-risk")) : undefined;
    const rt = this.runtimeOf(s, lane);
    // Idle: applies to this turn; else from the turn after the running one, which this prompt queues behind.
    if (approval !== undefined) rt.reconfigure({ approval });
    // Admissions of one chat may overlap (two prompts back to back): they share one hold buffer, released when
    // the last of them has answered, so every admission's result still precedes its events.
    lane.held ??= [];
    lane.admitting = (lane.admitting ?? 0) + 1;
    const selection = lane.selection;
    const r = await rt.startTurn(selection !== undefined ? withSelection(selection, text) : text, { turnId });
    if (r.ok && selection !== undefined && lane.selection === selection) {
      // The excerpt is the side chat's context now (in its first prompt): later turns do not repeat it.
      delete lane.selection;
      s.entry.chats = (s.entry.chats ?? []).map((c) => (c.uri === lane.chatUri ? { uri: c.uri, sessionId: c.sessionId, title: c.title, ...(c.disposed === true ? { disposed: true } : {}) } : c));
      void this.saveRegistry().catch((e: unknown) => this.o.log(`berth runtime: registry write failed: ${String(e)}`));
    }
    if (r.ok && pendingId !== undefined)
      for (const ev of lane.held ?? []) if (ev.type === "user_message" && ev.turnId === turnId) ev.pendingId = pendingId;
    if (!r.ok) reply(false, refusal(r.error, rt.busy));
    else reply(true);
    lane.admitting--;
    if (lane.admitting > 0) return;
    const held = lane.held ?? [];
    lane.held = null;
    for (const ev of held) void this.emit(s, lane, ev);
  }

  /** What runs in a session served at `uri` (for diagnostics and tests): its running turn and pending approvals. */
  inspect(uri: string): { turnId: string | null; pendingApprovals: number; pendingQuestions: number; chats: number } | undefined {
    const s = this.table.byUri.get(uri);
    if (s === undefined) return undefined;
    const rt = s.primary.rt;
    return { turnId: rt?.turn?.turnId ?? null, pendingApprovals: rt?.pendingApprovals().length ?? 0, pendingQuestions: rt?.pendingQuestions().length ?? 0, chats: s.chats.size };
  }

  /** Resolves once every history resync begun so far has finished (after `sync`, those of every registration so far). */
  historySynced(): Promise<void> {
    return this.resync.settled();
  }

  /** Resolves once every registration begun so far has been sent to the host (or dropped with its connection). */
  registrationsSent(): Promise<void> {
    return this.registrations.sent();
  }

  /** Resolves once the store sessions found at the last (re)connection have been sent for registration. */
  discovered(): Promise<void> {
    return this.discovery;
  }

  /**
   * A ping/pong round trip with the host: resolves once every frame the host sent before answering has been
   * handled here (one ordered socket), so whatever the host decided by then has reached this runtime.
   * Resolves at once when not connected.
   */
  sync(): Promise<void> {
    return this.link.sync();
  }

  /** Cancel running turns, wait for them, then disconnect. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.link.stop();
    await this.hub.close(); // cancels running turns, drops queues, waits; stops the agent's tools
    await this.link.end();
    await this.table.settled();
    await this.o.manager.drain().catch(() => undefined);
  }
}

/** Start the adapter; resolves once provider `berth` is registered with the host. */
export async function startBerthRuntime(o: BerthRuntimeOptions): Promise<BerthRuntimeBackend> {
  const b = new BerthRuntimeBackend(o);
  b.start();
  await b.ready;
  return b;
}
