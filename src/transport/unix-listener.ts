/**
 * An owner-only Unix stream socket listener: a refused (stale) socket file left by a crashed process is
 * removed, a live listener is never replaced, the socket file is made 0600 and removed again on close.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { chmodSync, existsSync, lstatSync, unlinkSync } from "node:fs";

export interface UnixListener {
  readonly path: string;
  /** Stops accepting, then removes the socket file (already gone is fine). Open connections are the caller's. */
  close(): Promise<void>;
}

/** The longest Unix socket path Linux accepts (`sun_path` holds 108 bytes with the terminating NUL). */
export const MAX_SOCKET_PATH_BYTES = 107;

/**
 * Refuses a path too long for a Unix socket: libuv would bind a truncated path instead, i.e. a socket somewhere
 * else (outside the owner-only directory) that nobody looks for. `fix` says which setting shortens it.
 */
export function checkSocketPath(path: string, fix: string): void {
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) throw new Error(`the socket path ${path} is longer than ${MAX_SOCKET_PATH_BYTES} bytes; ${fix}`);
}

export async function listenUnix(path: string, onSocket: (sock: Socket) => void, log: (msg: string) => void): Promise<UnixListener> {
  checkSocketPath(path, "use a shorter directory");
  if (existsSync(path)) {
    const st = lstatSync(path);
    if (!st.isSocket()) throw new Error(`${path} exists and is not a socket`);
    const live = await new Promise<boolean>((resolve) => {
      const c = createConnection(path);
      c.once("connect", () => {
        c.destroy();
        resolve(true);
      });
      c.once("error", () => resolve(false));
    });
    if (live) throw new Error(`a live listener already owns ${path}`);
    log(`removing stale backend socket ${path}`);
    unlinkSync(path);
  }
  const server: Server = createServer(onSocket);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => {
      server.off("error", reject);
      resolve();
    });
  });
  chmodSync(path, 0o600);
  return {
    path,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      try {
        unlinkSync(path);
      } catch {
        /* already gone */
      }
    },
  };
}
