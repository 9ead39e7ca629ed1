/**
 * Process-level helpers shared by the doors (`berth service`, `berth stdio`, the daemon): the package version and
 * stdout reservation and its bounded drain at the end, a signal's exit status. A module of its own so that a door importing them loads no other door's protocol (`berth stdio`
 * used to load the app-service server through service.ts).
 */
import { constants } from "node:os";
import { berthVersion } from "./version.js";
import { OUTPUT_GRACE_MS, writesSettled } from "../transport/line-writer.js";

/** The package version (read once per process: `berth chat -p` asks for it as a client and as its own server). */
export function packageVersion(): string {
  return berthVersion();
}

/**
 * Routes every stray stdout writer (console.*, dependencies) to stderr; returns the real stdout writer. The stderr
 * stream (and the console over it) is made on the first stray write, not at start-up: a fresh process that never
 * writes to stderr does not build it before answering its handshake.
 */
export function reserveStdout(): NodeJS.WriteStream {
  const out = process.stdout;
  const realWrite = out.write.bind(out);
  const proxy = Object.create(out) as NodeJS.WriteStream;
  proxy.write = realWrite;
  out.write = ((chunk: unknown, ...rest: unknown[]) =>
    (process.stderr.write as (...a: unknown[]) => boolean)(chunk, ...rest));
  let toStderr: Console | null = null;
  for (const m of ["log", "info", "debug", "warn", "error", "trace", "dir"] as const) {
    (console as unknown as Record<string, unknown>)[m] = (...args: unknown[]): void => {
      toStderr ??= new console.Console(process.stderr, process.stderr);
      (toStderr[m] as (...a: unknown[]) => void)(...args);
    };
  }
  return proxy;
}

/**
 * One stderr line when stdin is a terminal: a protocol door (`berth service`, `berth stdio`, `berth acp`) run by hand
 * otherwise waits in silence for frames nobody will type. Stdout stays the protocol's; nothing changes for a pipe.
 */
export function noteTerminalStdin(command: string, what: string): void {
  if (process.stdin.isTTY !== true) return;
  process.stderr.write(`${command}: waiting for ${what} on stdin, one JSON message per line; for a terminal agent run \`berth chat\` (Ctrl-D ends this)\n`);
}

/**
 * After the protocol has ended (EOF, a closed connection): how long stdout's pending writes may make no progress before
 * the door exits without them. A client that closed stdin but holds stdout open without reading it must not keep the
 * process (and the session leases it holds) alive for ever; one that still reads gets everything.
 */
export const STDOUT_GRACE_MS = OUTPUT_GRACE_MS;

/**
 * Resolves true once stdout (`reserveStdout`'s writer) has no pending write, false once its pending writes made no
 * progress for `graceMs`: the caller exits at once on false, nothing will read them.
 */
export function stdoutSettled(out: NodeJS.WriteStream, graceMs = STDOUT_GRACE_MS): Promise<boolean> {
  return writesSettled(out, graceMs);
}

/** The shell's exit status for a process ended by `sig`: 128 + the signal's number. */
export function signalExitStatus(sig: NodeJS.Signals): number {
  return 128 + constants.signals[sig];
}
