/**
 * Child process of the fork crash test (crash-fork.test.ts; not a test file): forks a session and stops at a kill
 * point, where the parent kills it with SIGKILL.
 * argv: <home> <source session id> <fork turn id> <cwd>. The kill point is `FORK_KILL_AT`:
 * - `stamp:<n>`: the n-th call of the store's clock once the fork starts (the new ID, the header's time, then one
 *   stamp per copied record as it is written: `stamp:3` is the first copied record);
 * - `sync:<n>`: the n-th fsync of session data once the fork starts;
 * - anything else: no stop.
 * At the point it prints `at <point>` and blocks its thread (the event loop stops there); without one it prints
 * `done <new session id>` once the fork resolved, and waits.
 */
import { writeSync } from "node:fs";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import { syncData } from "../../src/store/sessions/fdio.js";
import { forkSession } from "../../src/runtime/session/transcript.js";

const [home, source, turnId, cwd] = process.argv.slice(2) as [string, string, string, string];
const [kind, nth] = (process.env.FORK_KILL_AT ?? "").split(":");
const at = Number(nth);
let armed = false;
let stamps = 0;
let syncs = 0;

function stop(): void {
  writeSync(1, `at ${kind}:${at}\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); // never woken: the parent kills us here
}

const store = new SessionStore({
  home,
  clock: () => {
    if (armed && kind === "stamp" && ++stamps === at) stop();
    return Date.now();
  },
  syncData: (fd) => {
    if (armed && kind === "sync" && ++syncs === at) stop();
    return syncData(fd);
  },
});
armed = true;
const r = await forkSession(new SessionManager(store), source, turnId, cwd);
writeSync(1, r.ok ? `done ${r.sessionId}\n` : `refused ${r.error}\n`);
setInterval(() => undefined, 60_000);
