/**
 * Host assembly: state directory, exclusive lock, bearer token, SQLite store, backend socket,
 * AHP WebSocket and HTTP inspection endpoints on one loopback listener.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes, timingSafeEqual } from "node:crypto";
import { WebSocketServer } from "ws";
import { HostStore } from "./store.js";
import { HostState } from "./state.js";
import { BackendServer } from "./backend.js";
import { AhpConnection } from "./ahp.js";
import { Inspector } from "./inspection.js";
import { acquireStateLock } from "./lock.js";
import { checkHostAndOrigin, isUiPath, selectSubprotocol, tokenFromSubprotocols } from "./ui-guard.js";

export const WIRE_LIMIT = 16 * 1024 * 1024;

export interface HostOptions {
  /** Root home (BERTH_HOME); the state directory is `<home>/host`. */
  home: string;
  host?: string;
  port?: number;
  log?: (msg: string) => void;
  /** Test hook: hold the inspection permit this long (ms) to exercise contention. */
  inspectionHoldMs?: number;
  /** Directory of the built web UI (default `dist/ui/`). */
  uiDir?: string;
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
  readyLine(): string;
  close(): Promise<void>;
}

export function resolveHome(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.BERTH_HOME || env.MC_HOME || join(homedir(), ".berth"));
}

function ensureOwnerDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

function loadToken(dir: string): string {
  const p = join(dir, "token");
  if (existsSync(p)) {
    chmodSync(p, 0o600);
    const t = readFileSync(p, "utf8").trim();
    if (t.length >= 32) return t;
  }
  const t = randomBytes(32).toString("base64url");
  writeFileSync(p, t + "\n", { mode: 0o600, flag: "w" });
  chmodSync(p, 0o600);
  return t;
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
  const listenHost = opts.host ?? "127.0.0.1";
  let port = 0;
  const http: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (isUiPath(url.pathname) && (req.method === "GET" || req.method === "HEAD")) {
      const g = checkHostAndOrigin(req, listenHost, port);
      if (!g.ok) return json(res, g.status, { error: "forbidden", message: g.reason });
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
    if (url.pathname === "/status") return inspector.inspect(res, () => inspector.status(startedAt, backend.conns.size));
    if (url.pathname === "/sessions" || url.pathname === "/providers") {
      if (!tokenOk(bearer(req), token)) return json(res, 401, { error: "unauthorized" });
      if (url.pathname === "/sessions") return inspector.inspect(res, (b) => inspector.sessions(b));
      return inspector.inspect(res, (b) => inspector.providers(b, url.searchParams.get("provider")));
    }
    return json(res, 404, { error: "not_found" });
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: WIRE_LIMIT, perMessageDeflate: false, handleProtocols: selectSubprotocol });
  const clients = new Set<AhpConnection>();
  http.on("upgrade", (req, socket, head) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname !== "/ahp") {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n");
      return;
    }
    const g = checkHostAndOrigin(req, listenHost, port);
    if (!g.ok) {
      socket.end(`HTTP/1.1 ${g.status === 403 ? "403 Forbidden" : "421 Misdirected Request"}\r\nConnection: close\r\n\r\n`);
      return;
    }
    if (!tokenOk(bearer(req) ?? tokenFromSubprotocols(req) ?? url.searchParams.get("tkn"), token)) {
      socket.end("HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\r\n");
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const c = new AhpConnection(ws, state, log);
      clients.add(c);
      ws.on("close", () => clients.delete(c));
    });
  });
  const host = listenHost;
  await new Promise<void>((res, rej) => {
    http.once("error", rej);
    http.listen(opts.port ?? 0, host, () => {
      http.off("error", rej);
      res();
    });
  });
  const addr = http.address();
  port = typeof addr === "object" && addr ? addr.port : 0;
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
    readyLine: () =>
      JSON.stringify({ ready: true, ahp: handle.ahpUrl, http: handle.httpUrl, token, backend_socket: backendSocket, ui: handle.uiUrl }),
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
