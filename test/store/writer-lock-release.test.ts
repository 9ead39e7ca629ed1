/**
 * A session writer's batch settles with its write and fsync, not with the removal of its append lock (writer.ts):
 * the removal may still be running when the record is reported durable, and the next batch, and `close`, wait for it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { constants, existsSync, mkdtempSync, openSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStore } from "../../src/store/sessions/index.js";
import { SessionLocks } from "../../src/store/sessions/locks.js";
import { SessionPaths } from "../../src/store/sessions/paths.js";
import { SessionWriter } from "../../src/store/sessions/writer.js";

/** Real locks whose removals wait until the test lets them run. */
class HeldReleaseLocks extends SessionLocks {
  released = 0;
  private gates: Array<() => void> = [];
  override tryAppendNow(id: string, role: "writer" | "reader"): (() => Promise<void>) | null {
    const release = super.tryAppendNow(id, role);
    if (release === null) return null;
    return () =>
      new Promise<void>((resolve) => this.gates.push(resolve)).then(async () => {
        await release();
        this.released++;
      });
  }
  /** Lets the oldest held removal run; resolves once one more removal completed. */
  async letOneGo(): Promise<void> {
    while (this.gates.length === 0) await new Promise((r) => setImmediate(r));
    const before = this.released;
    this.gates.shift()!();
    while (this.released === before) await new Promise((r) => setImmediate(r));
  }
}

test("a synced append resolves before its lock is removed; the next batch and close wait for the removal", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-wrel-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  const paths = new SessionPaths(home);
  const locks = new HeldReleaseLocks(paths);
  const data = paths.data(s.id);
  let syncs = 0;
  const w = new SessionWriter(s.id, openSync(data, constants.O_WRONLY | constants.O_APPEND), s.writer.peekNextSeq, false, locks, Date.now, () => false, async (fd) => {
    const { fdatasync } = await import("node:fs");
    await new Promise<void>((resolve, reject) => fdatasync(fd, (e) => (e ? reject(e) : resolve())));
    syncs++;
  });
  // Durable (fsynced) while the append lock's removal has not run yet: the lock directory is still there.
  await w.append({ kind: "user", turn_id: "t1", text: "first" }, { sync: true });
  assert.equal(syncs, 1);
  assert.ok(existsSync(paths.append(s.id)), "the lock's removal is still held by the test");
  assert.match(readFileSync(data, "utf8"), /"text":"first"/);
  // The next batch is not written until the previous removal completed.
  let secondDone = false;
  const second = w.append({ kind: "user", turn_id: "t2", text: "second" }, { sync: true }).then(() => (secondDone = true));
  await new Promise((r) => setImmediate(r));
  assert.equal(secondDone, false);
  assert.doesNotMatch(readFileSync(data, "utf8"), /"text":"second"/);
  await locks.letOneGo();
  await second;
  assert.match(readFileSync(data, "utf8"), /"text":"second"/);
  // close waits for the second batch's removal.
  let closed = false;
  const closing = w.close().then(() => (closed = true));
  await new Promise((r) => setImmediate(r));
  assert.equal(closed, false);
  await locks.letOneGo();
  await closing;
  assert.equal(existsSync(paths.append(s.id)), false);
  await s.release();
});
