/**
 * Child process for the settle tests (settle-wait.test.ts; not a test file), acting as another Berth process on the
 * same home that settles a session's interrupted turn and stops inside the settle, holding the lease.
 * argv: <home> <session id> <mode> <go file>
 * - `load`: what ACP's `session/load` does, `SessionManager.settledHistory` (a settle-only lease); prints
 *   `settled <running>` once it resolved, then waits.
 * - `open`: what app-service `session.open` does, `SessionManager.open` (a lease it keeps); prints `open`, then waits.
 * The settling terminal's time stamp (the store's clock, read before the record takes the append lock) prints
 * `settling` and stops the thread until `<go file>` exists: the lease is held, the append lock not yet taken (a
 * reader of the session meanwhile reads as it would while any settle runs).
 */
import { existsSync, writeSync } from "node:fs";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";

const [home, id, mode, goFile] = process.argv.slice(2) as [string, string, string, string];
let paused = false;
const store = new SessionStore({
  home,
  clock: () => {
    if (!paused) {
      paused = true;
      writeSync(1, "settling\n");
      const cell = new Int32Array(new SharedArrayBuffer(4));
      while (!existsSync(goFile)) Atomics.wait(cell, 0, 0, 2);
    }
    return Date.now();
  },
});
const manager = new SessionManager(store);
try {
  if (mode === "load") {
    const r = await manager.settledHistory(id, { maxBytes: 2 * 1024 * 1024, maxRecords: 100_000 });
    writeSync(1, `settled ${r.running}\n`);
  } else {
    await manager.open(id);
    writeSync(1, "open\n");
  }
} catch (e) {
  writeSync(1, `error ${(e as { code?: string }).code ?? String(e)}\n`);
}
setInterval(() => undefined, 60_000);
