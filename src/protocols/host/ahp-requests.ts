/**
 * AHP requests that are routed to backends: createSession / disposeSession (provider commands),
 * createChat / disposeChat / fetchTurns (v3 session commands). Contracts:
 *  - validation failures are RPC errors before anything is sent;
 *  - a definitive backend refusal is an RPC error with `data.outcome: "rejected"` and leaves
 *    host state as it was; a lost or `command_indeterminate` outcome is an RPC error with
 *    `data.outcome: "indeterminate"` and is never replayed;
 *  - state changes that depend on the backend (a new chat, a removed session or chat) are
 *    published only after the backend accepted, and before the response is sent.
 */
import { randomUUID } from "node:crypto";
import { ErrorCodes } from "./ahp-constants.js";
import { CreateChatParams, CreateSessionParams, paramsIssue } from "./ahp-params.js";
import { clip } from "./inbound.js";
import { NOT_CONNECTED, NOT_CONNECTED_REFUSAL, hostRefused, notSent, refusal } from "./commands.js";
import { STATUS, nowIso, type ChatModel, type CommandOutcome, type Json, type SessionModel } from "./model.js";
import { resetDefaultChat } from "./resource-actions.js";
import type { HostState } from "./state.js";

export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export { refusal };

const SESSION_URI = /^ahp-session:\/[A-Za-z0-9._~-]{1,128}$/;
const CHAT_URI = /^ahp-chat:\/[A-Za-z0-9._~-]{1,128}$/;

/**
 * Send a session command to the session's current route (v3+ envelopes carry `chat`).
 * `onSettled` runs synchronously when the result frame is handled — before any later frame from
 * that backend — so state that later events depend on must be changed there, not after `await`.
 */
export function routeCommand(st: HostState, s: SessionModel, chatUri: string | undefined, command: Json, onSettled?: (o: CommandOutcome) => void, commandId?: string): Promise<CommandOutcome> {
  const route = s.route;
  return new Promise((resolve) => {
    const done = (o: CommandOutcome) => {
      try {
        onSettled?.(o);
      } finally {
        resolve(o);
      }
    };
    if (!route) return done(notSent(NOT_CONNECTED));
    const frame: Json = { type: "command", backendInstanceId: route.instanceId, session: s.uri, command };
    if (route.version >= 3 && chatUri !== undefined) frame.chat = chatUri;
    st.sendCommand(route, frame, done, commandId);
  });
}

/**
 * A client's resource action forwarded to the session's backend as `apply_resource_action` (on the chat when `chatUri`
 * is given, else on the session). `accepted` runs when the backend accepts — it re-checks what may have changed while
 * the command was out, then reduces and echoes; a refusal or an unknown outcome rejects the client's action.
 */
export function forwardResourceAction(st: HostState, s: SessionModel, chatUri: string | undefined, action: Json, reject: (reason: string) => void, accepted: () => void): void {
  void routeCommand(st, s, chatUri, { type: "apply_resource_action", channel: chatUri ?? s.uri, action }, (o) => {
    if (o.kind !== "accepted") return reject(refusal(o, "backend refused the action"));
    accepted();
  });
}

function outcomeError(o: Exclude<CommandOutcome, { kind: "accepted" }>, what: string): RpcError {
  if (o.kind === "rejected" && o.notSent) return new RpcError(ErrorCodes.InternalError, `the host did not send the ${what} to the backend: ${o.error}`, { outcome: "rejected" });
  return o.kind === "rejected"
    ? new RpcError(ErrorCodes.InternalError, `backend refused ${what}: ${o.error}`, { outcome: "rejected" })
    : new RpcError(ErrorCodes.InternalError, `${what} outcome is indeterminate`, { outcome: "indeterminate" });
}

export function listSessions(st: HostState): Json {
  const items = [...st.sessions.values()].map((s) => st.summary(s));
  items.sort((a, b) => String(b.modifiedAt).localeCompare(String(a.modifiedAt)) || String(a.resource).localeCompare(String(b.resource)));
  return { items };
}

export async function createSession(st: HostState, params: Json): Promise<null> {
  const p = CreateSessionParams.safeParse(params);
  if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, paramsIssue("createSession", p.error));
  const uri = p.data.channel;
  if (!SESSION_URI.test(uri)) throw new RpcError(ErrorCodes.InvalidParams, "session URI must be ahp-session:/<id>");
  const providerId = p.data.provider ?? (st.providers.size === 1 ? [...st.providers.keys()][0] : undefined);
  if (!providerId) throw new RpcError(ErrorCodes.InvalidParams, "provider is required");
  const route = st.providers.get(providerId);
  if (!route) throw new RpcError(ErrorCodes.ProviderNotFound, `no live provider route for ${clip(providerId)}`);
  if (st.sessions.has(uri) || st.creations.has(uri)) throw new RpcError(ErrorCodes.SessionAlreadyExists, "session already exists");
  const token = st.reserveCreation(uri, providerId); // durable before the provider sees the command
  const command: Json = { type: "create_session", session: uri, creationToken: token, workingDirectories: p.data.workingDirectories ?? [], config: p.data.config ?? {} };
  if (typeof params.progressToken === "string" && route.version >= 6) command.progressToken = params.progressToken; // v6 root/progress correlation
  const o = await new Promise<CommandOutcome>((resolve) =>
    st.sendCommand(route, { type: "provider_command", backendInstanceId: route.instanceId, provider: providerId, command }, (o) => {
      // Synchronous with the result frame: the session exists before the provider's next frame.
      if (o.kind === "accepted" && !st.sessions.has(uri)) st.addCreatingSession(uri, providerId, p.data.workingDirectories);
      if (o.kind === "rejected") st.dropCreation(uri);
      resolve(o);
    }),
  );
  if (o.kind === "accepted") return null;
  throw outcomeError(o, "session creation");
}

export async function disposeSession(st: HostState, params: Json): Promise<null> {
  const uri = params.channel;
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
    if (o.kind !== "accepted") throw outcomeError(o, "session disposal");
  }
  const cur = st.sessions.get(s.uri);
  if (cur) {
    cur.route?.dispose();
    cur.route = undefined;
    st.removeSession(s.uri);
  }
  return null;
}

export async function fetchTurns(st: HostState, params: Json): Promise<Json> {
  const chatUri = params.channel;
  const chat = typeof chatUri === "string" ? st.chatIndex.get(chatUri) : undefined;
  if (!chat) throw new RpcError(ErrorCodes.NotFound, "no such chat");
  const s = st.sessions.get(chat.sessionUri)!;
  const cursor = params.cursor ?? chat.nextCursor;
  if (cursor === undefined) return {};
  if (typeof cursor !== "string" || cursor !== chat.nextCursor) throw new RpcError(ErrorCodes.InvalidParams, "unrecognised cursor");
  const route = s.route;
  if (!route) throw new RpcError(ErrorCodes.InternalError, `the chat's backend is not connected, so nothing was sent: retry once it reconnects`);
  if (route.version < 3) throw new RpcError(ErrorCodes.InternalError, `the chat's backend speaks backend protocol v${route.version}, which cannot page history (fetch_turns needs v3 or later): update the backend`);
  const o = await routeCommand(st, s, chat.uri, { type: "fetch_turns", chat: chat.uri, cursor });
  if (o.kind !== "accepted") throw new RpcError(ErrorCodes.InternalError, `fetchTurns failed: ${o.kind !== "rejected" ? "indeterminate" : o.notSent ? hostRefused(o.error) : o.error}`, { outcome: o.kind });
  return {};
}

function findTurn(c: ChatModel, turnId: string): { turn: Json | undefined; index: number; active: boolean } {
  const index = c.turns.findIndex((t) => t.id === turnId);
  if (index !== -1) return { turn: c.turns[index], index, active: false };
  return { turn: undefined, index: -1, active: c.activeTurn?.id === turnId };
}

/**
 * `createChat` (channel = session): validated against the session route's advertised
 * `chatCapabilities`, sent as v3 `create_chat`, and added (`session/chatAdded`, then the initial
 * turn's `chat/turnStarted`) only once the runtime accepts — which it does before it emits any
 * event for the chat, so those events find the chat and its initial turn already reduced.
 */
export async function createChat(st: HostState, params: Json): Promise<null> {
  const p = CreateChatParams.safeParse(params);
  if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, paramsIssue("createChat", p.error));
  const { chat: uri, source, initialMessage } = p.data;
  const s = st.sessions.get(p.data.channel);
  if (!s) throw new RpcError(ErrorCodes.SessionNotFound, "no such session");
  if (!CHAT_URI.test(uri)) throw new RpcError(ErrorCodes.InvalidParams, "chat URI must be ahp-chat:/<id>");
  if (st.chatIndex.has(uri) || st.reservedChats.has(uri)) throw new RpcError(ErrorCodes.AlreadyExists, "chat already exists");
  if (s.lifecycle !== "ready") throw new RpcError(ErrorCodes.InvalidRequest, "session is not ready");
  const route = s.route;
  if (!route) throw new RpcError(ErrorCodes.InternalError, NOT_CONNECTED_REFUSAL, { outcome: "rejected" });
  if (route.version < 3 || route.chatCaps.create !== true) throw new RpcError(ErrorCodes.InvalidRequest, "the session's backend does not create chats");
  if (initialMessage && initialMessage.origin.kind !== "user") throw new RpcError(ErrorCodes.InvalidParams, "clients may only send user messages");

  const command: Json = { type: "create_chat", chat: uri };
  let origin: Json | undefined;
  let forkTurns: Json[] | undefined;
  if (source) {
    const src = s.chats.get(source.chat);
    if (!src || src.uri === uri) throw new RpcError(ErrorCodes.InvalidParams, "source chat must be another chat of this session");
    const found = findTurn(src, source.turnId);
    if (source.kind === "fork") {
      if (route.chatCaps.fork !== true) throw new RpcError(ErrorCodes.InvalidParams, "the session's backend does not fork chats");
      if (!found.turn) throw new RpcError(ErrorCodes.InvalidParams, "fork source must be a completed, retained turn");
      forkTurns = structuredClone(src.turns.slice(0, found.index + 1));
      origin = { kind: "fork", chat: src.uri, turnId: source.turnId };
    } else {
      if (route.chatCaps.sideChat !== true) throw new RpcError(ErrorCodes.InvalidParams, "the session's backend does not create side chats");
      if (!found.turn && !found.active) throw new RpcError(ErrorCodes.InvalidParams, "unknown side-chat source turn");
      origin = { kind: "sideChat", chat: src.uri, turnId: source.turnId, ...(source.selection ? { selection: source.selection } : {}) };
    }
    command.source = { ...source };
  }
  let workingDirectories: string[] | undefined;
  if (p.data.workingDirectories && source?.kind !== "fork") {
    const allowed = new Set(Array.isArray(s.extra.workingDirectories) ? (s.extra.workingDirectories as string[]) : []);
    for (const d of p.data.workingDirectories) if (!allowed.has(d)) throw new RpcError(ErrorCodes.InvalidParams, "working directories must be a subset of the session's");
    workingDirectories = p.data.workingDirectories;
    command.workingDirectories = workingDirectories;
  } else if (source?.kind === "fork") {
    workingDirectories = s.chats.get(source.chat)!.workingDirectories;
  }
  const title = p.data.title ?? "Chat";
  command.title = title;
  let initialTurnId: string | undefined;
  if (initialMessage) {
    initialTurnId = randomUUID();
    command.initialTurnId = initialTurnId;
    command.initialText = initialMessage.text;
  }

  st.reservedChats.add(uri);
  let added = false;
  const o = await routeCommand(st, s, undefined, command, (o) => {
    if (o.kind === "rejected") st.reservedChats.delete(uri); // an uncertain creation keeps its URI reserved
    if (o.kind !== "accepted") return;
    st.reservedChats.delete(uri);
    const cur = st.sessions.get(s.uri);
    if (!cur) return;
    const summary: Json = { resource: uri, title, status: STATUS.Idle, modifiedAt: nowIso() };
    if (origin) summary.origin = origin;
    if (workingDirectories) summary.workingDirectories = workingDirectories;
    st.publish(cur.uri, { type: "session/chatAdded", summary });
    const chat = st.chatIndex.get(uri)!;
    if (forkTurns) {
      chat.turns = forkTurns;
      st.persistChat(chat);
    }
    if (initialMessage && initialTurnId) {
      const message: Json = { text: initialMessage.text, origin: { kind: "user" } };
      st.publish(uri, { type: "chat/turnStarted", turnId: initialTurnId, startedAt: nowIso(), message });
    }
    st.chatsChanged(cur);
    added = true;
  });
  if (o.kind !== "accepted") throw outcomeError(o, "chat creation");
  if (!added) throw new RpcError(ErrorCodes.SessionNotFound, "session was removed while the chat was created");
  return null;
}

/** `disposeChat` (channel = chat): v3 `dispose_chat`, removed only after the runtime accepts. */
export async function disposeChat(st: HostState, params: Json): Promise<null> {
  const uri = params.channel;
  const chat = typeof uri === "string" ? st.chatIndex.get(uri) : undefined;
  if (!chat) throw new RpcError(ErrorCodes.NotFound, "no such chat");
  const s = st.sessions.get(chat.sessionUri)!;
  if (chat.uri === s.primaryChat) throw new RpcError(ErrorCodes.InvalidParams, "the primary chat cannot be disposed");
  const route = s.route;
  if (!route) throw new RpcError(ErrorCodes.InternalError, NOT_CONNECTED_REFUSAL, { outcome: "rejected" });
  if (route.version < 3 || route.chatCaps.dispose !== true) throw new RpcError(ErrorCodes.InvalidRequest, "the session's backend does not dispose chats");
  const o = await routeCommand(st, s, chat.uri, { type: "dispose_chat", chat: chat.uri }, (o) => {
    const cur = st.sessions.get(s.uri);
    if (o.kind !== "accepted" || !cur || !cur.chats.has(chat.uri)) return;
    for (const [id, req] of cur.inputNeeded) if (req.chat === chat.uri) st.publish(cur.uri, { type: "session/inputNeededRemoved", id });
    resetDefaultChat(st, cur, chat.uri);
    st.publish(cur.uri, { type: "session/chatRemoved", chat: chat.uri });
    st.chatsChanged(cur);
  });
  if (o.kind !== "accepted") throw outcomeError(o, "chat disposal");
  return null;
}
