/**
 * Berth's own runtime as a live backend: provider `berth` on a version-9 provider connection, with every Berth
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
 *  - Losing the host connection cancels running turns (their events have nowhere to go) and reconnects with
 *    bounded exponential backoff; `close()` cancels and waits for running turns.
 */
import { createConnection, type Socket } from "node:net";
import { randomUUID } from "node:crypto";
import { attachLineReader, encodeFrame } from "../../transport/host-framing.js";
import { SessionHub, type ApprovalMode, type SessionRuntime, type TurnRunner } from "../../runtime/session/index.js";
import { SessionError, type SessionManager } from "../../store/sessions/index.js";
import { BerthRegistry, type BerthRegistryEntry as RegistryEntry } from "../../store/host/berth-registry.js";
import { HostProjection } from "./projection.js";
import { localDirectoryFromUri } from "../../store/host/working-dir.js";
import { parseAnswer, parseConfigure, selectionOf } from "./parse.js";
import { ChatCommands, type Lane } from "./chats.js";

import type { Json } from "../../core/json-bounds.js";

export const PROVIDER_ID = "berth";
const PROTOCOL_VERSION = 9;
const MAX_REMEMBERED_RESULTS = 4096;
const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5000;
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
  /** Turns per history page (default `HISTORY_PAGE_TURNS`). */
  historyPage?: number;
}

export interface LiveSession {
  entry: RegistryEntry;
  /** In the registry file (created through AHP, or given chats/config), or only in the Berth store (dormant). */
  registered: boolean;
  uri?: string;
  /** The host's id for this session in the current registration; undefined once that registration is gone. */
  logicalId?: string | undefined;
  /** The host's URI of the primary chat (from `session_registered`). */
  primaryChat?: string;
  seq: number;
  /** The primary chat (the session's own Berth session). */
  primary: Lane;
  /** Further chats by AHP chat URI. */
  chats: Map<string, Lane>;
}

const sourceOf = (sessionId: string) => `berth:${sessionId}`;
const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export class BerthRuntimeBackend {
  readonly instanceId = randomUUID();
  private sock?: Socket | undefined;
  private closed = false;
  private readonly sessions = new Map<string, LiveSession>(); // by Berth session id (of the primary chat)
  private readonly byUri = new Map<string, LiveSession>();
  private readonly registering = new Map<string, LiveSession>(); // requestId -> session
  /** Disposed sessions (kept in the registry so their Berth sessions are not listed again). */
  private readonly disposed = new Map<string, RegistryEntry>();
  private readonly results = new Map<string, { accepted: boolean; error?: string }>();
  private readonly inflight = new Set<string>();
  private readonly registry: BerthRegistry;
  readonly hub: SessionHub;
  private readonly chatCmds: ChatCommands;
  private readyResolve!: () => void;
  /** Resolves once the provider is registered with the host for the first time. */
  readonly ready = new Promise<void>((r) => (this.readyResolve = r));
  private connecting?: Promise<void>;
  private discovery: Promise<void> = Promise.resolve();

  constructor(private readonly o: BerthRuntimeOptions) {
    this.registry = new BerthRegistry(o.registryPath);
    this.hub = new SessionHub({ manager: o.manager, runner: o.runner, defaults: { cwd: o.cwd, approval: o.approval ?? "on-risk" } });
    for (const e of this.registry.load()) {
      if (e.disposed === true) this.disposed.set(e.sessionId, e);
      else this.sessions.set(e.sessionId, this.live(e, true));
    }
    this.chatCmds = new ChatCommands({
      manager: o.manager,
      hub: this.hub,
      page: o.historyPage ?? HISTORY_PAGE_TURNS,
      emit: (s, lane, ev) => this.emit(s, lane, ev),
      runtimeOf: (s, lane) => this.runtimeOf(s, lane),
      save: () => this.saveRegistry(),
      answer: (id, ok, err) => this.answer(id, ok, err),
      admitTurn: (s, lane, text, turnId, reply) => this.admitTurn(s, lane, text, turnId, undefined, reply),
    });
  }

  private live(entry: RegistryEntry, registered: boolean): LiveSession {
    const chats = new Map<string, Lane>();
    for (const c of entry.chats ?? []) if (c.disposed !== true) chats.set(c.uri, { sessionId: c.sessionId, chatUri: c.uri, held: null });
    return { entry, registered, seq: 0, primary: { sessionId: entry.sessionId, held: null }, chats };
  }

  /** Session-bound tools for the agent (`Agent`'s `sessionTools`): the `question` tool of open sessions. */
  sessionTools(s: { sessionId: string }): ReturnType<SessionHub["questionTools"]> {
    return this.hub.questionTools(s);
  }

  start(): void {
    this.connecting = this.connectLoop();
  }

  // ── Registry ──────────────────────────────────────────────────────────────
  /** Durably rewrite the registry (serialized; resolves once this version is on disk). */
  private saveRegistry(): Promise<void> {
    return this.registry.save([...[...this.sessions.values()].filter((s) => s.registered).map((s) => s.entry), ...this.disposed.values()]);
  }

  /** Adds the Berth store's sessions this backend does not know yet (dormant until opened). */
  private async discoverStoreSessions(): Promise<LiveSession[]> {
    const found: LiveSession[] = [];
    const chatIds = new Set<string>();
    for (const e of [...[...this.sessions.values()].map((s) => s.entry), ...this.disposed.values()]) for (const c of e.chats ?? []) chatIds.add(c.sessionId);
    let after: string | null = null;
    for (let page = 0; page < 100; page++) {
      let listed;
      try {
        listed = await this.hub.list(after, 200);
      } catch {
        break;
      }
      for (const e of listed.sessions) {
        if (this.sessions.has(e.sessionId) || this.disposed.has(e.sessionId) || chatIds.has(e.sessionId)) continue;
        // The working directory is read from the session's header when it is first prompted (`resolveCwd`).
        const s = this.live({ sessionId: e.sessionId, cwd: "", title: e.title ?? "New Session" }, false);
        this.sessions.set(e.sessionId, s);
        found.push(s);
      }
      if (!listed.truncated || listed.nextAfter === null) break;
      after = listed.nextAfter;
    }
    return found;
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

  private lanes(s: LiveSession): Lane[] {
    return [s.primary, ...s.chats.values()];
  }

  // ── Connection ────────────────────────────────────────────────────────────
  private async connectLoop(): Promise<void> {
    let backoff = BACKOFF_MIN_MS;
    while (!this.closed) {
      const sock = await new Promise<Socket | null>((resolve) => {
        const s = createConnection(this.o.socketPath);
        s.once("connect", () => resolve(s));
        s.once("error", () => resolve(null));
      });
      if (sock && !this.closed) {
        backoff = BACKOFF_MIN_MS;
        await this.serve(sock);
      } else sock?.destroy();
      if (this.closed) return;
      await sleep(backoff);
      backoff = Math.min(BACKOFF_MAX_MS, backoff * 2);
    }
  }

  /** Speak the protocol on one connection until it closes. */
  private serve(sock: Socket): Promise<void> {
    this.sock = sock;
    return new Promise((resolve) => {
      const stop = attachLineReader(sock, {
        onFrame: (f) => this.onFrame(f),
        onError: (e) => {
          this.o.log(`berth runtime: bad frame from host (${e.kind})`);
          sock.destroy();
        },
      });
      sock.on("error", () => {});
      sock.once("close", () => {
        stop();
        if (this.sock === sock) this.sock = undefined;
        for (const s of this.sessions.values()) {
          s.logicalId = undefined;
          for (const l of this.lanes(s)) l.rt?.cancel(); // the host that owns the turn's transcript is gone
        }
        this.registering.clear();
        resolve();
      });
      this.send({
        type: "provider_hello",
        protocolVersion: PROTOCOL_VERSION,
        instanceId: this.instanceId,
        providers: [{ id: PROVIDER_ID, displayName: "Berth", description: "Berth's own agent runtime", multipleChats: { create: true, dispose: true, fork: true, pagedHistory: true } }],
        source: { serviceId: "berth-runtime", instanceId: this.instanceId },
      });
    });
  }

  private send(frame: Json): boolean {
    const sock = this.sock;
    if (!sock || sock.destroyed) return false;
    return sock.write(encodeFrame(frame));
  }

  /** Send one sequenced event for a chat; waits for drain when the socket is backed up. */
  private emit(s: LiveSession, lane: Lane, event: Json): void | Promise<void> {
    if (lane.held !== null) {
      lane.held.push(event);
      return;
    }
    const sock = this.sock;
    if (!s.uri || !s.logicalId || !sock) return;
    s.seq++;
    const frame: Json = { type: "sequenced_event", session: s.uri, sequence: s.seq, backendConnectionId: s.logicalId, event };
    if (lane.chatUri !== undefined) frame.chat = lane.chatUri;
    if (this.send(frame)) return;
    return new Promise<void>((resolve) => {
      const done = () => {
        sock.off("drain", done);
        sock.off("close", done);
        resolve();
      };
      sock.once("drain", done);
      sock.once("close", done);
    });
  }

  private async register(s: LiveSession): Promise<void> {
    const hello: Json = {
      protocolVersion: PROTOCOL_VERSION,
      instanceId: this.instanceId,
      sourceId: sourceOf(s.entry.sessionId),
      provider: PROVIDER_ID,
      displayName: "Berth",
      title: s.entry.title,
      runtimeIdle: s.primary.rt?.busy !== true,
      toolCapabilities: { confirmations: true },
      inputCapabilities: { questionKinds: ["single_select", "text"], freeform: true, maxQuestions: 1, maxOptions: 16 },
      chatCapabilities: { create: true, dispose: true, fork: true, pagedHistory: true },
    };
    if (s.entry.model !== undefined) hello.model = s.entry.model;
    if (s.entry.thinkingLevel !== undefined) hello.thinkingLevel = s.entry.thinkingLevel;
    if (s.entry.requestedSession && s.entry.creationToken) {
      hello.requestedSession = s.entry.requestedSession;
      hello.creationToken = s.entry.creationToken;
    }
    if (!s.registered) {
      // A session the host may never have seen (made by another door): its newest turns, older ones by cursor.
      const page = await this.chatCmds.newestPage(s.primary).catch(() => null);
      if (page !== null && page.turns.length > 0) {
        hello.history = page.turns;
        if (page.next !== null) hello.historyNextCursor = page.next;
      }
    }
    if (this.sock === undefined) return;
    const requestId = randomUUID();
    this.registering.set(requestId, s);
    this.send({ type: "register_session", requestId, hello });
  }

  // ── Frames ────────────────────────────────────────────────────────────────
  private onFrame(f: Json): void {
    if (f.type === "pong" && typeof f.id === "string" && this.pongs.has(f.id)) {
      this.pongs.get(f.id)!();
      return;
    }
    switch (f.type) {
      case "provider_registered":
        this.send({ type: "provider_status", ready: true });
        for (const s of this.sessions.values()) void this.register(s);
        this.discovery = this.discoverStoreSessions().then(async (found) => {
          // Ready once every session is known; store sessions register one by one after (each reads its history).
          this.readyResolve();
          for (const s of found) if (this.sock !== undefined && this.sessions.get(s.entry.sessionId) === s) await this.register(s);
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
      case "event_epoch_required": {
        // Never expected (one ordered stream per registration): start a fresh epoch.
        this.o.log(`berth runtime: host refused an event (${String(f.type)}${typeof f.error === "string" ? `: ${f.error.slice(0, 200)}` : ""}); re-registering`);
        const s = typeof f.session === "string" ? this.byUri.get(f.session) : undefined;
        if (s) {
          s.logicalId = undefined;
          void this.register(s);
        }
        return;
      }
      default:
        return; // event_ack, pong, session_unregistered
    }
  }

  private onRegistered(f: Json): void {
    const s = this.registering.get(f.requestId as string);
    if (!s) return;
    this.registering.delete(f.requestId as string);
    s.uri = f.session as string;
    s.logicalId = f.backendConnectionId as string;
    if (typeof f.chat === "string") s.primaryChat = f.chat;
    s.seq = 0;
    this.byUri.set(s.uri, s);
    if (s.entry.creationToken) {
      delete s.entry.creationToken;
      delete s.entry.requestedSession;
      void this.saveRegistry().catch((e: unknown) => this.o.log(`berth runtime: registry write failed: ${String(e)}`));
    }
  }

  private onError(f: Json): void {
    const s = typeof f.requestId === "string" ? this.registering.get(f.requestId) : undefined;
    if (s) {
      this.registering.delete(f.requestId as string);
      this.o.log(`berth runtime: registration of a session refused (${String(f.code)})`);
      return;
    }
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
    const cmd = f.command as Json | undefined;
    if (typeof commandId !== "string" || !cmd || typeof cmd.type !== "string") return;
    const prior = this.results.get(commandId);
    if (prior) return void this.send({ type: "command_result", commandId, ...prior });
    if (this.inflight.has(commandId)) return; // the first delivery will answer
    if (f.backendInstanceId !== this.instanceId) return this.answer(commandId, false, "unknown backend instance");
    this.inflight.add(commandId);
    if (provider) {
      if (cmd.type === "create_session") return void this.createSession(commandId, cmd);
      if (cmd.type === "dispose_session") return this.disposeSession(commandId, cmd);
      return this.answer(commandId, false, `unsupported provider command ${cmd.type.slice(0, 64)}`);
    }
    const s = typeof f.session === "string" ? this.byUri.get(f.session) : undefined;
    if (!s || f.backendConnectionId !== s.logicalId) return this.answer(commandId, false, "unknown session or route");
    const lane = f.chat === undefined || f.chat === s.primaryChat ? s.primary : typeof f.chat === "string" ? s.chats.get(f.chat) : undefined;
    if (lane === undefined) return this.answer(commandId, false, "unknown chat");
    switch (cmd.type) {
      case "prompt":
        if (typeof cmd.text !== "string") return this.answer(commandId, false, "prompt needs text");
        return void this.admitTurn(s, lane, cmd.text, typeof cmd.turnId === "string" ? cmd.turnId : randomUUID(), undefined, (ok, err) => this.answer(commandId, ok, err));
      case "abort":
        lane.rt?.cancel(); // queued follow-ups still run: each is its own turn
        return this.answer(commandId, true);
      case "steer": {
        const text = typeof cmd.text === "string" ? cmd.text : isObj(cmd.message) && typeof cmd.message.text === "string" ? cmd.message.text : null;
        if (text === null) return this.answer(commandId, false, "steer needs text");
        if (lane.rt?.steer(text, typeof cmd.id === "string" ? cmd.id : undefined) !== true) return this.answer(commandId, false, "no turn is running");
        return this.answer(commandId, true);
      }
      case "configure":
        return this.configure(commandId, s, cmd);
      case "confirm_tool": {
        const approvalId = typeof cmd.toolCallId === "string" ? lane.projection?.approvalOf(cmd.toolCallId) : undefined;
        const ok = approvalId !== undefined && typeof cmd.approved === "boolean" && lane.rt?.resolveApproval(approvalId, cmd.approved) === true;
        if (!ok) return this.answer(commandId, false, "no pending confirmation for that tool call");
        this.answer(commandId, true);
        void this.emit(s, lane, { type: "tool_confirmation_resolved", toolCallId: cmd.toolCallId, approved: cmd.approved, commandId });
        return;
      }
      case "complete_input": {
        const requestId = cmd.requestId;
        const q = typeof requestId === "string" ? lane.rt?.question(requestId) : undefined;
        if (typeof requestId !== "string" || q === undefined || lane.rt === undefined) return this.answer(commandId, false, "no pending question with that requestId");
        const input = parseAnswer(cmd, q);
        if (typeof input === "string") return this.answer(commandId, false, input);
        lane.projection?.answeredBy.set(requestId, commandId);
        const r = lane.rt.answerQuestion(requestId, input);
        if (!r.ok) {
          lane.projection?.answeredBy.delete(requestId);
          return this.answer(commandId, false, r.error);
        }
        return this.answer(commandId, true);
      }
      case "follow_up": {
        if (typeof cmd.text !== "string" || typeof cmd.id !== "string") return this.answer(commandId, false, "follow_up needs text and id");
        const rt = this.runtimeOf(s, lane);
        if (rt.busy) {
          const entry = rt.submit(cmd.text, { submitter: "follow_up" });
          lane.projection?.pendingIds.set(entry.queue_id, cmd.id);
          return this.answer(commandId, true);
        }
        return void this.admitTurn(s, lane, cmd.text, randomUUID(), cmd.id, (ok, err) => this.answer(commandId, ok, err));
      }
      case "create_chat":
        s.registered = true; // its chats must survive a restart
        return void this.chatCmds.create(commandId, s, cmd);
      case "dispose_chat":
        return void this.chatCmds.dispose(commandId, s, cmd);
      case "fetch_turns":
        return void this.chatCmds.fetch(commandId, s, lane, cmd);
      default:
        return this.answer(commandId, false, `the Berth runtime does not support ${cmd.type.slice(0, 64)}`);
    }
  }

  /** `configure`: durable first, then applied to every chat (now when idle, else from its next turn). */
  private configure(commandId: string, s: LiveSession, cmd: Json): void {
    const c = parseConfigure(cmd);
    if (typeof c === "string") return this.answer(commandId, false, c);
    if (c.model !== undefined) s.entry.model = c.model;
    if (c.thinkingLevel !== undefined) s.entry.thinkingLevel = c.thinkingLevel;
    const selection = selectionOf(s.entry.model, s.entry.thinkingLevel);
    for (const l of this.lanes(s)) if (selection !== undefined) l.rt?.reconfigure({ selection });
    s.registered = true;
    void this.saveRegistry().then(
      () => this.answer(commandId, true),
      () => this.answer(commandId, false, "registry write failed"),
    );
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
      const s = this.live({ sessionId, cwd, title: "New Session", requestedSession: uri, creationToken: token }, true);
      this.sessions.set(sessionId, s);
      await this.saveRegistry();
      this.answer(commandId, true); // durably admitted; now "launch": claim the reserved URI
      void this.register(s);
    } catch (e) {
      this.answer(commandId, false, e instanceof SessionError ? `session store: ${e.code}` : "could not create the session");
    }
  }

  private disposeSession(commandId: string, cmd: Json): void {
    const s = typeof cmd.session === "string" ? this.byUri.get(cmd.session) : undefined;
    if (!s) return this.answer(commandId, false, "unknown session");
    for (const l of this.lanes(s)) {
      l.rt?.clearQueue();
      l.rt?.cancel();
      void this.hub.closeSession(l.sessionId);
    }
    this.sessions.delete(s.entry.sessionId);
    this.byUri.delete(cmd.session as string);
    s.logicalId = undefined;
    // The Berth session files are kept: disposal removes the session from the host, not the transcripts. The
    // registry keeps a mark, so the next start does not list them again as store sessions.
    const { creationToken: _t, requestedSession: _r, ...entry } = s.entry;
    this.disposed.set(s.entry.sessionId, { ...entry, disposed: true });
    void this.saveRegistry().then(
      () => this.answer(commandId, true),
      () => this.answer(commandId, false, "registry write failed"),
    );
  }

  // ── Turns ─────────────────────────────────────────────────────────────────
  /**
   * Admit a turn (writer lease + complete history), report admission through `reply` (before any
   * event of the turn), then run it. Never rejects.
   */
  private async admitTurn(s: LiveSession, lane: Lane, text: string, turnId: string, pendingId: string | undefined, reply: (ok: boolean, error?: string) => void): Promise<void> {
    await this.resolveCwd(s);
    const rt = this.runtimeOf(s, lane);
    lane.held = [];
    const r = await rt.startTurn(text, { turnId });
    const held = lane.held;
    lane.held = null;
    if (!r.ok) reply(false, r.error === "busy" ? "a turn is already running" : r.error === "history_incomplete" ? "session unavailable" : `session ${r.error}`);
    else reply(true);
    for (const ev of held) {
      if (r.ok && pendingId !== undefined && ev.type === "user_message" && ev.turnId === turnId) ev.pendingId = pendingId;
      void this.emit(s, lane, ev);
    }
  }

  /** What runs in a session served at `uri` (for diagnostics and tests): its running turn and pending approvals. */
  inspect(uri: string): { turnId: string | null; pendingApprovals: number; pendingQuestions: number; chats: number } | undefined {
    const s = this.byUri.get(uri);
    if (s === undefined) return undefined;
    const rt = s.primary.rt;
    return { turnId: rt?.turn?.turnId ?? null, pendingApprovals: rt?.pendingApprovals().length ?? 0, pendingQuestions: rt?.pendingQuestions().length ?? 0, chats: s.chats.size };
  }

  /** Resolves once the store sessions found at the last (re)connection have been sent for registration. */
  discovered(): Promise<void> {
    return this.discovery;
  }

  private readonly pongs = new Map<string, () => void>();
  private pingCounter = 0;

  /**
   * A ping/pong round trip with the host: resolves once every frame the host sent before answering has been
   * handled here (one ordered socket), so whatever the host decided by then has reached this runtime.
   * Resolves at once when not connected.
   */
  sync(): Promise<void> {
    const sock = this.sock;
    if (sock === undefined || sock.destroyed || this.closed) return Promise.resolve();
    const id = `sync-${++this.pingCounter}`;
    return new Promise<void>((resolve) => {
      const done = (): void => {
        this.pongs.delete(id);
        sock.off("close", done);
        resolve();
      };
      this.pongs.set(id, done);
      sock.once("close", done); // the host is gone: nothing more can arrive
      this.send({ type: "ping", id });
    });
  }

  /** Cancel running turns, wait for them, then disconnect. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.hub.close(); // cancels running turns, drops queues, waits; stops the agent's tools
    this.sock?.end();
    this.sock?.destroy();
    await this.connecting;
    await this.registry.settled();
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
