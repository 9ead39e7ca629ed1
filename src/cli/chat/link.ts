/**
 * `berth chat`'s transport: an initialized SCV v3 connection to a running `berth daemon` (its SCV socket) when one
 * answers, else to a `berth stdio` child.
 * Contract: the socket is `$SCV_HOME/state/server.sock` when SCV_HOME is set (not empty), else
 * `$MC_HOME/state/server.sock` (MC_HOME resolved as every command does). A missing socket, or one that refuses
 * connections (a dead daemon), falls back to `berth stdio`. `close()` ends the connection (the server cancels a
 * running turn) and, for a child, waits for it to exit. `closed` resolves once the connection is gone.
 */
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import type { Readable, Writable } from "node:stream";
import { DEFAULT_BIN } from "../../client/app-service/spawn.js";
import { ScvClient } from "../../client/scv/client.js";
import { spawnBerth } from "../../client/spawn-berth.js";
import { resolveHome, type EnvLike } from "../../store/home.js";
import { berthVersion } from "../version.js";

export interface Link {
  client: ScvClient;
  via: "daemon" | "stdio";
  closed: Promise<void>;
  /** The last few KiB of a `berth stdio` child's stderr (empty for the daemon). */
  stderrTail(): string;
  close(): Promise<void>;
}

export function scvSocketPath(env: EnvLike): string {
  const scv = env["SCV_HOME"];
  return scv !== undefined && scv !== "" ? join(scv, "state", "server.sock") : join(resolveHome(env), "state", "server.sock");
}

function trySocket(path: string): Promise<Socket | null> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once("connect", () => {
      s.removeAllListeners("error");
      resolve(s);
    });
    s.once("error", () => resolve(null));
  });
}

async function init(input: Readable, output: Writable): Promise<ScvClient> {
  const c = new ScvClient(input, output);
  await c.initialize({ name: "berth-chat", version: berthVersion() });
  return c;
}

export async function openLink(env: NodeJS.ProcessEnv, opts: { noDaemon?: boolean } = {}): Promise<Link> {
  const sock = opts.noDaemon === true || env["BERTH_CHAT_NO_DAEMON"] === "1" ? null : await trySocket(scvSocketPath(env));
  if (sock !== null) {
    sock.on("error", () => undefined);
    const closed = new Promise<void>((resolve) => sock.once("close", () => resolve()));
    const client = await init(sock, sock).catch((err: unknown) => {
      sock.destroy();
      throw err;
    });
    return {
      client,
      via: "daemon",
      closed,
      stderrTail: () => "",
      close: async () => {
        sock.end();
        const t = setTimeout(() => sock.destroy(), 5000);
        await closed;
        clearTimeout(t);
      },
    };
  }
  // The launcher's credential handoff: the stdio child's tools cannot read the keys from its environ.
  const child = spawnBerth(DEFAULT_BIN, ["stdio"], env, { stdio: ["pipe", "pipe", "pipe"] }) as ChildProcessWithoutNullStreams;
  let tail = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    tail = (tail + d).slice(-4096);
  });
  child.stdin.on("error", () => undefined);
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  const close = async (): Promise<void> => {
    if (!child.stdin.writableEnded) child.stdin.end();
    const t = setTimeout(() => child.kill("SIGKILL"), 5000);
    await closed;
    clearTimeout(t);
  };
  try {
    return { client: await init(child.stdout, child.stdin), via: "stdio", closed, stderrTail: () => tail, close };
  } catch (err) {
    await close();
    throw err;
  }
}
