/**
 * Child process for the append-hold tests (not a test file), acting as another process on the same home.
 * argv: <home> <session id> <mode>
 * - `read`: reads the session's window once (default lock tuning) and prints `read <records> <torn>` or `error <code>`.
 * - `hold`: takes the lease, appends one fsynced record with a writer that keeps its append lock for a minute, prints
 *   `held`, and waits (to be killed with SIGKILL while the lock is kept).
 */
import { SessionStore } from "../../src/store/sessions/index.js";

const [home, id, mode] = process.argv.slice(2) as [string, string, string];
if (mode === "read") {
  const store = new SessionStore({ home });
  try {
    const snap = await store.readWindow(id);
    if (snap === "unchanged") throw new Error("unchanged");
    process.stdout.write(`read ${snap.records.length} ${snap.torn}\n`);
  } catch (e) {
    process.stdout.write(`error ${(e as { code?: string }).code ?? String(e)}\n`);
  }
} else {
  const store = new SessionStore({ home, locks: { appendHoldMs: 60_000 } });
  const h = await store.acquire(id);
  await h.writer.append({ kind: "user", turn_id: "held", text: "kept lock" }, { sync: true });
  process.stdout.write("held\n");
  setInterval(() => undefined, 60_000);
}
