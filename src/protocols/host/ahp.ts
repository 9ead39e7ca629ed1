/**
 * AHP side of the host: JSON-RPC 2.0 over WebSocket (one message per text frame). This module
 * owns the connection, negotiation, subscriptions and reconnect; backend-routed requests are in
 * ahp-requests.ts and client-dispatched actions in ahp-actions.ts.
 */
import type { WebSocket } from "ws";
import { randomUUID } from "node:crypto";
import { JsonRpcConnection } from "../../transport/jsonrpc.js";
import { ErrorCodes, ROOT } from "./ahp-constants.js";
import { InitializeParams, ReconnectParams, dispatchActionParamsError, initializeParamsError, reconnectParamsError } from "./ahp-params.js";
import { SERVER_PREFERRED_VERSION, SUPPORTED_AHP_BASELINES, actionKnownTo, negotiateVersion } from "./ahp-version.js";
import { shapeSnapshot } from "./customization-toggles.js";
import { gateChatSnapshot } from "./chat-09.js";
import { RpcError, createChat, createSession, disposeChat, disposeSession, fetchTurns, listSessions } from "./ahp-requests.js";
import { dispatchClientAction } from "./ahp-actions.js";
import { clip, textNestingViolation } from "./inbound.js";
import type { Json, Subscriber } from "./model.js";
import type { HostState } from "./state.js";
import { mcpHub, type McpPort } from "./mcp-channels.js";
import { dispatchOutcome } from "./mcp-lifecycle.js";
import { managedReceipt } from "./managed-receipts.js";
import { authContext, authenticate } from "./auth-review.js";
import { initializeTelemetry, isOtlpChannel, registerProgress } from "./notifications.js";
import { invokeChangesetOperation } from "./resources.js";
import { clientConnectionClosed, clientUnsubscribed } from "./client-tools.js";
import { wsText } from "../../transport/ws-text.js";
import { ClientBudget, ClientOutbox, textFrame } from "./client-outbox.js";
import { removedSince } from "./channel-removals.js";
import { unknownChannel } from "./channel-refusals.js";
import type { Socket as NetSocket } from "node:net";

/**
 * The methods AHP defines as requests (its `CommandMap`) that this host serves. Each is answered, and what most of
 * them do reaches the client only in that answer (a snapshot, a negotiated version, a failure), so one sent as a
 * notification is not run: it is refused with an id-null -32600 instead.
 */
const REQUEST_ONLY: ReadonlySet<string> = new Set([
  "ping",
  "initialize",
  "reconnect",
  "subscribe",
  "listSessions",
  "createSession",
  "disposeSession",
  "createChat",
  "disposeChat",
  "fetchTurns",
  "authenticate",
  "invokeChangesetOperation",
  "paratenic/dispatchOutcome",
  "paratenic/authContext",
]);

/** Longest error message sent to a client. */
const MAX_ERROR_MESSAGE = 512;
/** Bytes that may wait unsent for one AHP client before it is disconnected. */
export const MAX_CLIENT_BACKLOG = 32 * 1024 * 1024;
/** Close reasons (at most 123 bytes each) of a client dropped for falling behind, alone or daemon-wide. */
export const BEHIND_REASON = "this client fell more than 32 MiB behind (it stopped reading): reconnect and resubscribe to resume";
export const BUDGET_REASON = "the host's send buffers are full and this client was furthest behind: reconnect and resubscribe";

/**
 * How many clients' negotiated versions the host remembers (the newest), in memory: `reconnect`
 * on a new transport carries no version, and must be answered in the one the client negotiated.
 */
export const REMEMBERED_CLIENT_VERSIONS = 4096;
const clientVersions = new WeakMap<HostState, Map<string, string>>();

function rememberVersion(st: HostState, clientId: string, version: string): void {
  let m = clientVersions.get(st);
  if (!m) clientVersions.set(st, (m = new Map<string, string>()));
  m.delete(clientId); // re-inserted as the newest
  m.set(clientId, version);
  if (m.size > REMEMBERED_CLIENT_VERSIONS) m.delete(m.keys().next().value!);
}

export class AhpConnection implements Subscriber {
  clientId = "";
  version: string | null = null;
  readonly channels = new Set<string>();
  private closed = false;

  /** Everything sent to this client waits here (client-outbox.ts); its bytes count against the daemon-wide budget. */
  private readonly outbox: ClientOutbox;

  constructor(
    readonly ws: WebSocket,
    readonly state: HostState,
    readonly log: (m: string) => void,
    budget: ClientBudget = new ClientBudget(),
  ) {
    this.outbox = new ClientOutbox(this.rawSocket()!, budget, {
      queued: () => this.checkBacklog(),
      drained: () => {
        if (this.holding) this.release();
      },
      overBudget: () => this.disconnect(1013, BUDGET_REASON, `the daemon-wide bound of ${budget.bound} unsent bytes was reached`),
    });
    ws.on("message", (data, isBinary) => {
      if (this.holding) this.inbox.push({ data, isBinary });
      else this.take(data, isBinary);
    });
    ws.on("close", () => {
      this.onClose();
      this.outbox.detach();
    });
    ws.on("error", () => {});
    // A peer ending its side (FIN) with no close frame is gone: ws would wait for it to read what its socket holds, and
    // one that never reads kept its subscriptions, its bytes in the budget and the daemon's shutdown waiting for ever.
    const raw = this.rawSocket();
    raw?.once("end", () => void (!(ws as unknown as { _closeFrameReceived: boolean })._closeFrameReceived && raw.destroy()));
  }

  private rawSocket(): NetSocket | undefined {
    return (this.ws as unknown as { _socket?: NetSocket })._socket;
  }

  /** Bytes waiting to be written to this client (queued here, or in its socket's buffer). */
  get unsentBytes(): number {
    return this.outbox.held;
  }

  private take(data: WebSocket.RawData, isBinary: boolean): void {
    if (isBinary) return this.sendJson({ jsonrpc: "2.0", id: null, error: { code: ErrorCodes.InvalidRequest, message: "binary frames are not AHP messages: send each JSON-RPC message as one text frame" } });
    this.onMessage(wsText(data)).catch((e: unknown) => this.failInternal("message", e));
  }

  /**
   * Backpressure on requests: while more than MAX_CLIENT_BACKLOG bytes wait for the client, the host reads no more of
   * its messages (the socket is paused); the few already received wait here, in order, and are handled once the
   * backlog has drained. A client asking faster than it reads (a `subscribe` or `reconnect` storm) thus holds at most
   * the bound plus one answer and one socket read of requests, and is served in full once it reads.
   */
  private holding = false;
  private readonly inbox: { data: WebSocket.RawData; isBinary: boolean }[] = [];
  /** Messages received and not handled yet, held until the backlog drains (for inspection and tests). */
  get heldMessages(): number {
    return this.inbox.length;
  }
  private hold(): void {
    const raw = this.rawSocket();
    if (this.holding || this.closed || !raw || raw.destroyed) return;
    this.holding = true;
    this.ws.pause();
  }
  private readonly release = (): void => {
    this.holding = false;
    if (this.closed) return void this.inbox.splice(0);
    this.ws.resume();
    while (!this.holding && !this.closed && this.inbox.length > 0) {
      const m = this.inbox.shift()!;
      this.take(m.data, m.isBinary);
    }
  };

  /**
   * Bytes of answers (snapshots, replays) queued since the backlog was last under the bound, counted up to the bound
   * or the largest of those answers, whichever is more: one answer of any size fits, but a client that keeps asking
   * (a `subscribe` storm) without reading does not buy itself unbounded memory.
   */
  private replyAllowance = 0;
  private largestReply = 0;
  /** Send the answer to one of the client's own requests. */
  private sendReply(text: string): void {
    const n = text.length < 4096 ? text.length * 3 : Buffer.byteLength(text);
    this.largestReply = Math.max(this.largestReply, n);
    this.replyAllowance = Math.min(this.replyAllowance + n, Math.max(MAX_CLIENT_BACKLOG, this.largestReply));
    this.sendRaw(text);
  }
  sendRaw(text: string): void {
    if (this.closed || this.ws.readyState !== 1) return;
    this.outbox.send(textFrame(text)); // after the fanned-out envelopes queued earlier; checks the bounds
  }
  /**
   * A client that stops reading is disconnected once MAX_CLIENT_BACKLOG bytes wait for it: its
   * buffered frames are dropped at once (it can `reconnect` and replay or re-snapshot). Answers
   * the client asked for (a large snapshot or replay) do not count against it: they raise the
   * allowance (see `replyAllowance`) until the backlog is back under the bound.
   */
  private checkBacklog(): void {
    if (this.closed) return;
    const b = this.outbox.held;
    if (b <= MAX_CLIENT_BACKLOG) {
      this.replyAllowance = 0;
      this.largestReply = 0;
      return;
    }
    this.hold();
    if (b <= MAX_CLIENT_BACKLOG + this.replyAllowance) return;
    this.disconnect(1008, BEHIND_REASON, `it fell ${b} bytes behind`);
  }

  /**
   * Drop a client that fell behind: what waits for it is freed at once, its subscriptions end, and the close frame
   * (code and reason) follows the few complete frames its socket already holds, so a client that reads again sees
   * why. It can `reconnect` (a replay or snapshots): nothing durable is lost.
   */
  private disconnect(code: number, reason: string, why: string): void {
    if (this.closed) return;
    this.log(`ahp: disconnecting client ${clip(this.clientId)}: ${why}`);
    this.outbox.drop();
    this.onClose();
    try {
      this.ws.close(code, reason);
    } catch {
      this.ws.terminate();
    }
  }

  /** Hand everything queued for this client to its socket now (before a close frame, say). */
  flushFrames(): void {
    this.outbox.flushAll();
  }
  queueFrame(tape: Buffer, start: number, end: number): void {
    if (this.closed || this.ws.readyState !== 1) return;
    this.outbox.queueFrame(tape, start, end);
  }
  private sendJson(msg: unknown): void {
    this.sendRaw(JSON.stringify(msg));
  }
  /** Only actions known to the negotiated protocol version are sent (upstream versioning rule). */
  accepts(actionType: string): boolean {
    const v = this.version;
    if (v === null) return true;
    // Asked once per delivery; a burst repeats one action type, so the last answer is kept.
    if (actionType === this.lastKey && v === this.lastVersion) return this.lastKnown;
    this.lastKey = actionType;
    this.lastVersion = v;
    return (this.lastKnown = actionKnownTo(actionType, v));
  }
  private lastKey = "";
  private lastVersion = "";
  private lastKnown = false;

  /** This connection's side of the MCP channels (mcp-channels.ts). */
  private readonly mcp: McpPort = { send: (text) => this.sendRaw(text), initialized: () => this.version !== null };

  private onClose(): void {
    if (!this.closed) mcpHub(this.state).portClosed(this.mcp);
    this.closed = true;
    this.inbox.splice(0);
    // A held client's socket is read again: the close handshake needs its close frame (else ws waits 30 s for it).
    if (this.holding) {
      this.holding = false;
      this.ws.resume();
    }
    this.rpc.close();
    for (const c of this.channels) this.state.unsubscribe(c, this);
    this.channels.clear();
    clientConnectionClosed(this.state, this); // its active-client entries leave; their running calls fail
  }

  /** A bug while handling this connection's message: log it, and close only this connection. */
  private failInternal(where: string, e: unknown): void {
    this.log(`ahp: internal error in ${clip(where)}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    this.close(1011, "internal error");
  }

  /** Close this connection (idempotent); its subscriptions end at once. */
  close(code: number, reason: string): void {
    if (this.closed) return;
    this.flushFrames();
    this.onClose();
    try {
      this.ws.close(code, reason);
    } catch {
      this.ws.terminate();
    }
  }

  /**
   * JSON-RPC envelope handling (transport/jsonrpc.ts); AHP errors (`RpcError`) keep their codes,
   * with messages cut at MAX_ERROR_MESSAGE. Any other error is a bug: the request is answered
   * -32603 and then this connection (only) is closed.
   */
  private readonly rpc = new JsonRpcConnection((text) => this.sendReply(text), {
    // A synchronous method (initialize, reconnect, subscribe) is answered in the same step that
    // took its snapshot or replay and registered the subscription. Awaiting first would let an
    // envelope published meanwhile (a pipelined dispatchAction in the same segment) reach the
    // client ahead of the answer that it follows in serverSeq order.
    onRequest: (method, params, notification) => (notification ? this.dispatchNotification(method, params) : this.dispatch(method, params, false)),
    errorOf: (e, method) => {
      if (e instanceof RpcError) {
        if (e.code === ErrorCodes.UnsupportedProtocolVersion) setTimeout(() => this.close(1002, "unsupported protocol version"), 10).unref();
        const message = e.message.length > MAX_ERROR_MESSAGE ? `${e.message.slice(0, MAX_ERROR_MESSAGE - 1)}…` : e.message;
        return { code: e.code, message, ...(e.data !== undefined ? { data: e.data } : {}) };
      }
      setImmediate(() => this.failInternal(method, e)); // after the answer below is written
      return { code: ErrorCodes.InternalError, message: "internal error; the connection is closed (reconnect to continue)" };
    },
  });

  /**
   * A notification gets no answer, so a bug while handling one (anything but an `RpcError`) would
   * vanish: it is logged and closes this connection, like a bug in a request.
   */
  private dispatchNotification(method: string, params: Json): unknown {
    if (REQUEST_ONLY.has(method)) {
      const message = `${clip(method)} is a request: send it with an id (sent as a notification it was not run, as its answer could not be sent)`;
      this.sendJson({ jsonrpc: "2.0", id: null, error: { code: ErrorCodes.InvalidRequest, message } });
      return null;
    }
    // AHP's own notifications before initialize are refused the same way (an unknown one is dropped, as JSON-RPC asks).
    if (!this.version && (method === "dispatchAction" || method === "unsubscribe")) {
      const message = `${notInitialized(method)} (sent as a notification, it was dropped)`;
      this.sendJson({ jsonrpc: "2.0", id: null, error: { code: ErrorCodes.InvalidRequest, message } });
      return null;
    }
    const bug = (e: unknown) => {
      if (!(e instanceof RpcError)) this.failInternal(method, e);
    };
    try {
      const out = this.dispatch(method, params, true);
      return out instanceof Promise ? out.catch(bug) : out;
    } catch (e) {
      bug(e);
      return null;
    }
  }

  /** Nesting is bounded before the message is parsed at all (a fixed refusal, id null). */
  private onMessage(text: string): Promise<void> {
    const bad = textNestingViolation(text);
    if (bad) {
      this.sendJson({ jsonrpc: "2.0", id: null, error: { code: ErrorCodes.InvalidRequest, message: `message refused: ${bad}` } });
      return Promise.resolve();
    }
    // MCP side-channel traffic carries a top-level `mcp://` channel (mcp-channels.ts).
    if (text.includes('"mcp://') && mcpHub(this.state).tryClientMessage(this.mcp, text)) return Promise.resolve();
    return this.rpc.receive(text);
  }

  private requireInit(method: string): void {
    if (!this.version) throw new RpcError(ErrorCodes.InvalidRequest, notInitialized(method));
  }

  /** Handle one request: a value for synchronous methods, a promise for backend-routed ones. */
  private dispatch(method: string, params: Json, notification: boolean): unknown {
    if (method === "ping") return null;
    if (method === "initialize") return this.initialize(params);
    if (method === "reconnect") return this.reconnect(params);
    this.requireInit(method);
    switch (method) {
      case "subscribe":
        return this.subscribe(params);
      case "unsubscribe":
        if (typeof params.channel === "string") this.unsub(params.channel);
        return null;
      case "dispatchAction": {
        // AHP's notification; sent as a request it is answered, so params it cannot read are refused by name.
        const why = notification ? null : dispatchActionParamsError(params);
        if (why !== null) throw new RpcError(ErrorCodes.InvalidParams, why);
        dispatchClientAction(this.state, this.clientId, params, this);
        return null;
      }
      case "listSessions":
        return listSessions(this.state);
      case "createSession":
        registerProgress(this.state, params, this);
        return createSession(this.state, params);
      case "disposeSession":
        return disposeSession(this.state, params);
      case "createChat":
        return createChat(this.state, params);
      case "disposeChat":
        return disposeChat(this.state, params);
      case "fetchTurns":
        return fetchTurns(this.state, params);
      case "paratenic/dispatchOutcome":
        return managedReceipt(this.state, this.clientId, params) ?? dispatchOutcome(this.state, this.clientId, params);
      case "paratenic/authContext":
        return authContext(this.state, params);
      case "authenticate":
        return authenticate(this.state, params);
      case "invokeChangesetOperation":
        return invokeChangesetOperation(this.state, params);
      default:
        if (notification) return null;
        throw new RpcError(ErrorCodes.MethodNotFound, `unknown method ${clip(method)}`);
    }
  }

  private initialize(params: Json): Json {
    if (this.version)
      throw new RpcError(
        ErrorCodes.InvalidRequest,
        `initialize: this connection is already initialized (protocol ${this.version}, client ${clip(this.clientId)}); initialize is sent once per connection: open a new connection to initialize again`,
      );
    const p = InitializeParams.safeParse(params);
    if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, initializeParamsError(params));
    const v = negotiateVersion(p.data.protocolVersions);
    if (!v) throw new RpcError(ErrorCodes.UnsupportedProtocolVersion, unsupportedVersions(p.data.protocolVersions), { supportedVersions: SUPPORTED_AHP_BASELINES });
    this.version = v;
    this.clientId = p.data.clientId;
    rememberVersion(this.state, this.clientId, v);
    const snapshots: Json[] = [];
    // A snapshot for each state-bearing channel there is; a stream is subscribed with none (AHP). A channel the host
    // does not have is neither: the answer's snapshots name what was subscribed (`subscribe` to one says why not).
    // Each channel once, in the order asked (like `reconnect`): a list naming one large chat 10,000 times would
    // otherwise build 10,000 copies of its snapshot into one answer.
    for (const uri of new Set(p.data.initialSubscriptions ?? [])) {
      if (isOtlpChannel(uri)) {
        this.sub(uri);
        continue;
      }
      const snap = this.snapshotFor(uri);
      if (!snap) continue;
      this.sub(uri);
      snapshots.push(snap);
    }
    const telemetry = initializeTelemetry(this.state);
    return { protocolVersion: v, serverSeq: this.state.serverSeq, serverInfo: { name: "berth", version: "0.1.0" }, snapshots, ...(telemetry ? { telemetry } : {}) };
  }

  private reconnect(params: Json): Json {
    const p = ReconnectParams.safeParse(params);
    if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, reconnectParamsError(params));
    // `clientId` identifies the connection (AHP: "an opaque per-connection identifier used for
    // reconnection"): once set, by `initialize` or a bare `reconnect`, it is never switched, or
    // this connection would speak (origins, active-client entries, version) for another client.
    if (this.version && p.data.clientId !== this.clientId)
      throw new RpcError(ErrorCodes.InvalidParams, `this connection already belongs to client ${clip(this.clientId)}; open a new connection to reconnect as client ${clip(p.data.clientId)}`);
    // A new transport: the version this client negotiated before (a client the host does not
    // remember, after a restart or past the bound, is answered in the preferred version).
    if (!this.version) this.version = clientVersions.get(this.state)?.get(p.data.clientId) ?? SERVER_PREFERRED_VERSION;
    this.clientId = p.data.clientId;
    rememberVersion(this.state, this.clientId, this.version);
    // Each requested channel once, in the order asked: `missing` (replay) lists the ones that cannot be resumed; a
    // snapshot answer reports them the only way AHP's snapshot result can, by holding no snapshot for them.
    const asked = [...new Set(p.data.subscriptions)];
    // A stateless stream (an `ahp-otlp://` channel) is simply re-subscribed: it has no snapshot
    // and nothing is replayed (AHP lifecycle: "missed messages are dropped").
    const resumable = (u: string) => this.state.channelExists(u) || isOtlpChannel(u);
    const live = asked.filter(resumable);
    const missing = asked.filter((u) => !resumable(u));
    // A session or chat removed after what the client saw, and there again (its URI came back), is not the one the
    // client holds: a replay would be applied to the earlier one's state, so the answer is snapshots.
    const since = p.data.lastSeenServerSeq;
    const reborn = live.some((u) => removedSince(this.state, u, since));
    const replay = reborn ? null : this.state.replaySince(since, new Set(live), (k) => this.accepts(k));
    for (const u of live) this.sub(u);
    if (replay === null || p.data.lastSeenServerSeq > this.state.serverSeq) {
      return { type: "snapshot", snapshots: live.filter((u) => !isOtlpChannel(u)).map((u) => this.snapshotFor(u)!) };
    }
    return { type: "replay", actions: replay.filter((e) => this.accepts(e.action.type as string)), missing };
  }

  /** A channel's snapshot in the shapes this connection's negotiated version defines. */
  private snapshotFor(uri: string): Json | undefined {
    return gateChatSnapshot(this.state, shapeSnapshot(this.state, this.state.snapshot(uri), this.version), this.version);
  }

  private sub(uri: string): void {
    this.channels.add(uri);
    this.state.subscribe(uri, this);
  }
  /** The channel was removed: this connection no longer holds it (a later `unsubscribe` of it changes nothing). */
  channelRemoved(uri: string): void {
    this.channels.delete(uri);
  }
  /** Release a channel this connection holds; one it does not hold (never subscribed, or unknown) changes nothing. */
  private unsub(uri: string): void {
    if (!this.channels.has(uri)) return;
    this.channels.delete(uri);
    this.state.unsubscribe(uri, this);
    clientUnsubscribed(this.state, this, uri);
  }

  private subscribe(params: Json): Json {
    const uri = params.channel;
    if (typeof uri !== "string") throw new RpcError(ErrorCodes.InvalidParams, "subscribe needs a channel");
    if (isOtlpChannel(uri)) {
      this.sub(uri); // a stream: no snapshot
      return {};
    }
    const snap = this.snapshotFor(uri);
    if (!snap) throw new RpcError(ErrorCodes.NotFound, unknownChannel(this.state, uri));
    this.sub(uri); // snapshot and registration in one synchronous step: nothing can interleave
    return { snapshot: snap };
  }
}

/** Why a method other than `ping`, `initialize` or `reconnect` is refused on a connection not initialized yet. */
function notInitialized(method: string): string {
  return `${clip(method)} needs an initialized connection: send initialize (or reconnect, to resume an earlier connection) first`;
}

/** The -32005 message: what was offered (clipped), what this host speaks, and what to offer. */
function unsupportedVersions(offered: string[]): string {
  return `initialize: none of the offered protocol versions ${clip(offered)} is one this host speaks (MAJOR.MINOR.PATCH within ${SUPPORTED_AHP_BASELINES.join(" or ")}, listed in data.supportedVersions); offer one of them, e.g. "${SERVER_PREFERRED_VERSION}"`;
}

export function newClientId(): string {
  return randomUUID();
}
export { ROOT };
