/**
 * Last line of defence: an error no connection handler caught is logged and contained, never
 * fatal. Every connection handler isolates its own failures first (see protocols/host); reaching
 * this is a bug, so the log names it as one.
 */
export function containCrashes(log: (m: string) => void): void {
  const describe = (e: unknown) => (e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.on("unhandledRejection", (e) => log(`bug: unhandled rejection contained: ${describe(e)}`));
  process.on("uncaughtException", (e) => log(`bug: uncaught exception contained: ${describe(e)}`));
}
