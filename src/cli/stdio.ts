/**
 * `berth stdio`: one SCV v3 client on stdin/stdout (docs/scv.md).
 * Stdout carries protocol frames only (stray writers are routed to stderr); diagnostics go to stderr.
 * EOF on stdin cancels the active turn, joins the session's work, drains the output and exits 0 (output nobody reads
 * is given up after `STDOUT_GRACE_MS` without progress: process-io.ts).
 * SIGTERM/SIGINT/SIGHUP run the same bounded cleanup.
 */
import { serveScvConnection } from "../protocols/scv/connection.js";
import { lazyScvDeps } from "./scv-lazy.js";
import { prepareHome } from "../store/state-root.js";
import { noteTerminalStdin, reserveStdout, stdoutSettled } from "./process-io.js";
import { containCrashes } from "./crash-containment.js";

export async function runStdio(argv: string[]): Promise<number> {
  if (argv.length > 0) {
    process.stderr.write("berth stdio: takes no arguments (configure with MC_HOME, MC_PROVIDER, MC_MODEL and settings.json)\n");
    return 2;
  }
  const stdout = reserveStdout();
  // A bug outside every handler is logged (stderr) and contained: it must not end the client's session and turns.
  containCrashes((m) => void process.stderr.write(`berth stdio: ${m}\n`));
  const { home, problem } = prepareHome(process.env);
  if (problem !== null) {
    process.stderr.write(`berth stdio: ${problem}\n`);
    return 1;
  }
  noteTerminalStdin("berth stdio", "SCV v3 frames from a client app");
  // The handshake is answered before the agent and session store load; they load right after it (scv-lazy.ts).
  const scv = lazyScvDeps({ home, env: process.env, transport: "stdio", log: (l) => void process.stderr.write(`berth stdio: ${l}\n`) });
  scv.preloadAfterFirstWrite(stdout);
  const conn = serveScvConnection(process.stdin, stdout, scv.deps);
  const onSignal = (): void => void conn.stop();
  // `on`, not `once`: signal-exit (lock/atomic-write libraries) re-raises a signal nobody else listens to.
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  process.on("SIGHUP", onSignal); // the terminal (or the client owning it) went away: as SIGTERM
  await conn.done;
  await scv.close();
  // A client that went away ended it like EOF (0); a stdout that failed otherwise (said on stderr) did not.
  const code = conn.outputFailure === null ? 0 : 1;
  // Frames nobody reads (stdin closed, stdout held open unread; or a send that stayed blocked) would keep the process
  // alive for ever.
  if (!(await stdoutSettled(stdout))) process.exit(code);
  return code;
}
