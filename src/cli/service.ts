/**
 * `berth service` and `magi-code --app service`: the composition root of the app-service protocol over stdio.
 * Startup creates the state root (owner-only) and nothing else; every other file is created by the request that
 * needs it.
 */
import { mkdirSync, readFileSync, statSync } from "node:fs";
import { resolveHome } from "../store/home.js";
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
  proxy.write = realWrite as NodeJS.WriteStream["write"];
  out.write = ((chunk: unknown, ...rest: unknown[]) =>
    (process.stderr.write as (...a: unknown[]) => boolean)(chunk, ...rest)) as NodeJS.WriteStream["write"];
  const toStderr = new console.Console(process.stderr, process.stderr);
  for (const m of ["log", "info", "debug", "warn", "error", "trace", "dir"] as const)
    (console as unknown as Record<string, unknown>)[m] = toStderr[m].bind(toStderr);
  return proxy;
}

export function ensureHome(home: string): void {
  try {
    statSync(home);
  } catch {
    mkdirSync(home, { recursive: true, mode: 0o700 });
  }
}

async function runService(): Promise<number> {
  const stdout = reserveStdout();
  const home = resolveHome(process.env);
  try {
    ensureHome(home);
  } catch {
    process.stderr.write("berth service: cannot create the state directory\n");
    return 1;
  }
  const state = { initialized: false };
  const families = await buildFamilies({
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
  return server.run();
}
