/**
 * `berth service` and `magi-code --app service`: the composition root of the app-service protocol over stdio.
 * Startup creates the state root (owner-only) and nothing else, and refuses a state root another user owns or may
 * write (store/state-root.ts); every other file is created by the request that needs it.
 */
import { readFileSync } from "node:fs";
import { resolveHome } from "../store/home.js";
import { prepareStateRoot } from "../store/state-root.js";
import { AppServiceServer } from "../protocols/app-service/server.js";
import { buildFamilies } from "./service-families.js";

const REFUSED = "magi-code: --app service takes no other arguments (no --prompt, provider, model, credential, theme, session-selection flags or subcommands)\n";

/** `magi-code` accepts exactly `--app service` (or `--app=service`). */
export async function runMagiCode(argv: string[]): Promise<number> {
  const isService = (argv.length === 2 && argv[0] === "--app" && argv[1] === "service") || (argv.length === 1 && argv[0] === "--app=service");
  if (isService) return runService();
  const mentionsService = argv.includes("--app") || argv.some((a) => a.startsWith("--app="));
  process.stderr.write(mentionsService ? REFUSED : "usage: magi-code --app service\n");
  return 2;
}

export async function runServiceCommand(argv: string[]): Promise<number> {
  if (argv.length > 0) {
    process.stderr.write("berth service: takes no arguments (configure with MC_HOME, MC_PROVIDER, MC_MODEL and settings.json)\n");
    return 2;
  }
  return runService();
}

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string };
  return pkg.version;
}

/** Routes every stray stdout writer (console.*, dependencies) to stderr; returns the real stdout writer. */
export function reserveStdout(): NodeJS.WriteStream {
  const out = process.stdout;
  const realWrite = out.write.bind(out);
  const proxy = Object.create(out) as NodeJS.WriteStream;
  proxy.write = realWrite;
  out.write = ((chunk: unknown, ...rest: unknown[]) =>
    (process.stderr.write as (...a: unknown[]) => boolean)(chunk, ...rest));
  const toStderr = new console.Console(process.stderr, process.stderr);
  for (const m of ["log", "info", "debug", "warn", "error", "trace", "dir"] as const)
    (console as unknown as Record<string, unknown>)[m] = toStderr[m].bind(toStderr);
  return proxy;
}

/**
 * Creates the state root (0700) when missing and throws, with `prepareStateRoot`'s message, when it is not
 * trusted (another user's, or writable by group/others). Doors that print their own line call `prepareStateRoot`.
 */
export function ensureHome(home: string): void {
  const problem = prepareStateRoot(home);
  if (problem !== null) throw new Error(problem);
}

async function runService(): Promise<number> {
  const stdout = reserveStdout();
  const home = resolveHome(process.env);
  const problem = prepareStateRoot(home);
  if (problem !== null) {
    process.stderr.write(`berth service: ${problem}\n`);
    return 1;
  }
  const state = { initialized: false };
  const families = buildFamilies({
    home,
    cwd: process.cwd(),
    env: process.env,
    state,
    info: { serverName: "berth", serverVersion: packageVersion(), transports: ["stdio"] },
  });
  const server = new AppServiceServer({
    input: process.stdin,
    output: stdout,
    families,
    state,
    log: (line) => void process.stderr.write(line + "\n"),
  });
  // A signal shuts down like EOF (turns cancelled, tool process groups killed, terminals written); a second one
  // while that is under way exits at once.
  let signalled = false;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (signalled) process.exit(128 + (sig === "SIGHUP" ? 1 : sig === "SIGINT" ? 2 : 15));
    signalled = true;
    server.requestShutdown();
  };
  const signals = ["SIGTERM", "SIGINT", "SIGHUP"] as const;
  for (const sig of signals) process.on(sig, onSignal);
  try {
    return await server.run();
  } finally {
    for (const sig of signals) process.off(sig, onSignal);
  }
}
