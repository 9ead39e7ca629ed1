/**
 * Backend protocol v4 client tools (spec "Events": `client_tool_requested` "selects a matching
 * active AHP client by stable client/tool identity and creates the standard `toolClientExecution`
 * aggregate"; "Commands": `client_tool_content` and `complete_client_tool` "carrying official AHP
 * content/result values as neutral JSON after ownership validation"). Contracts:
 *  - active clients: a client adds or refreshes itself with `session/activeClientSet` (only its own
 *    `clientId`, bounded: MAX_CLIENT_TOOLS tools, MAX_ACTIVE_CLIENT_BYTES encoded) and leaves with
 *    `session/activeClientRemoved`; the entry belongs to the WebSocket connection that set it, and
 *    leaves when that connection closes or unsubscribes from the session (published by the host);
 *  - `client_tool_requested` (a v4+ route that advertised `toolCapabilities.clientTools`, an active
 *    turn, a new `toolCallId`) picks the first-joined active client that provides `toolName`
 *    (exactly the named `clientId` when given). None: a semantic rejection naming why, nothing
 *    published. Else the call is published running with a client contributor, mirrored as a session
 *    `toolClientExecution` request;
 *  - only the owning connection may stream `chat/toolCallContentChanged` or send
 *    `chat/toolCallComplete` for the call; each is forwarded to the backend instance that requested
 *    it and echoed (with the client's origin) only after the backend accepts. A refusal or an
 *    indeterminate outcome is echoed rejected and nothing is replayed; an indeterminate completion
 *    leaves the call running until the runtime's own `tool_completed` settles it;
 *  - an active client that leaves fails its running calls (AHP: "cancel that client's in-flight tool
 *    calls … by dispatching `chat/toolCallComplete` with `result.success = false`") and tells the
 *    backend with `complete_client_tool` carrying the same failed result.
 */
import { z } from "zod";
import { clip } from "./inbound.js";
import { refusal, routeCommand } from "./ahp-requests.js";
import { findTool, type ChatModel, type Json, type Origin, type SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { clientCustomizationsCheck, clientCustomizationsGone, clientCustomizationsSet } from "./customizations.js";

/** Tools one active client may provide to a session. */
export const MAX_CLIENT_TOOLS = 256;
/** The largest `activeClient` entry, as encoded JSON (UTF-8 bytes). */
export const MAX_ACTIVE_CLIENT_BYTES = 256 * 1024;
/** Content items in one `chat/toolCallContentChanged` or result, and the largest such action. */
export const MAX_TOOL_CONTENT = 1024;
export const MAX_TOOL_ACTION_BYTES = 1024 * 1024;

/** A client's leaving, as the failure message the backend and every client read. */
export const CLIENT_LEFT = "the client executing this tool left the session";

/** A tool call's content or result while the backend instance that requested it is not connected. */
export const NOT_CONNECTED_CALL = `the backend that requested this tool call is not connected, so nothing was sent: retry once it reconnects (the turn ends if a new instance of the backend takes the session over)`;

/** … while another instance of the backend serves the session: it never asked for the call, and ends that turn. */
export const REPLACED_CALL = "a new instance of the backend now serves this session and did not request this tool call, so nothing was sent and a retry cannot be: the new instance ends the turn the call belonged to";

const id = z.string().min(1).max(512);
const meta = z.record(z.string(), z.unknown()).optional();
const Schema = z.object({ type: z.literal("object") }).passthrough();
const ToolDefinition = z.object({
  name: id,
  title: z.string().max(4096).optional(),
  description: z.string().max(65536).optional(),
  inputSchema: Schema.optional(),
  outputSchema: Schema.optional(),
  annotations: z.record(z.string(), z.unknown()).optional(),
  _meta: meta,
}).strict();
const ActiveClient = z.object({
  clientId: id,
  displayName: z.string().max(4096).optional(),
  tools: z.array(ToolDefinition).max(MAX_CLIENT_TOOLS),
  customizations: z.array(z.object({}).passthrough()).max(64).optional(),
}).strict();
const ActiveClientSet = z.object({ type: z.literal("session/activeClientSet"), activeClient: ActiveClient }).strict();
const ActiveClientRemoved = z.object({ type: z.literal("session/activeClientRemoved"), clientId: id }).strict();
const ToolContent = z.object({ type: z.string().min(1).max(64) }).passthrough();
const ContentChanged = z.object({ type: z.literal("chat/toolCallContentChanged"), turnId: id, toolCallId: id, content: z.array(ToolContent).max(MAX_TOOL_CONTENT), _meta: meta }).strict();
const ToolResult = z.object({
  success: z.boolean(),
  pastTenseMessage: z.union([z.string().max(4096), z.object({ markdown: z.string().max(4096) }).strict()]),
  content: z.array(ToolContent).max(MAX_TOOL_CONTENT).optional(),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  error: z.object({ message: z.string().max(4096), code: z.string().max(256).optional() }).strict().optional(),
}).strict();
const Complete = z.object({ type: z.literal("chat/toolCallComplete"), turnId: id, toolCallId: id, result: ToolResult, _meta: meta }).strict();

/** One client-executed tool call the host is tracking. */
interface ClientCall {
  session: string;
  chat: string;
  turnId: string;
  toolCallId: string;
  clientId: string;
  owner: object;
  /** The backend instance that requested it: content and the result go only to that instance. */
  instanceId: string;
  completing: boolean;
}

/** The session `toolClientExecution` request that mirrors a client-executed call. */
export const clientInputId = (chatUri: string, toolCallId: string): string => `client:${chatUri}:${toolCallId}`;

class ClientToolHub {
  /** session URI → clientId → the connection that owns that active-client entry. */
  readonly owners = new Map<string, Map<string, object>>();
  /** connection → the sessions it is an active client of. */
  readonly byConn = new Map<object, Set<string>>();
  /** `clientInputId` → the call. */
  readonly calls = new Map<string, ClientCall>();
  /** The host is shutting down: clients leaving now change nothing (running turns are checkpointed as they are). */
  closing = false;
  constructor(readonly st: HostState) {}

  own(session: string, clientId: string, conn: object): void {
    let m = this.owners.get(session);
    if (!m) this.owners.set(session, (m = new Map<string, object>()));
    m.set(clientId, conn);
    let set = this.byConn.get(conn);
    if (!set) this.byConn.set(conn, (set = new Set<string>()));
    set.add(session);
  }
  disown(session: string, clientId: string, conn: object): void {
    const m = this.owners.get(session);
    if (m?.get(clientId) === conn) m.delete(clientId);
    if (m && m.size === 0) this.owners.delete(session);
    const set = this.byConn.get(conn);
    set?.delete(session);
    if (set && set.size === 0) this.byConn.delete(conn);
  }
  /** A tracked call, if its tool call is still running in the chat's active turn (stale records are dropped). */
  live(key: string): ClientCall | undefined {
    const call = this.calls.get(key);
    if (!call) return undefined;
    const chat = this.st.chatIndex.get(call.chat);
    const t = chat?.activeTurn;
    const tc = t && t.id === call.turnId ? findTool(t, call.toolCallId) : undefined;
    if (tc?.status === "running" && this.st.sessions.has(call.session)) return call;
    this.calls.delete(key);
    return undefined;
  }
}

const hubs = new WeakMap<HostState, ClientToolHub>();
function hub(st: HostState): ClientToolHub {
  let h = hubs.get(st);
  if (!h) hubs.set(st, (h = new ClientToolHub(st)));
  return h;
}

/** `session/activeClientSet` / `session/activeClientRemoved` from connection `conn` (client `origin.clientId`). */
export function activeClientAction(st: HostState, s: SessionModel, action: Json, origin: Origin, conn: object | undefined, reject: (r: string) => void): void {
  const h = hub(st);
  if (!conn) return reject("active clients need a client connection");
  if (action.type === "session/activeClientRemoved") {
    const p = ActiveClientRemoved.safeParse(action);
    if (!p.success) return reject("invalid session/activeClientRemoved: clientId must be a string");
    if (p.data.clientId !== origin.clientId) return reject("a client may only remove itself from a session's active clients");
    if (h.owners.get(s.uri)?.get(p.data.clientId) !== conn) return reject("this client is not an active client of the session on this connection");
    return leave(st, s, p.data.clientId, conn, origin);
  }
  const size = Buffer.byteLength(JSON.stringify(action.activeClient ?? null));
  if (size > MAX_ACTIVE_CLIENT_BYTES) return reject(`activeClient is ${size} bytes encoded; at most ${MAX_ACTIVE_CLIENT_BYTES} are accepted`);
  const p = ActiveClientSet.safeParse(action);
  if (!p.success) {
    const i = p.error.issues[0];
    if (i?.code === "too_big" && i.path.join(".") === "activeClient.tools") return reject(`activeClient.tools holds at most ${MAX_CLIENT_TOOLS} tools`);
    return reject(`invalid session/activeClientSet: ${i ? `${i.path.join(".")} ${i.message}` : "bad shape"}`);
  }
  const entry = p.data.activeClient;
  if (entry.clientId !== origin.clientId) return reject("a client may only set its own active-client entry (activeClient.clientId must be the clientId it initialized with)");
  const names = new Set<string>();
  for (const t of entry.tools) {
    if (names.has(t.name)) return reject(`activeClient.tools names ${clip(t.name)} twice`);
    names.add(t.name);
  }
  const owner = h.owners.get(s.uri)?.get(entry.clientId);
  if (owner !== undefined && owner !== conn) return reject("this clientId is already an active client of the session on another connection");
  const plugins = clientCustomizationsCheck(st, s, entry.clientId, entry.customizations);
  if (plugins) return reject(plugins);
  h.own(s.uri, entry.clientId, conn);
  st.publish(s.uri, { type: "session/activeClientSet", activeClient: entry }, origin);
  clientCustomizationsSet(st, s, entry.clientId, entry.customizations);
  reattachRestoredCalls(st, s, entry, conn);
}

/**
 * After a host restart the restored turns' client calls have no owner (connections do not survive
 * a restart). When the client named by a call's contributor sets its entry again and still provides
 * the tool, the call is its own again: tracked, owned by this connection, for the backend instance
 * that last registered the session, and mirrored again as a `toolClientExecution` request.
 */
function reattachRestoredCalls(st: HostState, s: SessionModel, entry: { clientId: string; tools: Array<{ name: string }> }, conn: object): void {
  const h = hub(st);
  const instanceId = s.lastInstanceId;
  if (instanceId === undefined) return;
  for (const chat of s.chats.values()) {
    const t = chat.activeTurn;
    if (!t?.restored) continue;
    for (const p of t.responseParts) {
      const tc = p.kind === "toolCall" ? (p.toolCall as Json) : undefined;
      const by = tc?.contributor as Json | undefined;
      if (!tc || tc.status !== "running" || by?.kind !== "client" || by.clientId !== entry.clientId) continue;
      const key = clientInputId(chat.uri, tc.toolCallId as string);
      if (h.live(key) || !entry.tools.some((x) => x.name === tc.toolName)) continue;
      h.calls.set(key, { session: s.uri, chat: chat.uri, turnId: t.id, toolCallId: tc.toolCallId as string, clientId: entry.clientId, owner: conn, instanceId, completing: false });
      st.publish(s.uri, { type: "session/inputNeededSet", request: { id: key, chat: chat.uri, kind: "toolClientExecution", turnId: t.id, clientId: entry.clientId, toolCall: { ...tc } } });
    }
  }
}

/** Client `clientId` (on `conn`) leaves session `s`: its entry goes and its running calls fail. */
function leave(st: HostState, s: SessionModel, clientId: string, conn: object, origin?: Origin): void {
  const h = hub(st);
  h.disown(s.uri, clientId, conn);
  st.publish(s.uri, { type: "session/activeClientRemoved", clientId }, origin);
  clientCustomizationsGone(st, s, clientId);
  for (const [key, call] of [...h.calls]) {
    if (call.session !== s.uri || call.owner !== conn || !h.live(key)) continue;
    h.calls.delete(key);
    const chat = st.chatIndex.get(call.chat)!;
    const tc = findTool(chat.activeTurn!, call.toolCallId)!;
    const result = { success: false, pastTenseMessage: `${String(tc.displayName)} failed`, error: { message: CLIENT_LEFT } };
    st.publish(call.chat, { type: "chat/toolCallComplete", turnId: call.turnId, toolCallId: call.toolCallId, result });
    if (s.inputNeeded.has(key)) st.publish(s.uri, { type: "session/inputNeededRemoved", id: key });
    // The runtime waits for this result: it gets the same failure (its outcome changes nothing here).
    if (s.route && s.route.instanceId === call.instanceId)
      void routeCommand(st, s, call.chat, { type: "complete_client_tool", turnId: call.turnId, toolCallId: call.toolCallId, result });
  }
  st.summaryChanged(s);
}

/** A client connection closed: it leaves every session it was an active client of. */
export function clientConnectionClosed(st: HostState, conn: object): void {
  const h = hubs.get(st);
  const sessions = h?.byConn.get(conn);
  if (!h || !sessions || h.closing) return;
  for (const uri of [...sessions]) {
    const s = st.sessions.get(uri);
    const ids = [...(h.owners.get(uri) ?? [])].filter(([, c]) => c === conn).map(([cid]) => cid);
    for (const cid of ids) {
      if (s) leave(st, s, cid, conn);
      else h.disown(uri, cid, conn);
    }
  }
}

/**
 * The host is shutting down: the connections it closes do not fail their calls (the turns are
 * checkpointed as they are and restored by the next start, where no client owns them any more).
 */
export function clientToolsClosing(st: HostState): void {
  hub(st).closing = true;
}

/** A client connection unsubscribed from `channel`: if that is a session it is active in, it leaves it. */
export function clientUnsubscribed(st: HostState, conn: object, channel: string): void {
  const h = hubs.get(st);
  if (!h?.byConn.get(conn)?.has(channel)) return;
  const s = st.sessions.get(channel);
  for (const [cid, c] of [...(h.owners.get(channel) ?? [])]) {
    if (c !== conn) continue;
    if (s) leave(st, s, cid, conn);
    else h.disown(channel, cid, conn);
  }
}

/** The session left the host: forget its active clients and calls. */
export function clientToolsSessionRemoved(st: HostState, uri: string): void {
  const h = hubs.get(st);
  if (!h) return;
  for (const [cid, conn] of [...(h.owners.get(uri) ?? [])]) h.disown(uri, cid, conn);
  for (const [key, call] of [...h.calls]) if (call.session === uri) h.calls.delete(key);
}

export interface ClientToolRequest {
  toolCallId: string;
  toolName: string;
  clientId?: string | undefined;
  input?: string | undefined;
}

/** The v4 `client_tool_requested` event; null, or a semantic-rejection message (nothing published then). */
export function clientToolRequested(st: HostState, s: SessionModel, chat: ChatModel, ev: ClientToolRequest): string | null {
  if (!s.route?.clientTools) return "client_tool_requested requires advertised toolCapabilities.clientTools";
  const t = chat.activeTurn;
  if (!t) return "client_tool_requested without an active turn";
  if (findTool(t, ev.toolCallId)) return `duplicate toolCallId ${clip(ev.toolCallId)}`;
  const provides = (c: Json) => Array.isArray(c.tools) && (c.tools as Json[]).some((x) => x.name === ev.toolName);
  let client: Json | undefined;
  if (ev.clientId !== undefined) {
    client = s.activeClients.find((c) => c.clientId === ev.clientId);
    if (!client) return `client_tool_requested: client ${clip(ev.clientId)} is not an active client of this session`;
    if (!provides(client)) return `client_tool_requested: active client ${clip(ev.clientId)} does not provide tool ${clip(ev.toolName)}`;
  } else {
    client = s.activeClients.find(provides);
    if (!client) return `client_tool_requested: no active client of this session provides tool ${clip(ev.toolName)}`;
  }
  const clientId = client.clientId as string;
  const owner = hub(st).owners.get(s.uri)?.get(clientId);
  if (!owner) return `client_tool_requested: client ${clip(clientId)} is not an active client of this session`;
  const tool = (client.tools as Json[]).find((x) => x.name === ev.toolName)!;
  const displayName = typeof tool.title === "string" && tool.title !== "" ? tool.title : ev.toolName;
  st.publish(chat.uri, { type: "chat/toolCallStart", turnId: t.id, toolCallId: ev.toolCallId, toolName: ev.toolName, displayName, contributor: { kind: "client", clientId } });
  const ready: Json = { type: "chat/toolCallReady", turnId: t.id, toolCallId: ev.toolCallId, invocationMessage: displayName, confirmed: "not-needed" };
  if (ev.input !== undefined) ready.toolInput = ev.input;
  st.publish(chat.uri, ready);
  const key = clientInputId(chat.uri, ev.toolCallId);
  hub(st).calls.set(key, { session: s.uri, chat: chat.uri, turnId: t.id, toolCallId: ev.toolCallId, clientId, owner, instanceId: s.route.instanceId, completing: false });
  st.publish(s.uri, { type: "session/inputNeededSet", request: { id: key, chat: chat.uri, kind: "toolClientExecution", turnId: t.id, clientId, toolCall: { ...findTool(t, ev.toolCallId)! } } });
  return null;
}

/** The runtime settled a call itself (`tool_completed`): the host stops tracking it. */
export function clientCallSettled(st: HostState, chatUri: string, toolCallId: string): void {
  hubs.get(st)?.calls.delete(clientInputId(chatUri, toolCallId));
}

/**
 * A client's `chat/toolCallContentChanged` or `chat/toolCallComplete` on a chat: handled here
 * (true) when it names a client-executed call; false leaves it to the other rules.
 */
export function clientToolAction(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, conn: object | undefined, reject: (r: string) => void): boolean {
  const h = hubs.get(st);
  if (!h || typeof action.toolCallId !== "string") return false;
  const key = clientInputId(chat.uri, action.toolCallId);
  const call = h.live(key);
  if (!call || call.turnId !== action.turnId) return false;
  if (conn === undefined || call.owner !== conn || call.clientId !== origin.clientId) {
    reject(`only the client executing this tool call (${clip(call.clientId)}, on the connection it was requested on) may report its content or result`);
    return true;
  }
  const complete = action.type === "chat/toolCallComplete";
  if (Buffer.byteLength(JSON.stringify(action)) > MAX_TOOL_ACTION_BYTES) {
    reject(`${String(action.type)} exceeds ${MAX_TOOL_ACTION_BYTES} bytes encoded`);
    return true;
  }
  const p = complete ? Complete.safeParse(action) : ContentChanged.safeParse(action);
  if (!p.success) {
    const i = p.error.issues[0];
    reject(`invalid ${String(action.type)}: ${i ? `${i.path.join(".")} ${i.message}` : "bad shape"}`);
    return true;
  }
  if (call.completing) {
    reject("a result for this tool call is already waiting for the backend");
    return true;
  }
  if (!s.route) {
    reject(NOT_CONNECTED_CALL);
    return true;
  }
  if (s.route.instanceId !== call.instanceId) {
    reject(REPLACED_CALL);
    return true;
  }
  const a = p.data as Json;
  const command: Json = complete
    ? { type: "complete_client_tool", turnId: a.turnId, toolCallId: a.toolCallId, result: a.result }
    : { type: "client_tool_content", turnId: a.turnId, toolCallId: a.toolCallId, content: a.content };
  if (complete) call.completing = true;
  void routeCommand(st, s, chat.uri, command, (o) => {
    if (complete) call.completing = false;
    if (o.kind !== "accepted") return reject(refusal(o, undefined, "backend outcome indeterminate (nothing was resent; the runtime settles the call)"));
    if (!h.live(key)) return reject("the tool call is no longer running");
    st.publish(chat.uri, a, origin);
    if (complete) {
      h.calls.delete(key);
      if (s.inputNeeded.has(key)) st.publish(s.uri, { type: "session/inputNeededRemoved", id: key });
      st.summaryChanged(s);
    }
  });
  return true;
}
