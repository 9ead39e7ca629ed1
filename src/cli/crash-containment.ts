/**
 * Last line of defence: an error no handler caught is logged and contained, never fatal. Every connection and
 * request handler isolates its own failures first (see protocols/host, protocols/app-service); reaching this is a
 * bug, so the log names it as one. Used by every long-lived door: `berth daemon`, and the stdio doors `berth stdio`,
 * `berth service` (`magi-code --app service`) and `berth acp`, where one bug in a rarely used path would otherwise
 * end the process and with it every session of the client and its turns in flight. `berth chat` does not use it: its
 * one-shot run ends on such a failure with one line (chat/oneshot.ts), as a run the user watches should.
 *
 * The log goes to stderr only (the caller's `log`): stdout is the stdio doors' protocol channel. Its text is the
 * error's stack with credential-shaped substrings redacted and terminal controls made visible, as every other
 * diagnostic: an error's message can quote anything. Those helpers load when a crash is reported, not at start-up,
 * so containing costs a cold start nothing.
 *
 * The log itself must not feed the loop it reports on: when whoever read our stdout or stderr has gone (a closed
 * terminal, a killed parent), a write fails with EPIPE. Without a listener that failure is an uncaught exception,
 * whose log line fails again — a process spinning forever on its own diagnostics. A closed diagnostics stream is
 * therefore expected and silent: the process keeps serving, it just has nobody left to tell.
 */
export function containCrashes(log: (m: string) => void): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", () => {
      /* the reader is gone; there is nobody left to tell */
    });
  }
  const write = (m: string): void => {
    try {
      log(m);
    } catch {
      /* the log is best-effort; a failure while logging is not logged again */
    }
  };
  const describe = (e: unknown) => (e instanceof Error ? (e.stack ?? e.message) : String(e));
  const report = (what: string, e: unknown): void => {
    const text = describe(e);
    void Promise.all([import("../core/text-policy.js"), import("./terminal-safe.js")]).then(
      ([{ redactSecrets }, { terminalSafe }]) => write(`bug: ${what} contained: ${terminalSafe(redactSecrets(text))}`),
      // The helpers failed to load: the error's kind alone, since its text cannot be made safe to show.
      () => write(`bug: ${what} contained: ${e instanceof Error ? e.name : typeof e} (its details are not shown)`),
    );
  };
  process.on("unhandledRejection", (e) => report("unhandled rejection", e));
  process.on("uncaughtException", (e) => report("uncaught exception", e));
}
