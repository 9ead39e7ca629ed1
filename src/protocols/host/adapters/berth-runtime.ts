/**
 * Berth's own runtime as a live backend: provider `berth` on a version-9 provider connection,
 * with every Berth session multiplexed over it (v8 `register_session`).
 *
 * Contracts:
 *  - `create_session` creates a durable Berth session (and records it in the adapter registry)
 *    before it is accepted; the session is then registered with the exact `requestedSession` and
 *    one-time `creationToken`, which the host checks (→ `session/ready`). The token is kept,
 *    owner-only, only until that claim succeeds.
 *  - Known sessions are re-registered (dormant) after every (re)connection; the host maps their
 *    stable `sourceId` (`berth:<session id>`) back to the same AHP session.
 *  - Commands: `prompt` (admitted once the session's writer lease is held), `abort`,
 *    `confirm_tool` (answers the runtime's approval gate), `follow_up` (runs after the current
 *    turn; its `user_message` names the pending-message `id`). `steer`, `configure` and the rest
 *    are refused: the runtime has no mid-turn injection or per-session configuration. Each
 *    `commandId` is executed at most once; a repeated ID gets the same result.
 *  - Events are `sequenced_event`s per logical registration, starting at 1.
 *  - Losing the host connection cancels running turns (their events have nowhere to go) and
 *    reconnects with bounded exponential backoff; `close()` cancels and waits for running turns.
 */
import { createConnection, type Socket } from "node:net";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import writeFileAtomic from "write-file-atomic";
import { attachLineReader, encodeFrame } from "../../../transport/host-framing.js";
import type { TurnOutcome } from "../../../runtime/events.js";
import type { RunTurnRequest } from "../../../runtime/agent.js";
import { DEFAULT_WINDOW, SessionError, type History, type SessionManager } from "../../../store/sessions/index.js";
import { BerthTurn, defaultApprovalPolicy } from "./berth-turn.js";
import { localDirectoryFromUri } from "../working-dir.js";

type Json = Record<string, unknown>;

export const PROVIDER_ID = "berth";
const PROTOCOL_VERSION = 9;
const MAX_REMEMBERED_RESULTS = 4096;
const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5000;

/** What the adapter needs from the runtime (an `Agent`). */
export interface TurnRunner {
  runTurn(req: RunTurnRequest): Promise<TurnOutcome>;
  close(): Promise<void>;
}

export interface BerthRuntimeOptions {
  socketPath: string;
  manager: SessionManager;
  runner: TurnRunner;
  /** Working directory for sessions created without one. */
  cwd: string;
  /** The adapter registry (AHP-created sessions), owner-only; lives in the host state directory. */
  registryPath: string;
  log: (msg: string) => void;
  /** Which tools need the AHP client's confirmation (default: every tool that is not read-only). */
  approvalPolicy?: (toolName: string) => "auto" | "ask";
}

interface RegistryEntry {
  sessionId: string;
  cwd: string;
  title: string;
  /** Until the host accepted the claim. */
  requestedSession?: string;
  creationToken?: string;
}

interface FollowUp {
  text: string;
  pendingId: string;
}

interface LiveSession {
  entry: RegistryEntry;
  uri?: string;
  logicalId?: string;
  seq: number;
  turn?: BerthTurn;
  done?: Promise<void>;
  queue: FollowUp[];
}

const sourceOf = (sessionId: string) => `berth:${sessionId}`;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export class BerthRuntimeBackend {
  readonly instanceId = randomUUID();
  private sock?: Socket;
  private closed = false;
  private readonly sessions = new Map<string, LiveSession>(); // by Berth session id
  private readonly byUri = new Map<string, LiveSession>();
  private readonly registering = new Map<string, LiveSession>(); // requestId -> session
  private readonly results = new Map<string, { accepted: boolean; error?: string }>();
  private readonly inflight = new Set<string>();
  private registryWrite: Promise<void> = Promise.resolve();
  private readyResolve!: () => void;
  /** Resolves once the provider is registered with the host for the first time. */
  readonly ready = new Promise<void>((r) => (this.readyResolve = r));
  private connecting?: Promise<void>;

  constructor(private readonly o: BerthRuntimeOptions) {
    for (const e of this.loadRegistry()) this.sessions.set(e.sessionId, { entry: e, seq: 0, queue: [] });
  }

  start(): void {
    this.connecting = this.connectLoop();
  }

  // ── Registry ──────────────────────────────────────────────────────────────
  private loadRegistry(): RegistryEntry[] {
    try {
      const v = JSON.parse(readFileSync(this.o.registryPath, "utf8")) as { sessions?: RegistryEntry[] };
      return Array.isArray(v.sessions) ? v.sessions.filter((e) => typeof e.sessionId === "string" && typeof e.cwd === "string") : [];
    } catch {
      return [];
    }
  }
  /** Durably rewrite the registry (serialized; resolves once this version is on disk). */
  private saveRegistry(): Promise<void> {
    const text = JSON.stringify({ sessions: [...this.sessions.values()].map((s) => s.entry) }) + "\n";
    this.registryWrite = this.registryWrite.catch(() => undefined).then(() => writeFileAtomic(this.o.registryPath, text, { mode: 0o600 }));
    return this.registryWrite;
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
          s.turn?.ctl.abort(); // the host that owns the turn's transcript is gone
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
      runtimeIdle: s.turn === undefined,
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
    switch (f.type) {
      case "provider_registered":
        this.send({ type: "provider_status", ready: true });
        for (const s of this.sessions.values()) this.register(s);
        this.readyResolve();
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
        s.turn?.ctl.abort(); // queued follow-ups still run: each is its own turn
        return this.answer(commandId, true);
      case "confirm_tool": {
        const ok = typeof cmd.toolCallId === "string" && typeof cmd.approved === "boolean" && s.turn?.confirm(cmd.toolCallId, cmd.approved) === true;
        if (!ok) return this.answer(commandId, false, "no pending confirmation for that tool call");
        this.answer(commandId, true);
        void this.emit(s, { type: "tool_confirmation_resolved", toolCallId: cmd.toolCallId, approved: cmd.approved, commandId });
        return;
      }
      case "follow_up": {
        if (typeof cmd.text !== "string" || typeof cmd.id !== "string") return this.answer(commandId, false, "follow_up needs text and id");
        if (s.turn) {
          s.queue.push({ text: cmd.text, pendingId: cmd.id });
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
      const s: LiveSession = { entry: { sessionId, cwd, title: "New Session", requestedSession: uri, creationToken: token }, seq: 0, queue: [] };
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
    s.queue.length = 0;
    s.turn?.ctl.abort();
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
    if (s.turn) return reply(false, "a turn is already running");
    const turn = new BerthTurn(turnId, (ev) => this.emit(s, ev), this.o.approvalPolicy ?? defaultApprovalPolicy);
    s.turn = turn;
    let lease;
    let history: History | null = null;
    try {
      lease = await this.o.manager.beginTurn({ sessionId: s.entry.sessionId, cwd: s.entry.cwd, onCloseRequested: () => turn.ctl.abort() });
      history = await this.o.manager.store.readHistory(s.entry.sessionId, { maxBytes: DEFAULT_WINDOW.maxBytes, maxRecords: DEFAULT_WINDOW.maxRecords });
      if (!history.complete) throw new SessionError("unavailable");
    } catch (e) {
      s.turn = undefined;
      await lease?.end();
      return reply(false, e instanceof SessionError ? `session ${e.code}` : "session unavailable");
    }
    reply(true);
    const first = history.records.every((r) => r.kind !== "user");
    void this.emit(s, { type: "user_message", text, turnId, ...(pendingId !== undefined ? { pendingId } : {}) });
    if (first && s.entry.title === "New Session") {
      s.entry.title = text.split("\n")[0]!.trim().slice(0, 80) || "New Session";
      void this.emit(s, { type: "title_changed", title: s.entry.title });
      void this.saveRegistry().catch(() => undefined);
    }
    const admitted = lease;
    s.done = (async () => {
      let outcome: TurnOutcome;
      try {
        outcome = await this.o.runner.runTurn({
          turnId,
          writer: admitted.writer,
          history,
          cwd: s.entry.cwd,
          prompt: text,
          signal: turn.ctl.signal,
          sink: turn.sink,
          approval: turn.approval,
        });
      } finally {
        await admitted.end();
      }
      const u = outcome.usage;
      await this.emit(s, { type: "usage", inputTokens: u.inputTokens, outputTokens: u.outputTokens, cacheReadTokens: u.cacheReadTokens });
      const settled: Json = { type: "settled", cancelled: outcome.status === "cancelled" };
      if (outcome.status === "failed" || outcome.status === "compaction_required") settled.error = `turn failed (${outcome.reason ?? outcome.status})`;
      await this.emit(s, settled);
    })()
      .catch((e: unknown) => this.o.log(`berth runtime: turn failed: ${String(e)}`))
      .finally(() => {
        s.turn = undefined;
        s.done = undefined;
        const next = s.queue.shift();
        if (next && this.sessions.has(s.entry.sessionId) && !this.closed)
          void this.admitTurn(s, next.text, randomUUID(), next.pendingId, (ok, err) => {
            if (!ok) this.o.log(`berth runtime: a queued follow-up could not start (${err ?? "refused"})`);
          });
      });
  }

  /** Cancel running turns, wait for them, then disconnect. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.sessions.values()) {
      s.queue.length = 0;
      s.turn?.ctl.abort();
    }
    await Promise.all([...this.sessions.values()].flatMap((s) => (s.done ? [s.done] : [])));
    this.sock?.end();
    this.sock?.destroy();
    await this.connecting;
    await this.registryWrite.catch(() => undefined);
    await this.o.runner.close().catch(() => undefined);
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
