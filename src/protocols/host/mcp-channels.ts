/**
 * Backend protocol v5 MCP side channels: `hello.mcpServers` → official ready
 * `McpServerCustomization`s with stable opaque `mcp://` channels, and verbatim MCP JSON-RPC
 * forwarding between AHP clients and the owning session backend. Contracts:
 *  - the advertised capability union is the only method allowlist; MCP `initialize` (and
 *    `notifications/initialized`) is always refused, as is any method outside the union (-32601);
 *  - a client request gets a fresh host UUID on the backend side; the reply restores the caller's
 *    own JSON-RPC ID and channel. The pending entry keeps its logical route, and a reply is
 *    accepted only on that route's physical connection while the route is current;
 *  - at most MCP_INFLIGHT_PER_CLIENT requests wait per AHP connection and MCP_PENDING_GLOBAL in
 *    all; one past either bound is refused before anything is sent;
 *  - a delivered request that gets no reply within MCP_DEADLINE_MS, or whose route goes away, is
 *    answered `data.outcome: "indeterminate"`; nothing is retried or replayed;
 *  - a closing AHP connection reaps its waiters (timers and correlations) and claims no
 *    cancellation of work the backend already admitted;
 *  - backend `mcp_notification`s are relayed only for the sender's own current route and an
 *    advertised notification; every other scope is refused with one content-free error.
 */
import { createHash, randomUUID } from "node:crypto";
import { z } from "zod";
import { COMMAND_DEADLINE_MS, type Json, type SessionModel, type SessionRoute } from "./model.js";
import type { HostState } from "./state.js";
import type { BackendConn } from "./backend-conn.js";
import type { LogicalRoute } from "./logical-route.js";
import { extraCustomizations } from "./customizations.js";
import { publishShaped, shapeList } from "./customization-toggles.js";

export const MCP_MIN_VERSION = 5;
export const MCP_MAX_SERVERS = 64;
/** Requests one AHP connection may have waiting for a backend reply. */
export const MCP_INFLIGHT_PER_CLIENT = 16;
/** Request correlations the whole host keeps. */
export const MCP_PENDING_GLOBAL = 128;
/** Backend queue wait and reply wait share the command deadline. */
export const MCP_DEADLINE_MS = COMMAND_DEADLINE_MS;
/** JSON-RPC code for a request refused by a bound (not sent; the caller may retry later). */
export const MCP_BUSY_CODE = -32000;

const id = z.string().min(1).max(512);
export const McpServerDescriptor = z.object({
  id,
  uri: z.string().min(1).max(4096).optional(),
  name: z.string().min(1).max(4096),
  capabilities: z
    .object({
      serverTools: z.boolean().optional(),
      toolsListChanged: z.boolean().optional(),
      serverResources: z.boolean().optional(),
      resourcesListChanged: z.boolean().optional(),
      logging: z.boolean().optional(),
      sampling: z.boolean().optional(),
    })
    .optional(),
});
export type McpServerDescriptor = z.infer<typeof McpServerDescriptor>;
const McpServers = z.array(McpServerDescriptor).max(MCP_MAX_SERVERS);

/** Null, or why a hello's `mcpServers` is refused (checked at registration). */
export function mcpServersError(raw: unknown): string | null {
  if (raw === undefined) return null;
  const p = McpServers.safeParse(raw);
  if (!p.success) {
    const i = p.error.issues[0];
    return `mcpServers${i && i.path.length ? "." + i.path.join(".") : ""}: ${i?.message ?? "invalid"}`;
  }
  const ids = p.data.map((d) => d.id);
  if (new Set(ids).size !== ids.length) return "mcpServers IDs must be unique";
  return null;
}

/** What one advertised server allows, derived once from its descriptor. */
export interface McpServer {
  descriptor: McpServerDescriptor;
  channel: string;
  /** The AHP `McpServerState` last reported (ready at registration; v6 backends change it). */
  state: Json;
  /** Client → backend requests. */
  requests: Set<string>;
  /** Client → backend notifications. */
  clientNotifications: Set<string>;
  /** Backend → client notifications. */
  serverNotifications: Set<string>;
}

/** The capability union as method sets (the AHP `mcp://` channel table). */
export function allowlist(d: McpServerDescriptor): Pick<McpServer, "requests" | "clientNotifications" | "serverNotifications"> {
  const c = d.capabilities ?? {};
  const requests = new Set<string>();
  const clientNotifications = new Set<string>();
  const serverNotifications = new Set<string>();
  if (c.serverTools) {
    requests.add("tools/list").add("tools/call");
    if (c.toolsListChanged) serverNotifications.add("notifications/tools/list_changed");
  }
  if (c.serverResources) {
    requests.add("resources/list").add("resources/templates/list").add("resources/read");
    if (c.resourcesListChanged) serverNotifications.add("notifications/resources/list_changed");
  }
  if (c.logging) {
    requests.add("logging/setLevel");
    clientNotifications.add("notifications/message");
  }
  if (c.sampling) requests.add("sampling/createMessage");
  return { requests, clientNotifications, serverNotifications };
}

/** AHP `AhpMcpUiHostCapabilities` for a descriptor, or undefined when it advertises nothing. */
function uiCapabilities(d: McpServerDescriptor): Json | undefined {
  const c = d.capabilities ?? {};
  const out: Json = {};
  if (c.serverTools) out.serverTools = c.toolsListChanged ? { listChanged: true } : {};
  if (c.serverResources) out.serverResources = c.resourcesListChanged ? { listChanged: true } : {};
  if (c.logging) out.logging = {};
  if (c.sampling) out.sampling = {};
  return Object.keys(out).length > 0 ? out : undefined;
}

export interface McpClock {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}
const realClock: McpClock = {
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** One AHP connection's side of the MCP channels. */
export interface McpPort {
  /** Send one serialized JSON-RPC message to the client. */
  send(text: string): void;
  /** Whether the client has initialized (MCP traffic needs an initialized AHP connection). */
  initialized(): boolean;
}

interface Pending {
  requestId: string;
  port: McpPort;
  callerId: string | number;
  channel: string;
  route: LogicalRoute;
  timer: unknown;
}

type JsonRpcId = string | number;
const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is JsonRpcId => typeof v === "string" || (typeof v === "number" && Number.isFinite(v));

/**
 * Null, or why a backend's reply is not an MCP response: JSON-RPC 2.0 carries exactly one of `result`
 * and `error`, and MCP's `Result` is an object (the `mcp://` channel speaks MCP "exactly as defined").
 */
function responseError(m: Json): string | null {
  if (("result" in m) === ("error" in m)) return "message must carry exactly one of result or error";
  if ("result" in m) return isObj(m.result) ? null : "result must be an object (an MCP Result)";
  const e = m.error;
  if (!isObj(e) || typeof e.code !== "number" || !Number.isInteger(e.code) || typeof e.message !== "string") return "error needs an integer code and a string message";
  return null;
}

/** The fixed, content-free refusal of a backend MCP frame whose scope is not its own current route. */
export const MCP_SCOPE_REFUSED = "mcp_scope_refused";

export class McpHub {
  clock: McpClock = realClock;
  private readonly servers = new WeakMap<SessionRoute, Map<string, McpServer>>();
  /** Channel URI → owning session and server ID (stable across re-registrations). */
  private readonly channels = new Map<string, { sessionUri: string; serverId: string }>();
  /** The customizations list session subscribers last heard, by session URI. */
  private readonly announced = new Map<string, string>();
  readonly pending = new Map<string, Pending>();
  private readonly inflight = new Map<McpPort, number>();

  constructor(readonly st: HostState) {}

  /** The stable opaque channel of one server of one session. */
  channelFor(sessionUri: string, serverId: string): string {
    const h = createHash("sha256").update(`${this.st.hostId}\0${sessionUri}\0${serverId}`).digest("hex").slice(0, 32);
    return `mcp://${h}`;
  }

  /** The official customizations of a session (its current route's servers), or undefined when it never had any. */
  customizations(s: SessionModel): Json[] | undefined {
    const list: Json[] = [];
    const servers = s.route ? this.servers.get(s.route) : undefined;
    if (servers)
      for (const m of servers.values()) {
        const d = m.descriptor;
        const c: Json = { type: "mcpServer", id: d.id, uri: d.uri ?? m.channel, name: d.name, state: m.state };
        const caps = uiCapabilities(d);
        if (caps) {
          if (m.state.kind === "ready") c.channel = m.channel;
          c.mcpApp = { capabilities: caps };
        }
        list.push(c);
      }
    if (list.length === 0 && !this.announced.has(s.uri)) return undefined;
    return list;
  }

  /** The whole `SessionState.customizations`: these MCP servers, then the others (customizations.ts). */
  sessionCustomizations(s: SessionModel): Json[] | undefined {
    const mcp = this.customizations(s);
    const extra = extraCustomizations(s);
    if (!mcp && extra.length === 0) return undefined;
    return [...(mcp ?? []), ...extra];
  }

  /** Subscribers were brought to the current list by a narrower action (customizations.ts). */
  heard(s: SessionModel): void {
    this.announced.set(s.uri, JSON.stringify(this.sessionCustomizations(s) ?? []));
  }

  /** Announce `session/customizationsChanged` when the list differs from what subscribers hold. */
  private announce(s: SessionModel): void {
    const list = this.sessionCustomizations(s);
    if (list === undefined) return;
    const text = JSON.stringify(list);
    if (this.announced.get(s.uri) === text) return;
    this.announced.set(s.uri, text);
    publishShaped(this.st, s.uri, (shape) => ({ type: "session/customizationsChanged", customizations: shapeList(s, list, shape) }));
  }

  /** A route became current for a session: record its servers, fail the previous route's waiters. */
  routeRegistered(s: SessionModel, route: LogicalRoute, descriptors: McpServerDescriptor[] | undefined, prev: SessionRoute | undefined): void {
    if (prev && prev !== route) this.failWaiters((p) => p.route === prev, "the backend route was replaced after delivery");
    if (descriptors && descriptors.length > 0 && route.version >= MCP_MIN_VERSION) {
      const map = new Map<string, McpServer>();
      for (const d of descriptors) {
        const channel = this.channelFor(s.uri, d.id);
        this.channels.set(channel, { sessionUri: s.uri, serverId: d.id });
        map.set(d.id, { descriptor: d, channel, state: { kind: "ready" }, ...allowlist(d) });
      }
      this.servers.set(route, map);
    }
    this.announce(s);
  }

  /** One advertised server of the session's current route. */
  server(s: SessionModel, serverId: string): McpServer | undefined {
    return s.route ? this.servers.get(s.route)?.get(serverId) : undefined;
  }

  /**
   * The backend reported a lifecycle state (v6 `session/mcpServerStateChanged`): publish it with
   * the host's channel, present only while the server is ready. Null, or a rejection message.
   */
  setServerState(s: SessionModel, serverId: string, state: Json): string | null {
    const m = this.server(s, serverId);
    if (!m) return "no advertised MCP server with that id on this route";
    m.state = state;
    const action: Json = { type: "session/mcpServerStateChanged", id: serverId, state };
    if (state.kind === "ready" && uiCapabilities(m.descriptor)) action.channel = m.channel;
    else this.failWaiters((p) => p.channel === m.channel && p.route === s.route, "the MCP server left the ready state after delivery");
    this.st.publish(s.uri, action);
    this.heard(s);
    return null;
  }

  /** A route went away (closed, retired, unregistered): fail its waiters; its servers leave the session. */
  routeGone(route: LogicalRoute): void {
    this.failWaiters((p) => p.route === route, "the backend route was lost after delivery");
    const s = this.st.sessions.get(route.sessionUri);
    if (s && s.route !== route) this.announce(s);
  }

  /** A session was removed: answer its waiters, forget its channels. */
  sessionRemoved(uri: string): void {
    this.failWaiters((p) => p.route.sessionUri === uri, "the session was removed after delivery");
    this.announced.delete(uri);
    for (const [ch, v] of this.channels) if (v.sessionUri === uri) this.channels.delete(ch);
  }

  private failWaiters(match: (p: Pending) => boolean, why: string): void {
    for (const p of [...this.pending.values()])
      if (match(p)) this.finish(p, { error: { code: -32603, message: `MCP request outcome is indeterminate: ${why}`, data: { outcome: "indeterminate" } } });
  }

  private finish(p: Pending, body: Json): void {
    if (this.pending.get(p.requestId) !== p) return;
    this.pending.delete(p.requestId);
    this.clock.clearTimeout(p.timer);
    const n = (this.inflight.get(p.port) ?? 1) - 1;
    if (n <= 0) this.inflight.delete(p.port);
    else this.inflight.set(p.port, n);
    p.port.send(JSON.stringify({ jsonrpc: "2.0", id: p.callerId, ...body, channel: p.channel }));
  }

  inflightOf(port: McpPort): number {
    return this.inflight.get(port) ?? 0;
  }

  /** The AHP connection closed: drop its waiters and correlations without answering or cancelling. */
  portClosed(port: McpPort): void {
    for (const p of [...this.pending.values()])
      if (p.port === port) {
        this.pending.delete(p.requestId);
        this.clock.clearTimeout(p.timer);
      }
    this.inflight.delete(port);
  }

  // ── AHP side ──────────────────────────────────────────────────────────────
  /**
   * Handle one client message if it is MCP traffic (a top-level `mcp://` channel); returns false
   * for anything else, which the ordinary AHP dispatcher then handles.
   */
  tryClientMessage(port: McpPort, text: string): boolean {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return false;
    }
    if (!isObj(msg) || typeof msg.channel !== "string" || !msg.channel.startsWith("mcp://")) return false;
    this.clientMessage(port, msg, msg.channel);
    return true;
  }

  private clientMessage(port: McpPort, msg: Json, channel: string): void {
    const callerId = isId(msg.id) ? msg.id : undefined;
    const fail = (code: number, message: string, data?: Json) => {
      if (callerId !== undefined) port.send(JSON.stringify({ jsonrpc: "2.0", id: callerId, error: { code, message, ...(data ? { data } : {}) }, channel }));
    };
    if (msg.jsonrpc !== "2.0" || typeof msg.method !== "string" || ("id" in msg && callerId === undefined))
      return port.send(JSON.stringify({ jsonrpc: "2.0", id: callerId ?? null, error: { code: -32600, message: "invalid MCP JSON-RPC message (this channel accepts requests and notifications only)" }, channel }));
    if (!port.initialized()) return fail(-32600, "MCP messages need an initialized AHP connection: send the AHP initialize request (on ahp-root://) first, then MCP on the mcp:// channel a session snapshot names");
    const method = msg.method;
    if (method === "initialize" || method === "notifications/initialized")
      return fail(-32601, "MCP initialize is not carried on an mcp:// channel: the server is already initialized");
    const target = this.channels.get(channel);
    const s = target ? this.st.sessions.get(target.sessionUri) : undefined;
    if (!target || !s) return fail(-32008, "no such MCP channel");
    const route = s.route as LogicalRoute | undefined;
    const server = route ? this.servers.get(route)?.get(target.serverId) : undefined;
    if (!route || !server) return fail(-32603, "the MCP server is not available (its backend is not connected); nothing was sent", { outcome: "rejected" });
    if (server.state.kind !== "ready") return fail(-32603, "the MCP server is not ready; nothing was sent", { outcome: "rejected" });
    const verbatim: Json = { ...msg };
    delete verbatim.channel;
    if (callerId === undefined) {
      if (!server.clientNotifications.has(method)) return; // no answer to a notification; refused silently
      route.deliver({ type: "mcp_notification", session: s.uri, serverId: target.serverId, backendConnectionId: route.logicalId, message: verbatim });
      return;
    }
    if (!server.requests.has(method)) return fail(-32601, `method ${method.slice(0, 64)} is not served on this channel`);
    const mine = this.inflightOf(port);
    if (mine >= MCP_INFLIGHT_PER_CLIENT)
      return fail(MCP_BUSY_CODE, `too many MCP requests in flight on this connection (limit ${MCP_INFLIGHT_PER_CLIENT}); nothing was sent, retry after a reply`, { outcome: "rejected", retryable: true });
    if (this.pending.size >= MCP_PENDING_GLOBAL)
      return fail(MCP_BUSY_CODE, `too many MCP requests pending on this host (limit ${MCP_PENDING_GLOBAL}); nothing was sent, retry later`, { outcome: "rejected", retryable: true });
    const requestId = randomUUID();
    verbatim.id = requestId;
    const p: Pending = { requestId, port, callerId, channel, route, timer: undefined };
    this.pending.set(requestId, p);
    this.inflight.set(port, mine + 1);
    p.timer = this.clock.setTimeout(
      () => this.finish(p, { error: { code: -32603, message: "MCP request outcome is indeterminate: no reply before the deadline", data: { outcome: "indeterminate" } } }),
      MCP_DEADLINE_MS,
    );
    const sent = route.deliver({ type: "mcp_request", requestId, session: s.uri, serverId: target.serverId, backendConnectionId: route.logicalId, message: verbatim });
    if (!sent) this.finish(p, { error: { code: -32603, message: "the MCP server is not available (its backend is not connected); nothing was sent", data: { outcome: "rejected" } } });
  }

  // ── Backend side ──────────────────────────────────────────────────────────
  /** Handle `mcp_response` / `mcp_notification` from a backend connection. */
  onBackendFrame(conn: BackendConn, f: Json): void {
    const version = conn.kind === "session" ? (conn.route?.version ?? conn.version) : conn.version;
    if (version < MCP_MIN_VERSION) return conn.error("unsupported_version", `${String(f.type)} requires protocol version ${MCP_MIN_VERSION}`);
    if (f.type === "mcp_response") return this.onResponse(conn, f);
    return this.onNotification(conn, f);
  }

  private refuse(conn: BackendConn): void {
    conn.send({ type: "error", code: MCP_SCOPE_REFUSED, message: "MCP frame refused: its scope is not a current session route of this connection" });
  }

  private onResponse(conn: BackendConn, f: Json): void {
    const rid = f.requestId;
    const m = f.message;
    if (typeof rid !== "string" || !isObj(m)) return conn.error("validation_error", "mcp_response needs requestId and a JSON-RPC message with result or error");
    const bad = responseError(m);
    if (bad) return conn.error("validation_error", `mcp_response ${bad}; nothing was relayed, and the request still waits for a valid reply`, rid.length <= 512 ? { requestId: rid } : {});
    const p = this.pending.get(rid);
    const supplied = f.backendConnectionId;
    if (!p || p.route.conn !== conn || p.route.retired !== "no" || conn.closed || (supplied !== undefined && supplied !== p.route.logicalId)) return this.refuse(conn);
    const s = this.st.sessions.get(p.route.sessionUri);
    if (!s || s.route !== p.route) return this.refuse(conn);
    this.finish(p, "error" in m ? { error: m.error } : { result: m.result });
  }

  private onNotification(conn: BackendConn, f: Json): void {
    const m = f.message;
    if (typeof f.serverId !== "string" || !isObj(m) || typeof m.method !== "string" || (m.params !== undefined && !isObj(m.params)))
      return conn.error("validation_error", "mcp_notification needs serverId and a JSON-RPC notification message");
    const supplied = f.backendConnectionId;
    let route: LogicalRoute | undefined;
    if (conn.kind === "session") {
      route = conn.route;
      if (supplied !== undefined && supplied !== route?.logicalId) return this.refuse(conn);
    } else {
      // Provider connections were told `scopedMcp: true`: the logical ID is required.
      if (typeof supplied !== "string") return this.refuse(conn);
      route = conn.epochs.get(supplied);
      if (route && conn.current.get(route.sessionUri) !== route) return this.refuse(conn);
    }
    if (!route || route.retired !== "no" || (f.session !== undefined && f.session !== route.sessionUri)) return this.refuse(conn);
    const s = this.st.sessions.get(route.sessionUri);
    const server = this.servers.get(route)?.get(f.serverId);
    if (!s || s.route !== route || !server) return this.refuse(conn);
    if (!server.serverNotifications.has(m.method)) return conn.error("validation_error", "notification method is not advertised for this MCP server");
    const out: Json = { jsonrpc: "2.0", method: m.method };
    if (m.params !== undefined) out.params = m.params;
    out.channel = server.channel; // the host's routing identity; a supplied channel is ignored
    const text = JSON.stringify(out);
    const subs = this.st.subs.get(s.uri);
    if (subs) for (const sub of subs) sub.sendRaw(text);
  }
}

const hubs = new WeakMap<HostState, McpHub>();
/** The MCP hub of one host state (created on first use). */
export function mcpHub(st: HostState): McpHub {
  let h = hubs.get(st);
  if (!h) hubs.set(st, (h = new McpHub(st)));
  return h;
}
