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
 *    pending-message `id`). `steer` injects a message at the running turn's next step boundary. `configure` and
 *    the rest are refused. Each `commandId` is executed at most once; a repeated ID gets the same result.
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

import type { Json } from "../../core/json-bounds.js";

export const PROVIDER_ID = "berth";
const PROTOCOL_VERSION = 9;
const MAX_REMEMBERED_RESULTS = 4096;
const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5000;

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
}

interface LiveSession {
  entry: RegistryEntry;
  /** In the registry file (created through AHP), or only in the Berth store (listed, dormant). */
  registered: boolean;
  uri?: string;
  /** The host's id for this session in the current registration; undefined once that registration is gone. */
  logicalId?: string | undefined;
  seq: number;
  rt?: SessionRuntime;
  projection?: HostProjection;
  /** Events held while a prompt is being admitted (they follow its command result). */
  held: Json[] | null;
}

const sourceOf = (sessionId: string) => `berth:${sessionId}`;
const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export class BerthRuntimeBackend {
  readonly instanceId = randomUUID();
  private sock?: Socket | undefined;
  private closed = false;
  private readonly sessions = new Map<string, LiveSession>(); // by Berth session id
  private readonly byUri = new Map<string, LiveSession>();
  private readonly registering = new Map<string, LiveSession>(); // requestId -> session
  private readonly results = new Map<string, { accepted: boolean; error?: string }>();
  private readonly inflight = new Set<string>();
  private readonly registry: BerthRegistry;
  private readonly hub: SessionHub;
  private readyResolve!: () => void;
  /** Resolves once the provider is registered with the host for the first time. */
  readonly ready = new Promise<void>((r) => (this.readyResolve = r));
  private connecting?: Promise<void>;

  constructor(private readonly o: BerthRuntimeOptions) {
    this.registry = new BerthRegistry(o.registryPath);
    this.hub = new SessionHub({ manager: o.manager, runner: o.runner, defaults: { cwd: o.cwd, approval: o.approval ?? "on-risk" } });
    for (const e of this.registry.load()) this.sessions.set(e.sessionId, { entry: e, registered: true, seq: 0, held: null });
  }

  start(): void {
    this.connecting = this.connectLoop();
  }

  // ── Registry ──────────────────────────────────────────────────────────────
  /** Durably rewrite the registry (serialized; resolves once this version is on disk). */
  private saveRegistry(): Promise<void> {
    return this.registry.save([...this.sessions.values()].filter((s) => s.registered).map((s) => s.entry));
  }

  /** Adds the Berth store's sessions this backend does not know yet (dormant until opened). */
  private async discoverStoreSessions(): Promise<LiveSession[]> {
    const found: LiveSession[] = [];
    let after: string | null = null;
    for (let page = 0; page < 100; page++) {
      let listed;
      try {
        listed = await this.hub.list(after, 200);
      } catch {
        break;
      }
      for (const e of listed.sessions) {
        if (this.sessions.has(e.sessionId)) continue;
        // The working directory is read from the session's header when it is first prompted (`resolveCwd`).
        const s: LiveSession = { entry: { sessionId: e.sessionId, cwd: "", title: e.title ?? "New Session" }, registered: false, seq: 0, held: null };
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

  /** The session's runtime, opened (and projected) on first use; `resolveCwd` first for store sessions. */
  private runtimeOf(s: LiveSession): SessionRuntime {
    if (s.rt !== undefined) return s.rt;
    if (s.entry.cwd === "") s.entry.cwd = this.o.cwd;
    const rt = this.hub.open(s.entry.sessionId, { cwd: s.entry.cwd });
    const projection = new HostProjection(
      (ev) => this.emit(s, ev),
      (title) => {
        if (s.entry.title !== "New Session") return false;
        s.entry.title = title;
        if (s.registered) void this.saveRegistry().catch(() => undefined);
        return true;
      },
    );
    rt.subscribe((e) => projection.on(e));
    s.rt = rt;
    s.projection = projection;
    return rt;
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
          s.rt?.cancel(); // the host that owns the turn's transcript is gone
        }
        this.registering.clear();
        resolve();
      });
      this.send({
        type: "provider_hello",
        protocolVersion: PROTOCOL_VERSION,
        instanceId: this.instanceId,
        providers: [{ id: PROVIDER_ID, displayName: "Berth", description: "Berth's own agent runtime" }],
        source: { serviceId: "berth-runtime", instanceId: this.instanceId },
      });
    });
  }

  private send(frame: Json): boolean {
    const sock = this.sock;
    if (!sock || sock.destroyed) return false;
    return sock.write(encodeFrame(frame));
  }

  /** Send one sequenced event for a session; waits for drain when the socket is backed up. */
  private emit(s: LiveSession, event: Json): void | Promise<void> {
    if (s.held !== null) {
      s.held.push(event);
      return;
    }
    const sock = this.sock;
    if (!s.uri || !s.logicalId || !sock) return;
    s.seq++;
    if (this.send({ type: "sequenced_event", session: s.uri, sequence: s.seq, backendConnectionId: s.logicalId, event })) return;
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

  private register(s: LiveSession): void {
    const requestId = randomUUID();
    this.registering.set(requestId, s);
    const hello: Json = {
      protocolVersion: PROTOCOL_VERSION,
      instanceId: this.instanceId,
      sourceId: sourceOf(s.entry.sessionId),
      provider: PROVIDER_ID,
      displayName: "Berth",
      title: s.entry.title,
      runtimeIdle: s.rt?.busy !== true,
      toolCapabilities: { confirmations: true },
    };
    if (s.entry.requestedSession && s.entry.creationToken) {
      hello.requestedSession = s.entry.requestedSession;
      hello.creationToken = s.entry.creationToken;
    }
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
        for (const s of this.sessions.values()) this.register(s);
        void this.discoverStoreSessions().then((found) => {
          for (const s of found) if (this.sock !== undefined) this.register(s);
          this.readyResolve();
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
        this.o.log(`berth runtime: host refused an event (${String(f.type)}); re-registering`);
        const s = typeof f.session === "string" ? this.byUri.get(f.session) : undefined;
        if (s) {
          s.logicalId = undefined;
          this.register(s);
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
    switch (cmd.type) {
      case "prompt":
        if (typeof cmd.text !== "string") return this.answer(commandId, false, "prompt needs text");
        return void this.admitTurn(s, cmd.text, typeof cmd.turnId === "string" ? cmd.turnId : randomUUID(), undefined, (ok, err) => this.answer(commandId, ok, err));
      case "abort":
        s.rt?.cancel(); // queued follow-ups still run: each is its own turn
        return this.answer(commandId, true);
      case "steer": {
        const text = typeof cmd.text === "string" ? cmd.text : isObj(cmd.message) && typeof cmd.message.text === "string" ? cmd.message.text : null;
        if (text === null) return this.answer(commandId, false, "steer needs text");
        if (s.rt?.steer(text) !== true) return this.answer(commandId, false, "no turn is running");
        return this.answer(commandId, true);
      }
      case "confirm_tool": {
        const approvalId = typeof cmd.toolCallId === "string" ? s.projection?.approvalOf(cmd.toolCallId) : undefined;
        const ok = approvalId !== undefined && typeof cmd.approved === "boolean" && s.rt?.resolveApproval(approvalId, cmd.approved) === true;
        if (!ok) return this.answer(commandId, false, "no pending confirmation for that tool call");
        this.answer(commandId, true);
        void this.emit(s, { type: "tool_confirmation_resolved", toolCallId: cmd.toolCallId, approved: cmd.approved, commandId });
        return;
      }
      case "follow_up": {
        if (typeof cmd.text !== "string" || typeof cmd.id !== "string") return this.answer(commandId, false, "follow_up needs text and id");
        const rt = this.runtimeOf(s);
        if (rt.busy) {
          const entry = rt.submit(cmd.text, { submitter: "follow_up" });
          s.projection?.pendingIds.set(entry.queue_id, cmd.id);
          return this.answer(commandId, true);
        }
        return void this.admitTurn(s, cmd.text, randomUUID(), cmd.id, (ok, err) => this.answer(commandId, ok, err));
      }
      default:
        return this.answer(commandId, false, `the Berth runtime does not support ${cmd.type.slice(0, 64)}`);
    }
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
      const s: LiveSession = { entry: { sessionId, cwd, title: "New Session", requestedSession: uri, creationToken: token }, registered: true, seq: 0, held: null };
      this.sessions.set(sessionId, s);
      await this.saveRegistry();
      this.answer(commandId, true); // durably admitted; now "launch": claim the reserved URI
      this.register(s);
    } catch (e) {
      this.answer(commandId, false, e instanceof SessionError ? `session store: ${e.code}` : "could not create the session");
    }
  }

  private disposeSession(commandId: string, cmd: Json): void {
    const s = typeof cmd.session === "string" ? this.byUri.get(cmd.session) : undefined;
    if (!s) return this.answer(commandId, false, "unknown session");
    s.rt?.clearQueue();
    s.rt?.cancel();
    void this.hub.closeSession(s.entry.sessionId);
    this.sessions.delete(s.entry.sessionId);
    this.byUri.delete(cmd.session as string);
    s.logicalId = undefined;
    // The Berth session file is kept: disposal removes the session from the host, not the transcript.
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
  private async admitTurn(s: LiveSession, text: string, turnId: string, pendingId: string | undefined, reply: (ok: boolean, error?: string) => void): Promise<void> {
    await this.resolveCwd(s);
    const rt = this.runtimeOf(s);
    s.held = [];
    const r = await rt.startTurn(text, { turnId });
    const held = s.held;
    s.held = null;
    if (!r.ok) reply(false, r.error === "busy" ? "a turn is already running" : r.error === "history_incomplete" ? "session unavailable" : `session ${r.error}`);
    else reply(true);
    for (const ev of held) {
      if (r.ok && pendingId !== undefined && ev.type === "user_message" && ev.turnId === turnId) ev.pendingId = pendingId;
      void this.emit(s, ev);
    }
  }

  /** What runs in a session served at `uri` (for diagnostics and tests): its running turn and pending approvals. */
  inspect(uri: string): { turnId: string | null; pendingApprovals: number } | undefined {
    const s = this.byUri.get(uri);
    if (s === undefined) return undefined;
    return { turnId: s.rt?.turn?.turnId ?? null, pendingApprovals: s.rt?.pendingApprovals().length ?? 0 };
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
