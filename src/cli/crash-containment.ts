/**
 * Last line of defence: an error no connection handler caught is logged and contained, never
 * fatal. Every connection handler isolates its own failures first (see protocols/host); reaching
 * this is a bug, so the log names it as one.
 *
 * The log itself must not feed the loop it reports on: when whoever read our stdout or stderr has
 * gone (a closed terminal, a killed parent), a write fails with EPIPE. Without a listener that
 * failure is an uncaught exception, whose log line fails again — a process spinning forever on its
 * own diagnostics. A closed diagnostics stream is therefore expected and silent: the service keeps
 * serving, it just has nobody left to tell.
 */
export function containCrashes(log: (m: string) => void): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", () => {
      /* the reader is gone; there is nobody left to tell */
    });
  }
  let logging = false;
  const report = (m: string): void => {
    if (logging) return; // a failure while logging is not logged again
    logging = true;
    try {
      log(m);
    } catch {
      /* the log is best-effort */
    } finally {
      logging = false;
    }
  };
  const describe = (e: unknown) => (e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.on("unhandledRejection", (e) => report(`bug: unhandled rejection contained: ${describe(e)}`));
  process.on("uncaughtException", (e) => report(`bug: uncaught exception contained: ${describe(e)}`));
}
