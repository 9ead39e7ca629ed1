/** `berth daemon [--listen HOST:PORT]`: the live-backend host. Ready line on stdout, logs on stderr. */
import { resolveHome, startHost, type HostHandle } from "../protocols/host/host.js";

const SHUTDOWN_DEADLINE_MS = 5000;

function parseListen(v: string): { host: string; port: number } | null {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(v);
  if (!m) return null;
  const port = Number(m[2]);
  if (port > 65535) return null;
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port };
}

export async function runDaemon(argv: string[]): Promise<number> {
  let listen = { host: "127.0.0.1", port: 0 };
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
    } else if (a === "-h" || a === "--help") {
      process.stderr.write("usage: berth daemon [--listen HOST:PORT]\n");
      return 0;
    } else {
      process.stderr.write(`berth daemon: unknown argument ${a}\n`);
      return 2;
    }
  }
  let handle: HostHandle;
  try {
    handle = await startHost({ home: resolveHome(), host: listen.host, port: listen.port });
  } catch (e) {
    process.stderr.write(`berth daemon: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
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
      handle.close().then(
        () => resolveExit(0),
        (e: unknown) => {
          process.stderr.write(`berth daemon: shutdown error: ${String(e)}\n`);
          resolveExit(1);
        },
      );
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
}
