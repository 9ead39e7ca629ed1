/**
 * One backend socket connection (protocol v1–v14) and the logical session routes it carries.
 * A connection is either a dedicated session connection (one route) or a provider connection
 * (v3+, with v8 multiplexed routes). Contracts: frames are handled in arrival order; protocol,
 * authority and framing failures answer an `error` frame or close; a closed connection detaches
 * every route it carried (sessions stay, delivered commands become indeterminate).
 */
import { randomUUID } from "node:crypto";
import type { Socket } from "node:net";
import { attachLineReader, encodeFrame, type FrameError } from "../../transport/host-framing.js";
import { CommandIndeterminate, CommandResult, HelloBody, ProviderHello } from "./backend-schema.js";
import { helloGatingError, versionError, zodMessage, type BackendErrorCode } from "./backend-schema.js";
import { clip, inboundViolation } from "./inbound.js";
import type { Json, ProviderInfo, ProviderRoute, SessionModel } from "./model.js";
import { EpochRegistry, LogicalRoute } from "./logical-route.js";
import { BackendOutbox } from "./backend-outbox.js";
import type { HostState } from "./state.js";
import type { BackendServer } from "./backend.js";
import { commandHandled } from "./reconcile.js";
import { applySourceBatch } from "./source-events.js";
import { mcpHub } from "./mcp-channels.js";
import { onEvent } from "./backend-ingress.js";
import { backendViewGone } from "./resource-actions.js";
import { onNotification, onRootAction, providerTelemetry } from "./notifications.js";

const HANDSHAKE_TIMEOUT_MS = 10_000;

export class BackendConn implements ProviderRoute {
  readonly connectionId = randomUUID();
  kind: "unknown" | "session" | "provider" = "unknown";
  version = 0;
  instanceId = "";
  closed = false;
  providers: ProviderInfo[] = [];
  ready: boolean | null = null;
  readyAt: number | null = null;
  source?: { serviceId: string; instanceId: string };
  /** Dedicated session route. */
  route?: LogicalRoute | undefined;
  /** Multiplexed routes by logical ID (the epoch registry, bounded). */
  readonly epochs = new EpochRegistry();
  /** Current multiplexed route per session URI. */
  readonly current = new Map<string, LogicalRoute>();
  private stopReading: () => void = () => {};
  private handshakeTimer?: NodeJS.Timeout;
  private readonly outbox: BackendOutbox;

  constructor(
    readonly socket: Socket,
    readonly server: BackendServer,
  ) {
    // A frame leaves only once the state changes made before it are committed (an ack means durable).
    // A backend that does not read what it is sent is not read either, until it does (backend-outbox.ts).
    const flow = {
      pause: () => socket.pause(),
      resume: () => {
        if (!this.closed) socket.resume();
      },
      overflow: (held: number) =>
        this.fatal("protocol_error", `${held} bytes wait unread for this connection (more than ${16 * server.backlogBound}): the backend stopped reading its socket; read every frame the host sends, then connect again`),
    };
    this.outbox = new BackendOutbox(socket, () => this.state.store.flush(), flow, server.backlogBound);
    this.stopReading = attachLineReader(socket, { onFrame: (f) => this.onFrame(f), onError: (e) => this.onFrameError(e) });
    socket.on("close", () => this.onClose());
    socket.on("error", () => {});
    this.handshakeTimer = setTimeout(() => this.fatal("handshake_required", "no hello within the handshake timeout"), HANDSHAKE_TIMEOUT_MS);
    this.handshakeTimer.unref();
  }

  get state(): HostState {
    return this.server.state;
  }
  /** Bytes handed to this backend's socket and not yet written; whether its frames are not read meanwhile. */
  get unsentBytes(): number {
    return this.outbox.held;
  }
  get readingPaused(): boolean {
    return this.outbox.paused;
  }
  deliver(frame: Json): boolean {
    return this.send(frame);
  }
  send(frame: Json): boolean {
    if (this.closed || this.socket.destroyed) return false;
    let text: string;
    try {
      text = encodeFrame(frame);
    } catch (e) {
      this.server.log(`backend ${this.connectionId}: refusing to send oversize frame: ${String(e)}`);
      return false;
    }
    this.outbox.push(text);
    return true;
  }
  error(code: BackendErrorCode, message: string, extra: Json = {}): void {
    this.send({ type: "error", code, message, ...extra });
  }
  /** Send a terminal error and close. */
  fatal(code: BackendErrorCode, message: string, extra: Json = {}): void {
    if (this.closed) return;
    this.server.log(`backend ${this.connectionId}: closing (${code}): ${message}`);
    this.error(code, message, { fatal: true, ...extra });
    this.closed = true;
    this.stopReading();
    this.outbox.flush(); // the error frame, and all sent before it, precede the end
    this.socket.end();
    setTimeout(() => this.socket.destroy(), 1000).unref();
    this.detachAll();
  }

  private onFrameError(e: FrameError): void {
    if (e.kind === "oversize") this.fatal("frame_too_large", `frame of at least ${e.bytes} bytes exceeds the ${e.limit}-byte limit (including delimiter)`);
    else if (e.kind === "utf8") this.fatal("bad_frame", "frame is not valid UTF-8");
    else if (e.kind === "json") this.fatal("bad_frame", `frame is not valid JSON: ${e.message}`);
    else this.fatal("bad_frame", "frame is not a JSON object");
  }

  private onClose(): void {
    this.closed = true;
    if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
    this.detachAll();
    this.server.conns.delete(this);
  }

  /** Detach every route this connection carries; sessions stay, commands become indeterminate. */
  private detachAll(): void {
    const st = this.state;
    if (this.route) this.detachRoute(this.route, "no");
    for (const r of this.current.values()) this.detachRoute(r, "no");
    this.current.clear();
    if (this.kind === "provider") {
      let changed = false;
      for (const p of this.providers)
        if (st.providers.get(p.id) === this) {
          st.providers.delete(p.id);
          changed = true;
        }
      if (changed) st.publishAgents();
    }
    st.failRoute((r) => r === this || (r instanceof LogicalRoute && r.conn === this));
  }

  /** The route leaves its session (sessions stay, its delivered commands become indeterminate). */
  detachRoute(r: LogicalRoute, reason: LogicalRoute["retired"]): void {
    if (reason !== "no") r.retired = reason;
    const s = this.state.sessions.get(r.sessionUri);
    if (s && s.route === r) {
      s.route = undefined;
      this.state.summaryChanged(s, true);
    }
    this.state.failRoute((x) => x === r);
    mcpHub(this.state).routeGone(r);
    if (s && !s.route) backendViewGone(this.state, s);
  }

  // ── Frames ────────────────────────────────────────────────────────────────
  /**
   * Isolation boundary: a frame is bounds-checked before anything reads it, and a bug while
   * handling it fails this connection (`internal_error`, fatal) — never another connection or
   * the process.
   */
  private onFrame(f: Json): void {
    if (this.closed) return;
    const bad = inboundViolation(f);
    if (bad) return this.fatal("bad_frame", `frame refused: ${bad}`);
    try {
      this.handleFrame(f);
    } catch (e) {
      this.server.log(`backend ${this.connectionId}: internal error handling a ${clip(f.type)} frame: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      this.fatal("internal_error", "the host failed to handle this frame; the connection is closed (the error is in the host log)");
    }
  }

  private handleFrame(f: Json): void {
    const type = f.type;
    if (typeof type !== "string") return this.fatal("protocol_error", "frame has no string type");
    if (this.kind === "unknown") {
      if (type === "hello") return this.onHello(f);
      if (type === "provider_hello") return this.onProviderHello(f);
      if (type === "ping") return void this.send({ type: "pong", ...(f.id !== undefined ? { id: f.id } : {}) });
      return this.fatal("handshake_required", `first frame must be hello or provider_hello, got ${clip(type)}`);
    }
    switch (type) {
      case "ping":
        this.send({ type: "pong", ...(f.id !== undefined ? { id: f.id } : {}) });
        return;
      case "pong":
        return;
      case "event":
      case "chat_event":
        return onEvent(this, f, false);
      case "sequenced_event":
        return onEvent(this, f, true);
      case "command_result":
        return this.onCommandResult(f);
      case "command_indeterminate":
        return this.onCommandIndeterminate(f);
      case "register_session":
        return this.onRegisterSession(f);
      case "unregister_session":
        return this.onUnregisterSession(f);
      case "provider_status":
        return this.onProviderStatus(f);
      case "session_creation_failed":
        return this.onCreationFailed(f);
      case "command_handled":
        return this.onCommandHandled(f);
      case "source_snapshot_batch":
        return this.onSourceBatch(f);
      case "mcp_response":
      case "mcp_notification":
        return mcpHub(this.state).onBackendFrame(this, f);
      case "notification":
        return onNotification(this.state, this, f);
      case "root_action":
        return onRootAction(this.state, this, f);
      case "hello":
      case "provider_hello":
        return this.fatal("protocol_error", `${type} after registration`);
      default:
        return this.error("protocol_error", `unknown frame type ${clip(type)}`);
    }
  }

  private onHello(f: Json): void {
    const verr = versionError(f.protocolVersion);
    if (verr) return this.fatal("unsupported_version", verr, { supportedVersions: [1, 14] });
    const parsed = HelloBody.safeParse(f);
    if (!parsed.success) return this.fatal("validation_error", zodMessage(parsed.error));
    const h = parsed.data;
    const gate = helloGatingError(f, h.protocolVersion);
    if (gate) return this.fatal("validation_error", gate);
    clearTimeout(this.handshakeTimer);
    const res = this.server.register(this, h, false, undefined);
    if ("error" in res) return this.fatal(res.code, res.error);
    this.kind = "session";
    this.version = h.protocolVersion;
    this.instanceId = h.instanceId;
    this.route = res.route;
    this.send({ type: "registered", ...res.payload });
  }

  private onProviderHello(f: Json): void {
    const verr = versionError(f.protocolVersion);
    if (verr) return this.fatal("unsupported_version", verr, { supportedVersions: [3, 14] });
    if ((f.protocolVersion as number) < 3) return this.fatal("unsupported_version", "provider connections require protocol version 3 or later");
    const parsed = ProviderHello.safeParse(f);
    if (!parsed.success) return this.fatal("validation_error", zodMessage(parsed.error));
    const ph = parsed.data;
    if (ph.source && ph.protocolVersion < 9) return this.fatal("validation_error", "source requires protocol version 9");
    if (ph.protocolVersion < 10 && ph.providers.some((p) => p.multipleChats?.managedInvocations))
      return this.fatal("validation_error", "multipleChats.managedInvocations requires protocol version 10");
    const ids = ph.providers.map((p) => p.id);
    if (new Set(ids).size !== ids.length) return this.fatal("validation_error", "provider IDs must be unique");
    if (ph.protocolVersion < 6 && ph.providers.some((p) => p.protectedResources !== undefined)) return this.fatal("validation_error", "protectedResources requires protocol version 6");
    if (ph.protocolVersion < 6 && ph.providers.some((p) => p.multipleWorkingDirectories !== undefined)) return this.fatal("validation_error", "multipleWorkingDirectories requires protocol version 6");
    const telemetryError = providerTelemetry(this.state, this, ph.protocolVersion, f.telemetry);
    if (telemetryError) return this.fatal("validation_error", telemetryError);
    clearTimeout(this.handshakeTimer);
    const st = this.state;
    // A newer registration fences the previous provider-manager connection and every route it carried.
    for (const id of ids) {
      const prev = st.providers.get(id);
      if (prev && prev !== this && prev instanceof BackendConn) prev.fatal("backend_replaced", "a newer provider connection registered the same provider");
    }
    this.kind = "provider";
    this.version = ph.protocolVersion;
    this.instanceId = ph.instanceId;
    if (ph.source) this.source = ph.source;
    this.providers = ph.providers.map((p) => ({
      id: p.id,
      displayName: p.displayName ?? p.id,
      description: p.description ?? "",
      ...(p.multipleChats ? { multipleChats: p.multipleChats } : {}),
      ...(p.protectedResources ? { protectedResources: p.protectedResources } : {}),
      ...(p.multipleWorkingDirectories ? { multipleWorkingDirectories: { immutablePrimary: p.multipleWorkingDirectories.immutablePrimary === true, ...(p.multipleWorkingDirectories.primaryReplacement === true ? { primaryReplacement: true } : {}) } } : {}),
    }));
    for (const id of ids) st.providers.set(id, this);
    st.publishAgents();
    this.send({
      type: "provider_registered",
      protocolVersion: ph.protocolVersion,
      hostId: st.hostId,
      backendConnectionId: this.connectionId,
      providers: ids,
      // v5+: scoped MCP notifications (a logical backendConnectionId on mcp_notification) are supported.
      ...(ph.protocolVersion >= 5 ? { scopedMcp: true } : {}),
    });
  }

  private onRegisterSession(f: Json): void {
    const requestId = f.requestId;
    if (typeof requestId !== "string" || requestId.length === 0 || requestId.length > 512)
      return this.error("validation_error", "register_session needs a string requestId");
    const fail = (code: BackendErrorCode, message: string) => this.error(code, message, { requestId });
    if (this.kind !== "provider") return fail("protocol_error", "register_session is only valid on a provider connection");
    if (this.version < 8) return fail("unsupported_version", "register_session requires protocol version 8");
    const hello = f.hello as Json | undefined;
    if (!hello || typeof hello !== "object") return fail("validation_error", "register_session needs a hello object");
    const verr = versionError(hello.protocolVersion);
    if (verr) return fail("unsupported_version", verr);
    if ((hello.protocolVersion as number) > this.version)
      return fail("unsupported_version", `a multiplexed session cannot use protocol ${String(hello.protocolVersion)} above its provider connection's ${this.version}`);
    const parsed = HelloBody.safeParse(hello);
    if (!parsed.success) return fail("validation_error", zodMessage(parsed.error));
    const gate = helloGatingError(hello, parsed.data.protocolVersion);
    if (gate) return fail("validation_error", gate);
    if (!this.providers.some((p) => p.id === parsed.data.provider)) return fail("authority_error", `provider ${clip(parsed.data.provider)} is not carried by this connection`);
    const res = this.server.register(this, parsed.data, true, undefined);
    if ("error" in res) return fail(res.code, res.error);
    this.send({ type: "session_registered", requestId, ...res.payload, registration: res.payload });
  }

  private onUnregisterSession(f: Json): void {
    const requestId = f.requestId;
    if (typeof requestId !== "string") return this.error("validation_error", "unregister_session needs a string requestId");
    const fail = (code: BackendErrorCode, message: string) => this.error(code, message, { requestId });
    if (this.kind !== "provider") return fail("protocol_error", "unregister_session is only valid on a provider connection");
    let r: LogicalRoute | undefined;
    if (typeof f.backendConnectionId === "string") r = this.epochs.get(f.backendConnectionId);
    else if (typeof f.session === "string") r = this.current.get(f.session);
    if (!r || r.retired !== "no" || this.current.get(r.sessionUri) !== r) return fail("unknown_session", "no current route for that session on this connection");
    this.current.delete(r.sessionUri);
    this.detachRoute(r, "unregistered");
    this.send({ type: "session_unregistered", requestId, session: r.sessionUri, backendConnectionId: r.logicalId });
  }

  private onProviderStatus(f: Json): void {
    if (this.kind !== "provider") return this.error("protocol_error", "provider_status is only valid on a provider connection");
    if (this.version < 9) return this.error("unsupported_version", "provider_status requires protocol version 9");
    if (typeof f.ready !== "boolean") return this.error("validation_error", "provider_status.ready must be a boolean");
    this.ready = f.ready;
    this.readyAt = performance.now();
  }

  private onCreationFailed(f: Json): void {
    if (this.kind !== "provider") return this.error("protocol_error", "session_creation_failed is only valid on a provider connection");
    const { session, creationToken } = f;
    if (typeof session !== "string" || typeof creationToken !== "string") return this.error("validation_error", "session_creation_failed needs session and creationToken");
    const st = this.state;
    const res = st.creations.get(session);
    if (!res || !this.providers.some((p) => p.id === res.provider)) return this.error("creation_claim_invalid", "no pending creation for that session on this connection");
    if (st.checkClaim(session, creationToken, res.provider) !== "ok") return this.error("creation_claim_invalid", "creation token does not match");
    st.dropCreation(session);
    const message = typeof f.error === "string" ? f.error.slice(0, 4096) : "session creation failed";
    const s = st.sessions.get(session);
    if (s) st.markCreationFailed(s, message);
  }

  private onCommandResult(f: Json): void {
    const p = CommandResult.safeParse(f);
    if (!p.success) return this.error("validation_error", zodMessage(p.error));
    const o = p.data.accepted ? ({ kind: "accepted" } as const) : ({ kind: "rejected", error: p.data.error ?? "rejected by backend" } as const);
    // Unknown or foreign IDs are ignored: a result only settles a command delivered on this connection.
    this.state.settle(p.data.commandId, o, (r) => r === this || (r instanceof LogicalRoute && r.conn === this));
  }

  private onCommandIndeterminate(f: Json): void {
    if (this.version < 9) return this.error("unsupported_version", "command_indeterminate requires protocol version 9");
    const p = CommandIndeterminate.safeParse(f);
    if (!p.success) return this.error("validation_error", zodMessage(p.error));
    this.state.settle(p.data.commandId, { kind: "indeterminate", error: p.data.error ?? "indeterminate" }, (r) => r === this || (r instanceof LogicalRoute && r.conn === this));
  }

  /** The current route this connection holds for `f.session` (by `backendConnectionId` when given). */
  private currentRoute(f: Json): { route: LogicalRoute; session: SessionModel } | string {
    const uri = f.session;
    if (typeof uri !== "string") return "frame needs a session URI";
    const r = this.kind === "session" ? this.route : typeof f.backendConnectionId === "string" ? this.epochs.get(f.backendConnectionId) : this.current.get(uri);
    const s = this.state.sessions.get(uri);
    if (!r || r.sessionUri !== uri || r.retired !== "no" || !s || s.route !== r) return "no current route for that session on this connection";
    return { route: r, session: s };
  }

  private onCommandHandled(f: Json): void {
    const cur = this.currentRoute(f);
    const err = typeof cur === "string" ? cur : commandHandled(this.state, cur.route, cur.session, f);
    if (err) this.error("validation_error", `command_handled refused: ${err}`, { commandId: typeof f.commandId === "string" ? f.commandId.slice(0, 512) : null });
  }

  /**
   * v12 batches follow the epoch rules of sequenced events (a stale, retired or foreign ID: mismatch; none after a
   * re-registration: required), so an old epoch's queued batch never reaches its replacement; neither retires a route.
   */
  private onSourceBatch(f: Json): void {
    const batchId = typeof f.batchId === "string" ? f.batchId.slice(0, 512) : null;
    const session = f.session;
    const supplied = f.backendConnectionId;
    if (typeof session === "string" && typeof supplied === "string") {
      const r = this.kind === "session" ? this.route : this.epochs.get(supplied);
      const current = this.kind === "session" || this.current.get(session) === r;
      if (!r || r.logicalId !== supplied || r.sessionUri !== session || r.retired !== "no" || !current)
        return void this.send({ type: "event_epoch_mismatch", session, batchId, backendConnectionId: supplied });
    } else if (typeof session === "string" && this.kind === "provider" && this.current.get(session)?.requireId) {
      return void this.send({ type: "event_epoch_required", session, batchId });
    }
    const cur = this.currentRoute(f);
    if (typeof cur === "string") return this.error("authority_error", cur, { batchId });
    this.send(applySourceBatch(this.state, cur.route, cur.session, f));
  }

  /** Acknowledges one event: the outbox's prebuilt text, or the general path for very long identifiers. */
  sendAck(session: string, sequence: number, logicalId: string): void {
    if (this.closed || this.socket.destroyed) return;
    if (!this.outbox.pushAck(session, sequence, logicalId)) this.send({ type: "event_ack", session, sequence, backendConnectionId: logicalId });
  }
}
