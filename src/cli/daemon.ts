/**
 * `berth daemon [--listen HOST:PORT] [--berth-runtime]`: the live-backend host. Ready line on
 * stdout, logs on stderr. With `--berth-runtime`, Berth's own runtime is registered as provider
 * `berth` over the backend socket (in this process) before the ready line is printed.
 */
import { join } from "node:path";
import { startHost, type HostHandle } from "../protocols/host/host.js";
import { resolveHome } from "../store/home.js";

const SHUTDOWN_DEADLINE_MS = 5000;
const RUNTIME_READY_MS = 10_000;

import { containCrashes } from "./crash-containment.js";

/** Start the in-process Berth runtime backend; resolves with its close function. */
async function startRuntime(handle: HostHandle): Promise<() => Promise<void>> {
  const [{ BerthRuntimeBackend }, { Agent }, { SessionManager, SessionStore }, home] = await Promise.all([
    import("../backends/berth/backend.js"),
    import("../runtime/agent.js"),
    import("../store/sessions/index.js"),
    import("../store/home.js"),
  ]);
  const berthHome = home.resolveHome(process.env);
  const cwd = process.cwd();
  const rt = new BerthRuntimeBackend({
    socketPath: handle.backendSocket,
    manager: new SessionManager(new SessionStore({ home: berthHome })),
    runner: new Agent({ home: berthHome, cwd, env: process.env }),
    cwd,
    registryPath: join(handle.stateDir, "berth-runtime.json"),
    log: (m) => process.stderr.write(`berth daemon: ${m}\n`),
  });
  rt.start();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), RUNTIME_READY_MS)));
  const first = await Promise.race([rt.ready, timeout]);
  clearTimeout(timer);
  if (first === "timeout") {
    await rt.close();
    throw new Error("the Berth runtime did not register in time");
  }
  return () => rt.close();
}

function parseListen(v: string): { host: string; port: number } | null {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(v);
  if (!m) return null;
  const port = Number(m[2]);
  if (port > 65535) return null;
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port };
}

export async function runDaemon(argv: string[]): Promise<number> {
  containCrashes((m) => process.stderr.write(`berth daemon: ${m}\n`));
  let listen = { host: "127.0.0.1", port: 0 };
  let withRuntime = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--listen" || a.startsWith("--listen=")) {
      const v = a === "--listen" ? argv[++i] : a.slice("--listen=".length);
      const parsed = v ? parseListen(v) : null;
      if (!parsed) {
        process.stderr.write(`berth daemon: --listen needs HOST:PORT\n`);
        return 2;
      }
      listen = parsed;
    } else if (a === "--berth-runtime") {
      withRuntime = true;
    } else if (a === "-h" || a === "--help") {
      process.stderr.write("usage: berth daemon [--listen HOST:PORT] [--berth-runtime]\n");
      return 0;
    } else {
      process.stderr.write(`berth daemon: unknown argument ${a}\n`);
      return 2;
    }
  }
  let handle: HostHandle;
  try {
    handle = await startHost({ home: resolveHome(process.env), host: listen.host, port: listen.port });
  } catch (e) {
    process.stderr.write(`berth daemon: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
  let stopRuntime: () => Promise<void> = () => Promise.resolve();
  if (withRuntime) {
    try {
      stopRuntime = await startRuntime(handle);
    } catch (e) {
      process.stderr.write(`berth daemon: ${e instanceof Error ? e.message : String(e)}\n`);
      await handle.close();
      return 1;
    }
  }
  process.stdout.write(handle.readyLine() + "\n");
  return await new Promise<number>((resolveExit) => {
    let stopping = false;
    const stop = (sig: string) => {
      if (stopping) return;
      stopping = true;
      process.stderr.write(`berth daemon: ${sig}, shutting down\n`);
      const timer = setTimeout(() => {
        process.stderr.write("berth daemon: shutdown deadline passed, exiting\n");
        resolveExit(1);
        process.exit(1);
      }, SHUTDOWN_DEADLINE_MS);
      timer.unref();
      stopRuntime()
        .catch((e: unknown) => process.stderr.write(`berth daemon: runtime shutdown error: ${String(e)}\n`))
        .then(() => handle.close())
        .then(
        () => resolveExit(0),
        (e: unknown) => {
          process.stderr.write(`berth daemon: shutdown error: ${String(e)}\n`);
          resolveExit(1);
        },
      );
    };
    // `on`, not `once`: signal-exit (loaded by the lock and atomic-write libraries) re-raises a signal that no other
    // listener handles any more, which would kill the daemon mid-shutdown on the first signal. `stop` is idempotent.
    process.on("SIGTERM", () => stop("SIGTERM"));
    process.on("SIGINT", () => stop("SIGINT"));
  });
}
