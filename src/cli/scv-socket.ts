/**
 * The SCV Unix socket of `berth daemon`.
 *
 * Contract:
 * - Path: `$SCV_HOME/state/server.sock` when SCV_HOME is set (non-empty), else `$MC_HOME/state/server.sock` (MC_HOME
 *   resolved as everywhere else). Always absolute.
 * - The directory is created owner-only (0700, and tightened to 0700 when it exists) and the socket is 0600.
 * - A socket file nobody answers on (ECONNREFUSED) is stale and removed; a live one is never replaced: startup fails
 *   with a message naming the path and the fix. Any other file at the path is refused too.
 * - Each accepted client is one SCV connection (`serveScvConnection`); client EOF ends only that connection.
 * - `close()` stops accepting, runs every connection's bounded cleanup (cancel, grace, abort, join) and removes the
 *   socket file.
 */
import { checkSocketPath } from "../transport/unix-listener.js";
import { chmodSync, lstatSync, mkdirSync, unlinkSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { dirname, join, resolve } from "node:path";
import { serveScvConnection, type ScvConnection, type ScvServerDeps } from "../protocols/scv/connection.js";
import { resolveHome, type EnvLike } from "../store/home.js";

export function scvSocketPath(env: EnvLike): string {
  const scv = env["SCV_HOME"];
  if (scv !== undefined && scv !== "") return join(resolve(scv), "state", "server.sock");
  return join(resolveHome(env), "state", "server.sock");
}

export interface ScvSocketHandle {
  path: string;
  /** Live connections (for status). */
  readonly connections: number;
  close(): Promise<void>;
}

function probe(path: string): Promise<"live" | "stale"> {
  return new Promise((resolveProbe) => {
    const s = createConnection(path);
    s.once("connect", () => {
      s.destroy();
      resolveProbe("live");
    });
    s.once("error", () => resolveProbe("stale"));
  });
}


/**
 * `perConnection` may replace dependencies for one accepted connection (the daemon binds its `daemon.control`
 * handler to the connection's peer with it).
 */
export async function listenScvSocket(path: string, deps: ScvServerDeps, perConnection?: (socket: Socket) => Partial<ScvServerDeps>): Promise<ScvSocketHandle> {
  checkSocketPath(path, "set SCV_HOME to a shorter directory");
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  let st;
  try {
    st = lstatSync(path);
  } catch {
    st = null;
  }
  if (st !== null) {
    if (!st.isSocket()) throw new Error(`${path} exists and is not a socket; remove it or set SCV_HOME to another directory`);
    if ((await probe(path)) === "live")
      throw new Error(`another server is listening on ${path}; stop it first (a live socket is never replaced) or set SCV_HOME to another directory`);
    unlinkSync(path);
  }
  const conns = new Set<ScvConnection>();
  const server: Server = createServer({ allowHalfOpen: true }, (socket: Socket) => {
    socket.on("error", () => undefined);
    const c = serveScvConnection(socket, socket, perConnection === undefined ? deps : { ...deps, ...perConnection(socket) });
    conns.add(c);
    void c.done.then(() => conns.delete(c));
  });
  await new Promise<void>((resolveListen, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) => reject(new Error(`cannot listen on ${path} (${e.code ?? "error"}); check the directory's permissions or set SCV_HOME`)));
    server.listen(path, () => {
      server.removeAllListeners("error");
      server.on("error", (e: NodeJS.ErrnoException) => deps.log?.(`SCV socket error (${e.code ?? "error"})`));
      resolveListen();
    });
  });
  chmodSync(path, 0o600);
  let closing: Promise<void> | null = null;
  return {
    path,
    get connections() {
      return conns.size;
    },
    close() {
      closing ??= (async () => {
        const closed = new Promise<void>((r) => server.close(() => r()));
        await Promise.all([...conns].map((c) => c.stop()));
        await closed;
        try {
          unlinkSync(path);
        } catch {
          // already gone
        }
      })();
      return closing;
    },
  };
}
