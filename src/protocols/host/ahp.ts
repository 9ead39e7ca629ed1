/**
 * AHP side of the host: JSON-RPC 2.0 over WebSocket (one message per text frame).
 */
import type { WebSocket } from "ws";
import { randomUUID } from "node:crypto";
import {
  CreateSessionParams,
  DispatchActionParams,
  ErrorCodes,
  InitializeParams,
  JsonRpcRequestIn,
  ROOT,
  ReconnectParams,
  SUPPORTED_AHP_BASELINES,
  negotiateVersion,
} from "./ahp-schema.js";
import { findTool, type CommandOutcome, type Origin, type SessionModel, type Subscriber } from "./model.js";
import type { HostState } from "./state.js";

type Json = Record<string, unknown>;
class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** Action types introduced after the 0.9 line; never sent to a 0.9.x client. */
const NOT_IN_0_9 = new Set(["chat/turnsLoaded", "session/inputNeededSet", "session/inputNeededRemoved"]);

export class AhpConnection implements Subscriber {
  clientId = "";
  version: string | null = null;
  private v09 = false;
  readonly channels = new Set<string>();
  private closed = false;

  constructor(
    readonly ws: WebSocket,
    readonly state: HostState,
    readonly log: (m: string) => void,
  ) {
    ws.on("message", (data, isBinary) => {
      if (isBinary) return this.sendJson({ jsonrpc: "2.0", id: null, error: { code: ErrorCodes.InvalidRequest, message: "binary frames are not AHP messages" } });
      void this.onMessage(data.toString());
    });
    ws.on("close", () => this.onClose());
    ws.on("error", () => {});
  }

  private corked = false;
  sendRaw(text: string): void {
    if (this.closed || this.ws.readyState !== 1) return;
    // Batch bursts of small frames into one writev per event-loop turn.
    const raw = (this.ws as unknown as { _socket?: import("node:net").Socket })._socket;
    if (raw && !this.corked) {
      this.corked = true;
      raw.cork();
      setImmediate(() => {
        this.corked = false;
        raw.uncork();
      });
    }
    this.ws.send(text);
  }
  /** Write a pre-framed text frame straight to the socket (ordering is preserved: ws writes synchronously). */
  sendFrame(frame: Buffer, text: string): void {
    if (this.closed || this.ws.readyState !== 1) return;
    const raw = (this.ws as unknown as { _socket?: import("node:net").Socket })._socket;
    if (!raw || raw.destroyed) return this.sendRaw(text);
    if (!this.corked) {
      this.corked = true;
      raw.cork();
      setImmediate(() => {
        this.corked = false;
        raw.uncork();
      });
    }
    raw.write(frame);
  }
  private sendJson(msg: unknown): void {
    this.sendRaw(JSON.stringify(msg));
  }
  accepts(actionType: string): boolean {
    return !(this.v09 && NOT_IN_0_9.has(actionType));
  }

  private onClose(): void {
    this.closed = true;
    for (const c of this.channels) this.state.unsubscribe(c, this);
    this.channels.clear();
  }

  private async onMessage(text: string): Promise<void> {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return this.sendJson({ jsonrpc: "2.0", id: null, error: { code: ErrorCodes.ParseError, message: "parse error" } });
    }
    const p = JsonRpcRequestIn.safeParse(msg);
    if (!p.success) {
      const id = msg && typeof msg === "object" && "id" in msg ? (msg as Json).id : null;
      return this.sendJson({ jsonrpc: "2.0", id: id ?? null, error: { code: ErrorCodes.InvalidRequest, message: "invalid JSON-RPC message" } });
    }
    const { id, method } = p.data;
    const params = (p.data.params ?? {}) as Json;
    try {
      const result = await this.dispatch(method, params, id === undefined);
      if (id !== undefined) this.sendJson({ jsonrpc: "2.0", id, result: result ?? null });
    } catch (e) {
      if (id === undefined) return;
      if (e instanceof RpcError) {
        const err: Json = { code: e.code, message: e.message };
        if (e.data !== undefined) err.data = e.data;
        this.sendJson({ jsonrpc: "2.0", id, error: err });
        if (e.code === ErrorCodes.UnsupportedProtocolVersion) setTimeout(() => this.ws.close(1002, "unsupported protocol version"), 10).unref();
      } else {
        this.log(`ahp: internal error in ${method}: ${String(e)}`);
        this.sendJson({ jsonrpc: "2.0", id, error: { code: ErrorCodes.InternalError, message: "internal error" } });
      }
    }
  }

  private requireInit(): void {
    if (!this.version) throw new RpcError(ErrorCodes.InvalidRequest, "initialize must be the first request");
  }

  private async dispatch(method: string, params: Json, notification: boolean): Promise<unknown> {
    if (method === "ping") return null;
    if (method === "initialize") return this.initialize(params);
    if (method === "reconnect") return this.reconnect(params);
    this.requireInit();
    switch (method) {
      case "subscribe":
        return this.subscribe(params);
      case "unsubscribe":
        if (typeof params.channel === "string") this.unsub(params.channel);
        return null;
      case "dispatchAction":
        this.dispatchAction(params);
        return null;
      case "listSessions":
        return this.listSessions();
      case "createSession":
        return this.createSession(params);
      case "disposeSession":
        return this.disposeSession(params);
      case "fetchTurns":
        return this.fetchTurns(params);
      default:
        if (notification) return null;
        throw new RpcError(ErrorCodes.MethodNotFound, `unknown method ${method}`);
    }
  }

  private initialize(params: Json): Json {
    if (this.version) throw new RpcError(ErrorCodes.InvalidRequest, "already initialized");
    const p = InitializeParams.safeParse(params);
    if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, "invalid initialize params");
    const v = negotiateVersion(p.data.protocolVersions);
    if (!v) throw new RpcError(ErrorCodes.UnsupportedProtocolVersion, "no mutually supported protocol version", { supportedVersions: SUPPORTED_AHP_BASELINES });
    this.version = v;
    this.v09 = v.startsWith("0.");
    this.clientId = p.data.clientId;
    const snapshots: Json[] = [];
    for (const uri of p.data.initialSubscriptions ?? []) {
      const snap = this.state.snapshot(uri);
      if (!snap) continue;
      this.sub(uri);
      snapshots.push(snap);
    }
    return { protocolVersion: v, serverSeq: this.state.serverSeq, serverInfo: { name: "berth", version: "0.1.0" }, snapshots };
  }

  private reconnect(params: Json): Json {
    const p = ReconnectParams.safeParse(params);
    if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, "invalid reconnect params");
    if (!this.version) {
      this.version = "1.0.0";
    }
    this.clientId = p.data.clientId;
    const live = p.data.subscriptions.filter((u) => this.state.channelExists(u));
    const missing = p.data.subscriptions.filter((u) => !this.state.channelExists(u));
    const replay = this.state.replaySince(p.data.lastSeenServerSeq, new Set(live));
    for (const u of live) this.sub(u);
    if (replay === null || p.data.lastSeenServerSeq > this.state.serverSeq) {
      return { type: "snapshot", snapshots: live.map((u) => this.state.snapshot(u)!) };
    }
    return { type: "replay", actions: replay.filter((e) => this.accepts(e.action.type as string)), missing };
  }

  private sub(uri: string): void {
    this.channels.add(uri);
    this.state.subscribe(uri, this);
  }
  private unsub(uri: string): void {
    this.channels.delete(uri);
    this.state.unsubscribe(uri, this);
  }

  private subscribe(params: Json): Json {
    const uri = params.channel;
    if (typeof uri !== "string") throw new RpcError(ErrorCodes.InvalidParams, "subscribe needs a channel");
    const snap = this.state.snapshot(uri);
    if (!snap) throw new RpcError(ErrorCodes.NotFound, `no such channel ${uri}`);
    this.sub(uri); // snapshot and registration in one synchronous step: nothing can interleave
    return { snapshot: snap };
  }

  private listSessions(): Json {
    const items = [...this.state.sessions.values()].map((s) => this.state.summary(s));
    items.sort((a, b) => String(b.modifiedAt).localeCompare(String(a.modifiedAt)) || String(a.resource).localeCompare(String(b.resource)));
    return { items };
  }

  private async createSession(params: Json): Promise<null> {
    const p = CreateSessionParams.safeParse(params);
    if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, "invalid createSession params");
    const uri = p.data.channel;
    if (!/^ahp-session:\/[A-Za-z0-9._~-]{1,128}$/.test(uri)) throw new RpcError(ErrorCodes.InvalidParams, "session URI must be ahp-session:/<id>");
    const st = this.state;
    const providerId = p.data.provider ?? (st.providers.size === 1 ? [...st.providers.keys()][0] : undefined);
    if (!providerId) throw new RpcError(ErrorCodes.InvalidParams, "provider is required");
    const route = st.providers.get(providerId);
    if (!route) throw new RpcError(ErrorCodes.ProviderNotFound, `no live provider route for ${providerId}`);
    if (st.sessions.has(uri) || st.creations.has(uri)) throw new RpcError(ErrorCodes.SessionAlreadyExists, "session already exists");
    const token = st.reserveCreation(uri, providerId); // durable before the provider sees the command
    const command: Json = { type: "create_session", session: uri, creationToken: token, workingDirectories: p.data.workingDirectories ?? [], config: p.data.config ?? {} };
    const o = await new Promise<CommandOutcome>((resolve) =>
      st.sendCommand(route, { type: "provider_command", backendInstanceId: route.instanceId, provider: providerId, command }, resolve),
    );
    if (o.kind === "accepted") {
      if (!st.sessions.has(uri)) st.addCreatingSession(uri, providerId, p.data.workingDirectories);
      return null;
    }
    if (o.kind === "rejected") {
      st.dropCreation(uri);
      throw new RpcError(ErrorCodes.InternalError, `provider refused creation: ${o.error}`, { outcome: "rejected" });
    }
    throw new RpcError(ErrorCodes.InternalError, "creation outcome is indeterminate", { outcome: "indeterminate" });
  }

  private async disposeSession(params: Json): Promise<null> {
    const uri = params.channel;
    const st = this.state;
    const s = typeof uri === "string" ? st.sessions.get(uri) : undefined;
    if (!s) throw new RpcError(ErrorCodes.SessionNotFound, "no such session");
    if (s.providerRoute) {
      const route = st.providers.get(s.provider);
      if (!route) throw new RpcError(ErrorCodes.ProviderNotFound, "the session's provider is not connected");
      const o = await new Promise<CommandOutcome>((resolve) =>
        st.sendCommand(
          route,
          { type: "provider_command", backendInstanceId: route.instanceId, provider: s.provider, command: { type: "dispose_session", session: s.uri, sourceId: s.sourceId } },
          resolve,
        ),
      );
      if (o.kind === "rejected") throw new RpcError(ErrorCodes.InternalError, `provider refused disposal: ${o.error}`, { outcome: "rejected" });
      if (o.kind === "indeterminate") throw new RpcError(ErrorCodes.InternalError, "disposal outcome is indeterminate", { outcome: "indeterminate" });
    }
    const cur = st.sessions.get(s.uri);
    if (cur) {
      cur.route?.dispose();
      cur.route = undefined;
      st.removeSession(s.uri);
    }
    return null;
  }

  private async fetchTurns(params: Json): Promise<Json> {
    const chatUri = params.channel;
    const st = this.state;
    const chat = typeof chatUri === "string" ? st.chatIndex.get(chatUri) : undefined;
    if (!chat) throw new RpcError(ErrorCodes.NotFound, "no such chat");
    const s = st.sessions.get(chat.sessionUri)!;
    const cursor = params.cursor ?? chat.nextCursor;
    if (cursor === undefined) return {};
    if (typeof cursor !== "string" || cursor !== chat.nextCursor) throw new RpcError(ErrorCodes.InvalidParams, "unrecognised cursor");
    const route = s.route;
    if (!route || route.version < 3) throw new RpcError(ErrorCodes.InternalError, "backend cannot page history");
    const o = await this.command(s, chat.uri, { type: "fetch_turns", chat: chat.uri, cursor });
    if (o.kind !== "accepted") throw new RpcError(ErrorCodes.InternalError, `fetchTurns failed: ${o.kind === "rejected" ? o.error : "indeterminate"}`, { outcome: o.kind });
    return {};
  }

  private command(s: SessionModel, chatUri: string, command: Json): Promise<CommandOutcome> {
    const route = s.route;
    return new Promise((resolve) => {
      if (!route) return resolve({ kind: "rejected", error: "backend not connected" });
      const frame: Json = { type: "command", backendInstanceId: route.instanceId, session: s.uri, command };
      if (route.version >= 3) frame.chat = chatUri;
      this.state.sendCommand(route, frame, resolve);
    });
  }

  // ── Client-dispatched actions ─────────────────────────────────────────────
  private dispatchAction(params: Json): void {
    const p = DispatchActionParams.safeParse(params);
    if (!p.success) return;
    const { channel, clientSeq, action } = p.data;
    const origin: Origin = { clientId: this.clientId, clientSeq };
    const st = this.state;
    const reject = (reason: string) => void st.publish(channel, action as Json, origin, reason);
    const type = action.type;
    if (type === "session/titleChanged") {
      const s = st.sessions.get(channel);
      if (!s || typeof action.title !== "string") return reject("invalid session/titleChanged");
      return st.setTitle(s, action.title, origin);
    }
    const chat = st.chatIndex.get(channel);
    if (!chat) return reject("unknown channel");
    const s = st.sessions.get(chat.sessionUri)!;
    const t = chat.activeTurn;
    switch (type) {
      case "chat/turnStarted": {
        const msg = action.message as Json | undefined;
        if (typeof action.turnId !== "string" || !msg || typeof msg.text !== "string") return reject("invalid chat/turnStarted");
        if ((msg.origin as Json | undefined)?.kind !== "user") return reject("clients may only send user messages");
        if (chat.interactivity === "read-only") return reject("chat is read-only");
        if (t) return reject("a turn is already in progress");
        if (!s.route) return reject("backend not connected");
        const turnId = action.turnId;
        st.publish(channel, { type, turnId, startedAt: new Date().toISOString(), message: { text: msg.text, origin: { kind: "user" } } }, origin);
        st.summaryChanged(s);
        void this.command(s, channel, { type: "prompt", text: msg.text, turnId }).then((o) => {
          if (o.kind === "accepted") return;
          const cur = st.chatIndex.get(channel);
          if (!cur?.activeTurn || cur.activeTurn.id !== turnId) return;
          const duration = Math.max(0, Math.round(performance.now() - cur.activeTurn.startedMono));
          const errorType = o.kind === "rejected" ? "backend_rejected" : "backend_indeterminate";
          st.publish(channel, { type: "chat/error", turnId, duration, error: { errorType, message: o.error } });
          st.summaryChanged(s);
        });
        return;
      }
      case "chat/turnCancelled": {
        if (!t || t.id !== action.turnId) return reject("no such active turn");
        if (!s.route) return reject("backend not connected");
        const duration = Math.max(0, Math.round(performance.now() - t.startedMono));
        st.publish(channel, { type, turnId: t.id, duration }, origin);
        st.summaryChanged(s);
        void this.command(s, channel, { type: "abort" });
        return;
      }
      case "chat/toolCallConfirmed":
      case "chat/toolCallResultConfirmed": {
        const tc = t && t.id === action.turnId && typeof action.toolCallId === "string" ? findTool(t, action.toolCallId) : undefined;
        const want = type === "chat/toolCallConfirmed" ? "pending-confirmation" : "pending-result-confirmation";
        if (!tc || tc.status !== want) return reject("tool call is not awaiting that confirmation");
        if (typeof action.approved !== "boolean") return reject("approved must be a boolean");
        if (!s.route || s.route.version < 4) return reject("backend cannot arbitrate tool confirmations");
        const decision: Json = { ...action };
        delete decision.type;
        void this.command(s, channel, { type: type === "chat/toolCallConfirmed" ? "confirm_tool" : "confirm_tool_result", ...decision }).then((o) => {
          if (o.kind !== "accepted") return reject(o.kind === "rejected" ? `backend refused: ${o.error}` : "backend outcome indeterminate");
          const cur = st.chatIndex.get(channel)?.activeTurn;
          const still = cur && cur.id === action.turnId ? findTool(cur, action.toolCallId as string) : undefined;
          if (!still || still.status !== want) return; // the runtime already resolved it authoritatively
          const echo: Json = { type, turnId: action.turnId, toolCallId: action.toolCallId, approved: action.approved };
          if (type === "chat/toolCallConfirmed") {
            if (action.approved) echo.confirmed = typeof action.confirmed === "string" ? action.confirmed : "user-action";
            else echo.reason = action.reason === "skipped" ? "skipped" : "denied";
            for (const k of ["editedToolInput", "selectedOptionId", "reasonMessage"]) if (action[k] !== undefined) echo[k] = action[k];
          }
          st.publish(channel, echo, origin);
          const key = `tool:${String(action.toolCallId)}`;
          if (s.inputNeeded.has(key)) st.publish(s.uri, { type: "session/inputNeededRemoved", id: key });
          st.summaryChanged(s);
        });
        return;
      }
      case "chat/inputCompleted": {
        const requestId = action.requestId;
        if (typeof requestId !== "string" || !chat.inputs.has(requestId)) return reject("no such pending input request");
        if (!["accept", "decline", "cancel"].includes(action.response as string)) return reject("invalid response");
        if (!s.route || s.route.version < 2 || !s.route.inputCapable) return reject("backend cannot complete input");
        if (!s.inputAvailable) return reject("source input authority unavailable");
        const route = s.route;
        const frame: Json = { type: "command", backendInstanceId: route.instanceId, session: s.uri, command: { type: "complete_input", requestId, response: action.response, answers: action.answers ?? {} } };
        if (route.version >= 3) frame.chat = channel;
        let commandId = "";
        commandId = st.sendCommand(route, frame, (o) => {
          if (o.kind === "accepted") return; // reduced when the runtime emits input_resolved
          st.inputOrigins.delete(commandId);
          reject(o.kind === "rejected" ? `backend refused: ${o.error}` : "backend outcome indeterminate");
        });
        st.inputOrigins.set(commandId, origin);
        return;
      }
      default:
        return reject(`unsupported action ${type}`);
    }
  }
}

export function newClientId(): string {
  return randomUUID();
}
export { ROOT };
