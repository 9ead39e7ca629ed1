/**
 * Host assembly: state directory, exclusive lock, bearer token, SQLite store, backend socket,
 * AHP WebSocket and HTTP inspection endpoints on one loopback listener.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { join, resolve } from "node:path";
import { timingSafeEqual } from "node:crypto";
import type { Socket } from "node:net";
import { WebSocketServer } from "ws";
import { HostStore } from "../../store/host/store.js";
import { loadToken } from "../../store/host/token.js";
import { HostState } from "./state.js";
import { BackendServer } from "./backend.js";
import { AhpConnection } from "./ahp.js";
import { ClientBudget } from "./client-outbox.js";
import { AhpSocket, MAX_AHP_MESSAGE } from "./ahp-socket.js";
import { Inspector, json } from "./inspection.js";
import { checkHostOrigin, listenerNames, type ListenerNames } from "./http-guard.js";
import { acquireStateLock } from "../../store/host/lock.js";
import { ensureOwnerDir, restrictStoreFiles } from "../../store/host/state-dir.js";
import { isUiPath, selectSubprotocol, tokenFromSubprotocols, uiProof } from "./ui-guard.js";
import { clientToolsClosing } from "./client-tools.js";
import { checkSocketPath } from "../../transport/unix-listener.js";
import { UI_PROOF_NONCE } from "../../core/ui-proof.js";

export const WIRE_LIMIT = MAX_AHP_MESSAGE;
/** At most this many TCP connections may be open on the listener before authenticating. */
export const MAX_PREAUTH_CONNECTIONS = 64;
/** A pre-authentication connection idle this long is closed. */
export const PREAUTH_IDLE_MS = 10_000;

/**
 * At shutdown, how long AHP clients get to answer the close frame before their sockets are cut: one that does not read
 * would otherwise hold its socket for the WebSocket library's 30 s close timeout, past the daemon's 5 s deadline.
 */
export const CLIENT_CLOSE_GRACE_MS = 1000;

export interface HostOptions {
  /** Root home (BERTH_HOME); the state directory is `<home>/host`. */
  home: string;
  host?: string;
  port?: number;
  /** With `port` 0 (or unset): the port to try first (the one the daemon used last); a taken one falls back to 0. */
  preferPort?: number;
  log?: (msg: string) => void;
  /** Idle timeout of pre-authentication connections (default PREAUTH_IDLE_MS). */
  preAuthIdleMs?: number;
  /** Test hook: hold the inspection permit this long (ms) to exercise contention. */
  inspectionHoldMs?: number;
  /** Directory of the built web UI (default `dist/ui/`). */
  uiDir?: string;
  /** v13: bound (bytes) on a resource-carried snapshot's decoded content; none by default. */
  sessionContentQuota?: number;
  /** Daemon-wide bound on bytes waiting to be written to AHP clients (default DEFAULT_CLIENT_BYTES_BOUND). */
  clientBytesBound?: number;
  /** Bytes waiting for one backend before the host stops reading it (default BACKEND_BACKLOG). */
  backendBytesBound?: number;
}

export interface HostHandle {
  state: HostState;
  stateDir: string;
  token: string;
  port: number;
  ahpUrl: string;
  httpUrl: string;
  /** The web UI's URL, token in the fragment (never sent to the server). */
  uiUrl: string;
  backendSocket: string;
  /** The Host/Origin names the listener answers to (pass to `checkHostOrigin` in added routes). */
  listenerNames: ListenerNames;
  /** Bytes waiting to be written to AHP clients, daemon-wide, and their bound. */
  clientBudget: ClientBudget;
  /** The backend socket's server and its connections. */
  backend: BackendServer;
  readyLine(): string;
  close(): Promise<void>;
}

function tokenOk(presented: string | undefined | null, token: string): boolean {
  if (!presented) return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

const BAD_TARGET = "the request target is not a valid URL path";
const NO_TOKEN =
  "the AHP WebSocket needs this daemon's token: send Authorization: Bearer <token> (the token is in the daemon's ready line and in host/token under its home), or the berth-token.<token> sub-protocol from a browser";
const WRONG_TOKEN =
  "the token presented is not this daemon's: send the one in its ready line or in host/token under its home (a daemon started with another home has another token)";

/** Refuse a WebSocket upgrade with an HTTP status and a fixed JSON body (never the request's headers), and close. */
function refuseUpgrade(socket: Socket, status: string, body: { error: string; message: string }): void {
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n\r\n${JSON.stringify(body)}`);
}

/** The request target as a URL; null when it does not parse (e.g. `http://[`), which is the client's error. */
function requestUrl(req: IncomingMessage): URL | null {
  try {
    return new URL(req.url ?? "/", "http://localhost");
  } catch {
    return null;
  }
}

function bearer(req: IncomingMessage): string | undefined {
  const h = req.headers.authorization;
  if (typeof h === "string" && h.startsWith("Bearer ")) return h.slice(7).trim();
  return undefined;
}

export async function startHost(opts: HostOptions): Promise<HostHandle> {
  const log = opts.log ?? ((m: string) => process.stderr.write(`berth host: ${m}\n`));
  const home = resolve(opts.home);
  ensureOwnerDir(home);
  const stateDir = join(home, "host");
  // Before anything is created: a path too long for a Unix socket would otherwise be bound truncated, elsewhere.
  checkSocketPath(join(stateDir, "backend.sock"), "set MC_HOME to a shorter directory");
  ensureOwnerDir(stateDir);
  let release: () => Promise<void>;
  try {
    release = await acquireStateLock(stateDir, log);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const message = e instanceof Error ? e.message : String(e);
    // The CLI names the running daemon (its pid and address) from its endpoint record: cli/daemon.ts.
    if (code === "ELOCKED") throw Object.assign(new Error(`another berth daemon is already running with ${home} (its state directory ${stateDir} is locked)`), { code, stateDir, home });
    // Anything else (a disk refusing the lock's owner record) keeps its code, so the caller can name cause and fix.
    throw Object.assign(new Error(`state directory ${stateDir}: ${message}`), { code });
  }
  let token: string;
  try {
    token = loadToken(stateDir);
  } catch (e) {
    await release();
    throw e;
  }
  const store = new HostStore(join(stateDir, "host.db"));
  restrictStoreFiles(stateDir);
  const state = new HostState(store, log);
  state.sessionContentQuota = opts.sessionContentQuota;
  const backendSocket = join(stateDir, "backend.sock");
  const backend = new BackendServer(state, backendSocket, log, opts.backendBytesBound);
  try {
    await backend.start();
  } catch (e) {
    store.close();
    await release();
    throw e;
  }

  // ── HTTP + WebSocket ──────────────────────────────────────────────────────
  const startedAt = Date.now();
  const inspector = new Inspector(state, WIRE_LIMIT, opts.inspectionHoldMs);
  // Every request and upgrade passes the Host/Origin guard (http-guard.ts) before routing; the
  // names are fixed once the listener's port is known.
  let names: ListenerNames = { hosts: new Set() };
  let listenPort = 0;
  const route = (req: IncomingMessage, res: ServerResponse) => {
    const refused = checkHostOrigin(req, names);
    if (refused) return json(res, refused.status, { error: refused.error, message: refused.message });
    const url = requestUrl(req);
    if (url === null) return json(res, 400, { error: "bad_request", message: BAD_TARGET });
    if (isUiPath(url.pathname) && (req.method === "GET" || req.method === "HEAD")) {
      // Loaded on first use: the UI server stays off the daemon's cold path.
      void import("./ui-static.js")
        .then((m) => m.serveUi(url.pathname, res, opts.uiDir, req.method === "HEAD"))
        .catch((e: unknown) => {
          log(`ui: ${String(e)}`);
          if (!res.headersSent) json(res, 500, { error: "internal" });
          else res.destroy();
        });
      return;
    }
    if (req.method !== "GET") return json(res, 405, { error: "method_not_allowed" });
    if (url.pathname === "/healthz") return json(res, 200, { ok: true });
    if (url.pathname === "/ui-proof") {
      // Before a page hands this listener the token, the listener proves it holds it (core/ui-proof.ts).
      const nonce = url.searchParams.get("nonce") ?? "";
      if (!UI_PROOF_NONCE.test(nonce)) return json(res, 400, { error: "bad_request", message: "nonce must be 16 to 128 base64url characters" });
      return json(res, 200, { proof: uiProof(token, listenPort, nonce) });
    }
    if (url.pathname === "/status") return inspector.inspect(res, () => inspector.status(startedAt, backend.conns.size));
    if (url.pathname === "/sessions" || url.pathname === "/providers") {
      if (!tokenOk(bearer(req), token)) return json(res, 401, { error: "unauthorized" });
      if (url.pathname === "/sessions") return inspector.inspect(res, (b) => inspector.sessions(b));
      return inspector.inspect(res, (b) => inspector.providers(b, url.searchParams.get("provider")));
    }
    return json(res, 404, { error: "not_found" });
  };
  const http: Server = createServer((req, res) => {
    try {
      route(req, res);
    } catch (e) {
      log(`http: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      if (!res.headersSent) json(res, 500, { error: "internal_error" });
      else res.destroy();
    }
  });
  // Pre-authentication connections (every TCP connection until it becomes an authenticated AHP
  // WebSocket) are capped and time out when idle: idle sockets cannot exhaust descriptors and
  // starve /healthz, backends or AHP clients. At the cap the OLDEST pre-auth connection is
  // dropped, so a prompt new client still gets in.
  const preAuth = new Set<Socket>();
  const preAuthIdleMs = opts.preAuthIdleMs ?? PREAUTH_IDLE_MS;
  http.on("connection", (socket: Socket) => {
    if (preAuth.size >= MAX_PREAUTH_CONNECTIONS) {
      const oldest = preAuth.values().next().value as Socket;
      preAuth.delete(oldest);
      oldest.destroy();
    }
    preAuth.add(socket);
    socket.setTimeout(preAuthIdleMs, () => socket.destroy());
    socket.once("close", () => preAuth.delete(socket));
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: WIRE_LIMIT, perMessageDeflate: false, handleProtocols: selectSubprotocol, WebSocket: AhpSocket });
  const clients = new Set<AhpConnection>();
  const clientBudget = new ClientBudget(opts.clientBytesBound);
  http.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    try {
      const refused = checkHostOrigin(req, names);
      if (refused) return refuseUpgrade(socket, "403 Forbidden", { error: refused.error, message: refused.message });
      const url = requestUrl(req);
      if (url === null) return refuseUpgrade(socket, "400 Bad Request", { error: "bad_request", message: BAD_TARGET });
      if (url.pathname !== "/ahp") return refuseUpgrade(socket, "404 Not Found", { error: "not_found", message: "no WebSocket is served at this path: the AHP WebSocket is at /ahp" });
      const presented = bearer(req) || tokenFromSubprotocols(req) || url.searchParams.get("tkn");
      if (!tokenOk(presented, token)) return refuseUpgrade(socket, "401 Unauthorized", { error: "unauthorized", message: presented ? WRONG_TOKEN : NO_TOKEN });
      preAuth.delete(socket);
      socket.setTimeout(0);
      wss.handleUpgrade(req, socket, head, (ws) => {
        const c = new AhpConnection(ws, state, log, clientBudget);
        clients.add(c);
        ws.on("close", () => clients.delete(c));
      });
    } catch (e) {
      log(`http: internal error in upgrade: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      socket.destroy();
    }
  });
  const host = opts.host ?? "127.0.0.1";
  const listenOn = (port: number): Promise<void> =>
    new Promise<void>((res, rej) => {
      http.once("error", rej);
      http.listen(port, host, () => {
        http.off("error", rej);
        res();
      });
    });
  try {
    const prefer = (opts.port ?? 0) === 0 ? opts.preferPort : undefined;
    if (prefer === undefined) await listenOn(opts.port ?? 0);
    else await listenOn(prefer).catch(() => listenOn(0));
  } catch (e) {
    // Nothing started stays behind (the backend socket, the database, the state lock): the process can exit, and
    // the next start does not find a lock held by a daemon that never served.
    wss.close();
    await backend.close().catch(() => undefined);
    store.close();
    await release().catch(() => undefined);
    throw listenFailure(e, host, opts.port ?? 0);
  }
  const addr = http.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  names = listenerNames(host, port);
  listenPort = port;
  const hostPart = host.includes(":") ? `[${host}]` : host;
  // A wildcard listen is reachable on loopback; the browser is pointed there.
  const uiHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : hostPart;
  let closed = false;
  const handle: HostHandle = {
    state,
    stateDir,
    token,
    port,
    ahpUrl: `ws://${hostPart}:${port}/ahp`,
    httpUrl: `http://${hostPart}:${port}`,
    uiUrl: `http://${uiHost}:${port}/#token=${token}`,
    backendSocket,
    listenerNames: names,
    clientBudget,
    backend,
    readyLine: () =>
      JSON.stringify({ ready: true, ahp: handle.ahpUrl, http: handle.httpUrl, token, backend_socket: backendSocket, ui: handle.uiUrl }),
    close: async () => {
      if (closed) return;
      closed = true;
      clientToolsClosing(state);
      for (const c of clients) {
        c.flushFrames(); // what was published before the shutdown still reaches the client
        c.ws.close(1001, "host shutting down");
      }
      const cut = setTimeout(() => {
        for (const c of clients) c.ws.terminate();
      }, CLIENT_CLOSE_GRACE_MS);
      cut.unref();
      wss.close();
      await backend.close();
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
      clearTimeout(cut);
      for (const p of state.pending.keys()) state.settle(p, { kind: "indeterminate", error: "host shutting down" });
      state.checkpoints.flushAll(); // running turns are restored (output-discontinuous) by the next start
      store.close();
      await release().catch(() => {});
    },
  };
  return handle;
}

/**
 * Why the AHP listener could not bind `host:port`, with the fix. The errno code is not kept: `EACCES` here is about a
 * port, not Berth's files, and the daemon names a coded start-up failure as a storage problem.
 */
export function listenFailure(e: unknown, host: string, port: number): Error {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  const name = host.includes(":") ? `[${host}]` : host;
  const why =
    code === "EADDRINUSE"
      ? `another program is listening on that port; choose another with --listen ${name}:PORT (port 0 picks a free one)`
      : code === "EADDRNOTAVAIL"
        ? "no network interface of this machine has that address; use 127.0.0.1 (loopback) or one of this machine's addresses"
        : code === "EACCES"
          ? "this user may not listen on that port (ports below 1024 need privileges); choose a port of 1024 or more, or 0"
          : code === "ENOTFOUND" || code === "EAI_AGAIN"
            ? "that host name does not resolve; give an IP address such as 127.0.0.1"
            : (e instanceof Error ? e.message : String(e));
  return new Error(`cannot listen on ${name}:${port}: ${why}`);
}
