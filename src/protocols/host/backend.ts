/**
 * Backend side of the host: the owner-only Unix stream socket speaking the live-backend
 * protocol v1–v14, and session registration (claims, aliases, fencing). Connection handling is
 * in backend-conn.ts.
 */
import { BACKEND_BACKLOG } from "./backend-outbox.js";
import { randomUUID } from "node:crypto";
import type { BackendErrorCode, HelloBody } from "./backend-schema.js";
import { BackendConn } from "./backend-conn.js";
import { LogicalRoute } from "./logical-route.js";
import type { Json } from "./model.js";
import type { HostState } from "./state.js";
import { mcpHub, mcpServersError, type McpServerDescriptor } from "./mcp-channels.js";
import { listenUnix, type UnixListener } from "../../transport/unix-listener.js";
import { onRegistered } from "./reconcile.js";
import { sourceCursors } from "./source-events.js";

export interface RegisterResult {
  route: LogicalRoute;
  payload: Json;
}

export class BackendServer {
  readonly conns = new Set<BackendConn>();
  private listener?: UnixListener;

  constructor(
    readonly state: HostState,
    readonly socketPath: string,
    readonly log: (msg: string) => void,
    /** Bytes that may wait for one backend before the host stops reading it (backend-outbox.ts). */
    readonly backlogBound = BACKEND_BACKLOG,
  ) {}

  /** Listen on the socket path: remove a refused stale socket, never replace a live listener. */
  async start(): Promise<void> {
    this.listener = await listenUnix(
      this.socketPath,
      (sock) => {
        const c = new BackendConn(sock, this);
        this.conns.add(c);
      },
      this.log,
    );
  }

  async close(): Promise<void> {
    for (const c of this.conns) c.fatal("shutting_down", "host is shutting down");
    await this.listener?.close();
    for (const c of this.conns) c.socket.destroy();
  }

  /** Register a session route (dedicated or multiplexed), applying claims, aliases and fencing. */
  register(conn: BackendConn, h: HelloBody, multiplexed: boolean, _requestId: string | undefined): RegisterResult | { error: string; code: BackendErrorCode } {
    const st = this.state;
    const mcpErr = mcpServersError(h.mcpServers);
    if (mcpErr) return { code: "validation_error", error: mcpErr };
    const aliases = h.sourceAliases ?? [];
    let requested: string | undefined;
    let claimed = false;
    if (h.requestedSession !== undefined) {
      const claim = st.checkClaim(h.requestedSession, h.creationToken!, h.provider);
      if (claim === "ok") {
        const res = st.creations.get(h.requestedSession)!;
        const pr = st.providers.get(res.provider);
        if (!pr) return { code: "creation_claim_invalid", error: "the provider route that admitted this creation is gone" };
        requested = h.requestedSession;
        claimed = true;
      } else {
        // Not a live claim: only the exact already-bound source/provider may reconnect to that URI.
        const s = st.sessions.get(h.requestedSession);
        const bound = s && st.sourceIndex.get(h.sourceId) === s.uri && s.provider === h.provider;
        if (!bound) return { code: "creation_claim_invalid", error: claim === "mismatch" ? "creation claim refused" : "no pending creation for that session" };
        requested = h.requestedSession;
      }
    }
    let existingUri: string | undefined;
    try {
      existingUri = requested ?? st.resolveSource(h.sourceId, aliases);
    } catch (e) {
      return { code: "alias_conflict", error: e instanceof Error ? e.message : String(e) };
    }
    if (requested && claimed) {
      // A claim must not collide with another session already bound to this source.
      const other = st.sourceIndex.get(h.sourceId);
      if (other && other !== requested) return { code: "creation_claim_invalid", error: "source is already bound to a different session" };
    }
    if (existingUri) {
      const existing = st.sessions.get(existingUri);
      if (existing && existing.provider !== h.provider && !claimed)
        return { code: "authority_error", error: "source is registered under a different provider" };
    }
    const { session } = st.registerSession({
      sourceId: h.sourceId,
      aliases,
      provider: h.provider,
      ...(h.title !== undefined ? { title: h.title } : {}),
      ...(requested ? { requestedSession: requested } : existingUri ? { requestedSession: existingUri } : {}),
      providerRoute: multiplexed || claimed,
      instanceId: h.instanceId,
      ...(h.model !== undefined ? { model: h.model } : {}),
      ...(h.thinkingLevel !== undefined ? { thinkingLevel: h.thinkingLevel } : {}),
      ...(h.interactivity !== undefined ? { interactivity: h.interactivity } : {}),
      ...(h.history !== undefined ? { history: h.history } : {}),
      ...(h.historyNextCursor !== undefined ? { historyNextCursor: h.historyNextCursor } : {}),
    });
    if (claimed) st.dropCreation(requested!);
    // Fence the previous route for this session.
    const prev = session.route as LogicalRoute | undefined;
    const prevInstanceId = prev?.instanceId ?? session.lastInstanceId;
    const logicalId = multiplexed ? randomUUID() : conn.connectionId;
    const reRegistration = multiplexed && conn.epochs.latest(session.uri) !== undefined;
    const route = new LogicalRoute(
      logicalId,
      conn,
      session.uri,
      h.protocolVersion,
      h.instanceId,
      h.protocolVersion >= 2 && h.inputCapabilities !== undefined,
      h.protocolVersion >= 4 && h.toolCapabilities !== undefined,
      h.protocolVersion >= 3 ? (h.chatCapabilities ?? {}) : {},
      multiplexed,
      reRegistration,
    );
    route.clientTools = h.protocolVersion >= 4 && h.toolCapabilities?.clientTools === true;
    if (h.multipleWorkingDirectories) route.workingDirs = { immutablePrimary: h.multipleWorkingDirectories.immutablePrimary === true, primaryReplacement: h.multipleWorkingDirectories.primaryReplacement === true };
    route.inputDrafts = h.protocolVersion >= 6 && h.inputCapabilities?.drafts === true;
    if (prev && prev !== route) {
      prev.retired = prev.retired === "no" ? "replaced" : prev.retired;
      st.failRoute((x) => x === prev);
      if (prev.conn === conn && multiplexed) {
        conn.current.delete(session.uri);
      } else if (prev.multiplexed) {
        prev.conn.current.delete(session.uri);
        prev.conn.send({ type: "error", code: "backend_replaced", session: session.uri, backendConnectionId: prev.logicalId, message: "a newer registration replaced this route" });
      } else {
        prev.conn.fatal("backend_replaced", "a newer connection registered the same source");
      }
    }
    session.route = route;
    mcpHub(st).routeRegistered(session, route, h.mcpServers as McpServerDescriptor[] | undefined, prev);
    if (multiplexed) {
      conn.current.set(session.uri, route);
      conn.epochs.add(route);
    }
    if (claimed || session.lifecycle === "creating") st.markReady(session);
    onRegistered(st, session, route, h, prevInstanceId);
    st.summaryChanged(session, true);
    const payload: Json = {
      protocolVersion: h.protocolVersion,
      hostId: st.hostId,
      session: session.uri,
      chat: session.primaryChat,
      backendConnectionId: logicalId,
      sourceContinuity: session.continuity,
    };
    const cursor = st.sourceCursor(session);
    if (cursor) payload.sourceCursor = cursor;
    if (h.protocolVersion >= 11) payload.sourceCursors = sourceCursors(session);
    return { route, payload };
  }
}

export { BackendConn, LogicalRoute };
