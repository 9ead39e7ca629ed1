/**
 * `berth chat`'s transport: an initialized SCV v3 connection to a running `berth daemon` (its SCV socket) when one
 * answers, else to a `berth stdio` child, or (`inProcess`, for `-p`) to the same SCV server run in this process.
 * Contract: the socket is `$SCV_HOME/state/server.sock` when SCV_HOME is set (not empty), else
 * `$MC_HOME/state/server.sock` (MC_HOME resolved as every command does). A missing socket, one that refuses
 * connections (a dead daemon), or a connection closed before the handshake is answered (a daemon going away) falls
 * back to `berth stdio` (or the in-process server). A socket path that cannot reach a daemon for a cause the user can
 * fix (a regular file in its place, a socket left by a daemon that stopped, an `SCV_HOME` below something that is not
 * a directory, no permission) is named with the fix in `note` (a missing socket, no daemon running, is not: null).
 * `close()` ends the
 * connection (the server cancels a running turn) and waits until the server let go of the session: a child has
 * exited, or the in-process server finished its cleanup (session closed, MCP servers stopped). `closed` resolves
 * once the connection is gone.
 * The in-process server is `berth stdio`'s own composition (cli/scv-deps.ts, protocols/scv/connection.ts) over an
 * in-memory stream pair: chat stays a client of the SCV protocol. Its diagnostics go to `stderrTail()`, never to
 * the terminal, as a child's stderr does. Tools see what they would see under the child: their environment is
 * built by `cleanToolEnv` (runtime/env.ts) and the launcher already moved credentials out of this process's
 * exec-time environment (docs/security.md).
 */
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { lstatSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { PassThrough, type Readable, type Writable } from "node:stream";
import { ScvClient, ScvConnectionError } from "../../client/scv/client.js";
import { resolveHome, type EnvLike } from "../../store/home.js";
import { notADirectoryIn } from "../../store/state-root.js";
import { berthVersion } from "../version.js";
import { mark } from "../../runtime/debug-timing.js";

/** `bin/berth` of this installation (the `berth stdio` child runs it). */
const BERTH_BIN = fileURLToPath(new URL("../../../../bin/berth", import.meta.url));

export interface Link {
  client: ScvClient;
  via: "daemon" | "stdio" | "in-process";
  closed: Promise<void>;
  /** Why the daemon's socket path reached no daemon, with the fix (one line), or null. */
  note: string | null;
  /** The last few KiB of a `berth stdio` child's stderr, or of the in-process server's log (empty for the daemon). */
  stderrTail(): string;
  close(): Promise<void>;
}

export function scvSocketPath(env: EnvLike): string {
  const scv = env["SCV_HOME"];
  return scv !== undefined && scv !== "" ? join(scv, "state", "server.sock") : join(resolveHome(env), "state", "server.sock");
}

/** The connected socket, or the code of the connection's failure. */
function trySocket(path: string): Promise<Socket | { code: string }> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once("connect", () => {
      s.removeAllListeners("error");
      resolve(s);
    });
    s.once("error", (e: NodeJS.ErrnoException) => resolve({ code: e.code ?? "error" }));
  });
}

/**
 * Why `path` (the daemon's socket path of `env`) reaches no daemon when that is something to fix, with the fix and
 * what the chat does meanwhile; null when no socket is there (no daemon running) or nothing is known.
 */
export function socketProblem(path: string, env: EnvLike, connectCode: string | null): string | null {
  const scv = env["SCV_HOME"];
  const scvSet = scv !== undefined && scv !== "";
  const meanwhile = "this chat serves itself meanwhile";
  let st;
  try {
    st = lstatSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const blocked = code === "ENOTDIR" ? notADirectoryIn(path) : null;
    if (blocked !== null) {
      const which = scvSet ? `SCV_HOME=${scv}` : `MC_HOME=${resolveHome(env)}`;
      const fix = scvSet ? "set SCV_HOME to the directory berth daemon was started with (or unset it)" : "set MC_HOME to a directory you own";
      return `${which} cannot hold a berth daemon's socket: ${blocked.component} is ${blocked.is}, not a directory; ${fix}; ${meanwhile}`;
    }
    if (code === "EACCES" || code === "EPERM") return `the berth daemon's socket ${path} cannot be reached (${code}: permission denied); run berth chat as the daemon's user; ${meanwhile}`;
    return null;
  }
  if (!st.isSocket())
    return `${path} is ${st.isFile() ? "a regular file" : "not a socket"}, not a berth daemon's socket (berth daemon cannot start while it is there): remove it; ${meanwhile}`;
  if (connectCode === "EACCES" || connectCode === "EPERM")
    return `the berth daemon's socket ${path} cannot be reached (${connectCode}: permission denied); run berth chat as the daemon's user; ${meanwhile}`;
  if (connectCode === "ECONNREFUSED")
    return `no berth daemon answers at ${path} (a socket left behind by a daemon that stopped): start berth daemon${scvSet ? " with this SCV_HOME to use one, or unset SCV_HOME" : " to use one"}; ${meanwhile}`;
  return null;
}

async function init(input: Readable, output: Writable): Promise<ScvClient> {
  const c = new ScvClient(input, output);
  await c.initialize({ name: "berth-chat", version: berthVersion() });
  return c;
}

/** Loads the in-process SCV server's modules (the whole runtime); started early so loading overlaps other work. */
export function loadInProcessServer(): Promise<[typeof import("../../protocols/scv/connection.js"), typeof import("../scv-deps.js")]> {
  serverModules ??= Promise.all([import("../../protocols/scv/connection.js"), import("../scv-deps.js")]);
  return serverModules;
}
let serverModules: ReturnType<typeof loadInProcessServer> | null = null;

/** The SCV server of `berth stdio`, run in this process over an in-memory stream pair. */
async function openInProcess(env: NodeJS.ProcessEnv): Promise<Link> {
  const [{ serveScvConnection }, { buildScvDeps }] = await loadInProcessServer();
  mark("chat.server_loaded");
  // Stdout is the chat's answer (or its JSON events): a stray console writer in the server goes to stderr.
  // Made at the first stray write: a Console (and process.stderr) cost ~1 ms before the first token otherwise.
  let toStderr: Console | null = null;
  for (const m of ["log", "info", "debug", "dir"] as const)
    (console as unknown as Record<string, unknown>)[m] = (...args: unknown[]): void => {
      toStderr ??= new console.Console(process.stderr, process.stderr);
      (toStderr[m] as (...a: unknown[]) => void)(...args);
    };
  let tail = "";
  const log = (l: string): void => void (tail = `${tail}${l}\n`.slice(-4096));
  const scv = await buildScvDeps({ home: resolveHome(env), env, transport: "stdio", log });
  mark("chat.server_built");
  // `-p` opens a session and starts a turn next: the turn path loads while the handshake, preflight and session run.
  scv.warm();
  const toServer = new PassThrough();
  const toClient = new PassThrough();
  const conn = serveScvConnection(toServer, toClient, scv.deps);
  const closed = conn.done
    .then(() => scv.close())
    .catch((e: unknown) => log(`cleanup failed (${e instanceof Error ? e.name : "error"})`))
    .then(() => {
      if (!toClient.writableEnded) toClient.end();
    });
  const close = async (): Promise<void> => {
    if (!toServer.writableEnded) toServer.end();
    await closed;
  };
  try {
    return { client: await init(toClient, toServer), via: "in-process", note: null, closed, stderrTail: () => tail, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * The daemon's socket when one answers; else `berth stdio` as a child, or with `inProcess` the same server in this
 * process (no second Node boot: `berth chat -p`'s first token; see docs/chat.md, Transport).
 */
export async function openLink(env: NodeJS.ProcessEnv, opts: { noDaemon?: boolean; inProcess?: boolean } = {}): Promise<Link> {
  const noDaemon = env["BERTH_CHAT_NO_DAEMON"] === "1";
  const path = scvSocketPath(env);
  const tried = opts.noDaemon === true || noDaemon ? null : await trySocket(path);
  const sock = tried === null || "code" in tried ? null : tried;
  // `noDaemon` from the caller: it found no file at the path (missing, or below a file); told when it is the latter.
  const note = sock !== null || noDaemon ? null : socketProblem(path, env, tried !== null && "code" in tried ? tried.code : null);
  // A daemon that closes the connection before the handshake is answered is going away (killed: its socket can take
  // a connection in the instant before the kernel closes it; or shutting down): served as if none answered.
  const client = sock === null ? null : await init(sock, sock).catch((err: unknown) => {
    sock.destroy();
    if (err instanceof ScvConnectionError) return null;
    throw err;
  });
  if (sock !== null && client !== null) {
    sock.on("error", () => undefined);
    const closed = sock.destroyed ? Promise.resolve() : new Promise<void>((resolve) => sock.once("close", () => resolve()));
    return {
      client,
      via: "daemon",
      note: null,
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
  if (opts.inProcess === true) return { ...(await openInProcess(env)), note };
  // The launcher's credential handoff: the stdio child's tools cannot read the keys from its environ. (Loaded here:
  // `-p` runs the server in this process and never spawns, so node:child_process stays off its first token's path.)
  const { spawnBerth } = await import("../../client/spawn-berth.js");
  const child = spawnBerth(BERTH_BIN, ["stdio"], env, { stdio: ["pipe", "pipe", "pipe"] }) as ChildProcessWithoutNullStreams;
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
    return { client: await init(child.stdout, child.stdin), via: "stdio", note, closed, stderrTail: () => tail, close };
  } catch (err) {
    await close();
    // What the child said before it ended names the cause (a state root refused, a build missing…).
    const last = tail.trim().split("\n").at(-1)?.slice(0, 300) ?? "";
    if (last !== "" && err instanceof Error) err.message = `${err.message}: berth stdio said "${last}"`;
    throw err;
  }
}
