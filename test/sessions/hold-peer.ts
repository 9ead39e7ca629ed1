/**
 * Child process for the append-lock tests (not a test file), acting as another process on the same home.
 * argv: <home> <session id> <mode>
 * - `read`: reads the session's window once (default lock tuning) and prints `read <records> <torn>` or `error <code>`.
 * - `hold`: takes the lease, appends one fsynced record with a writer that keeps its append lock for a minute, prints
 *   `held`, and waits (to be killed with SIGKILL while the lock is kept).
 * - `batch`: takes the lease, appends a user record (fsynced), then an assistant record and a terminal in one fsynced
 *   batch, and stops inside that batch: right after its write, as its fsync starts, before the writer marks its append
 *   lock (writer.ts). Prints `in batch` there and blocks its thread (to be killed with SIGKILL, as a daemon killed
 *   right after a turn's terminal). Its writer keeps no lock between batches (`appendHoldMs: 0`), so the batch takes
 *   the lock afresh, as after an idle moment.
 * - `take`: takes the append lock as a reader does (`takeAppendSync`) and does not mark it (an older Berth's reader, or
 *   a reader between its `mkdir` and its mark); prints `taken` and waits.
 */
import { writeSync } from "node:fs";
import { SessionStore } from "../../src/store/sessions/index.js";
import { takeAppendSync } from "../../src/store/sessions/append-lock.js";
import { syncData } from "../../src/store/sessions/fdio.js";
import { SessionPaths } from "../../src/store/sessions/paths.js";

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
} else if (mode === "batch") {
  let stop = false;
  const syncThenStop = (fd: number): Promise<void> => {
    const synced = syncData(fd);
    if (stop) {
      writeSync(1, "in batch\n");
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); // never woken: the thread stops here
    }
    return synced;
  };
  const store = new SessionStore({ home, locks: { appendHoldMs: 0 }, syncData: syncThenStop });
  const h = await store.acquire(id);
  await h.writer.append({ kind: "user", turn_id: "t1", text: "the question" }, { sync: true });
  stop = true;
  const last = h.writer.appendMany(
    [
      { kind: "assistant", turn_id: "t1", message_id: "m1", text: "the answer", partial: false },
      { kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "the answer" },
    ],
    { sync: true },
  );
  await Promise.all(last);
} else if (mode === "take") {
  if (takeAppendSync(new SessionPaths(home), id) === null) throw new Error("the append lock is held");
  process.stdout.write("taken\n");
  setInterval(() => undefined, 60_000);
} else {
  const store = new SessionStore({ home, locks: { appendHoldMs: 60_000 } });
  const h = await store.acquire(id);
  await h.writer.append({ kind: "user", turn_id: "held", text: "kept lock" }, { sync: true });
  process.stdout.write("held\n");
  setInterval(() => undefined, 60_000);
}
