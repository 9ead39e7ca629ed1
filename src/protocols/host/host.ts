/**
 * Host assembly: state directory, exclusive lock, bearer token, SQLite store, backend socket,
 * AHP WebSocket and HTTP inspection endpoints on one loopback listener.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { chmodSync, existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { timingSafeEqual } from "node:crypto";
import { WebSocketServer } from "ws";
import { HostStore } from "../../store/host/store.js";
import { loadToken } from "../../store/host/token.js";
import { HostState } from "./state.js";
import { BackendServer } from "./backend.js";
import { AhpConnection } from "./ahp.js";
import { Inspector } from "./inspection.js";
import { acquireStateLock } from "../../store/host/lock.js";

export const WIRE_LIMIT = 16 * 1024 * 1024;

export interface HostOptions {
  /** Root home (BERTH_HOME); the state directory is `<home>/host`. */
  home: string;
  host?: string;
  port?: number;
  log?: (msg: string) => void;
  /** Test hook: hold the inspection permit this long (ms) to exercise contention. */
  inspectionHoldMs?: number;
}

export interface HostHandle {
  state: HostState;
  stateDir: string;
  token: string;
  port: number;
  ahpUrl: string;
  httpUrl: string;
  backendSocket: string;
  readyLine(): string;
  close(): Promise<void>;
}

function ensureOwnerDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

function tokenOk(presented: string | undefined | null, token: string): boolean {
  if (!presented) return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
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
  ensureOwnerDir(stateDir);
  let release: () => Promise<void>;
  try {
    release = await acquireStateLock(stateDir, log);
  } catch (e) {
    throw new Error(`state directory ${stateDir} is locked by another daemon (${e instanceof Error ? e.message : String(e)})`);
  }
  const token = loadToken(stateDir);
  const store = new HostStore(join(stateDir, "host.db"));
  for (const f of ["host.db", "host.db-wal", "host.db-shm"]) if (existsSync(join(stateDir, f))) chmodSync(join(stateDir, f), 0o600);
  const state = new HostState(store, log);
  const backendSocket = join(stateDir, "backend.sock");
  const backend = new BackendServer(state, backendSocket, log);
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
  const json = (res: ServerResponse, code: number, body: unknown) => {
    res.writeHead(code, { "content-type": "application/json", "cache-control": "no-store" });
    res.end(JSON.stringify(body));
  };
  const http: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (req.method !== "GET") return json(res, 405, { error: "method_not_allowed" });
    if (url.pathname === "/healthz") return json(res, 200, { ok: true });
    if (url.pathname === "/status") return inspector.inspect(res, () => inspector.status(startedAt, backend.conns.size));
    if (url.pathname === "/sessions" || url.pathname === "/providers") {
      if (!tokenOk(bearer(req), token)) return json(res, 401, { error: "unauthorized" });
      if (url.pathname === "/sessions") return inspector.inspect(res, (b) => inspector.sessions(b));
      return inspector.inspect(res, (b) => inspector.providers(b, url.searchParams.get("provider")));
    }
    return json(res, 404, { error: "not_found" });
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: WIRE_LIMIT, perMessageDeflate: false });
  const clients = new Set<AhpConnection>();
  http.on("upgrade", (req, socket, head) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname !== "/ahp") {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n");
      return;
    }
    if (!tokenOk(bearer(req) ?? url.searchParams.get("tkn"), token)) {
      socket.end("HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\r\n");
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const c = new AhpConnection(ws, state, log);
      clients.add(c);
      ws.on("close", () => clients.delete(c));
    });
  });
  const host = opts.host ?? "127.0.0.1";
  await new Promise<void>((res, rej) => {
    http.once("error", rej);
    http.listen(opts.port ?? 0, host, () => {
      http.off("error", rej);
      res();
    });
  });
  const addr = http.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  const hostPart = host.includes(":") ? `[${host}]` : host;
  let closed = false;
  const handle: HostHandle = {
    state,
    stateDir,
    token,
    port,
    ahpUrl: `ws://${hostPart}:${port}/ahp`,
    httpUrl: `http://${hostPart}:${port}`,
    backendSocket,
    readyLine: () =>
      JSON.stringify({ ready: true, ahp: handle.ahpUrl, http: handle.httpUrl, token, backend_socket: backendSocket }),
    close: async () => {
      if (closed) return;
      closed = true;
      for (const c of clients) c.ws.close(1001, "host shutting down");
      wss.close();
      await backend.close();
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
      for (const p of state.pending.keys()) state.settle(p, { kind: "indeterminate", error: "host shutting down" });
      store.close();
      await release().catch(() => {});
    },
  };
  return handle;
}
