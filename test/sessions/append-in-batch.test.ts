/**
 * A writer killed with SIGKILL inside a batch — after its append lock's `mkdir`, before its holder mark (writers mark
 * after the batch's write and the start of its fsync) — leaves an unmarked append lock. The next lease holder must
 * not take it for a live one: its replay is not `session_busy` and its first record is written within its append
 * call, long before the stale bound would let anyone remove the lock (docs/sessions.md, "Append lock holder marks").
 * A live reader's lock, marked or not, and this process's own writer's lock are never taken that way.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, rmdirSync, statSync, unlinkSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStore, type SessionHandle } from "../../src/store/sessions/index.js";
import { APPEND_STALE_MS } from "../../src/store/sessions/append-lock.js";
import { SessionLocks } from "../../src/store/sessions/locks.js";
import { peer } from "./peer.js";

const isBusy = (e: { code?: string }): boolean => e.code === "busy";

/** A session whose writer process was killed inside its terminal batch, its append lock not marked yet. */
async function killedInBatch(): Promise<{ home: string; store: SessionStore; id: string; lock: string }> {
  const home = mkdtempSync(join(tmpdir(), "berth-in-batch-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.release();
  const lock = store.paths.append(s.id);
  const writer = peer(home, s.id, "batch");
  try {
    assert.equal(await writer.line, "in batch");
    // Alive, the writer's lock is respected: another process's replay waits for it and reports busy.
    await assert.rejects(store.readWindow(s.id), isBusy);
  } finally {
    await writer.kill();
  }
  assert.ok(existsSync(lock), "the killed writer's append lock is left behind");
  assert.equal(existsSync(store.paths.appendMark(s.id)), false, "and it is not marked");
  assert.equal(statSync(lock).mode & 0o1000, 0o1000, "a writer's lock: made with the sticky bit");
  return { home, store, id: s.id, lock };
}

/**
 * The lock made as fresh as a lock can be (as if its holder had refreshed it at this instant): the stale rule cannot
 * remove it before the returned time, the lock's mtime plus the stale bound.
 */
function freshUntil(lock: string): number {
  const now = new Date();
  utimesSync(lock, now, now);
  return statSync(lock).mtimeMs + APPEND_STALE_MS;
}

/** Appends one record with the lease holder's writer; asserts it was written within the append call. */
async function appendsAtOnce(store: SessionStore, h: SessionHandle, id: string, text: string): Promise<void> {
  const p = h.writer.append({ kind: "user", turn_id: "t2", text }, { sync: true });
  // Written in the caller's own step: no retry, no timer, so no waiting for the killed writer's lock.
  assert.match(readFileSync(store.paths.data(id), "utf8"), new RegExp(`"text":"${text}"`), "written within the append call");
  await p;
}

test("a writer killed inside a batch: the next lease holder replays at once and appends within its call", async () => {
  const { home, store, id, lock } = await killedInBatch();
  const until = freshUntil(lock);
  const h = await store.acquire(id, { closeInterrupted: true });
  // Replay on the first try: not session_busy.
  const snap = await store.readWindow(id);
  assert.ok(snap !== "unchanged");
  assert.deepEqual(
    snap.records.map((r) => r.kind),
    ["user", "assistant", "terminal"],
    "the batch the writer was killed in is whole (nothing closed as interrupted)",
  );
  // Another process reads too, without waiting for the lock: it is gone.
  const reader = peer(home, id, "read");
  try {
    assert.equal(await reader.line, "read 3 false");
  } finally {
    await reader.kill();
  }
  await appendsAtOnce(store, h, id, "after the crash");
  assert.ok(Date.now() < until, "all of it before the stale bound could have removed the lock");
  await h.release();
  assert.equal(existsSync(lock), false);
});

test("the lease recovered by a process that left the lock (an older Berth): the holder's replay and append take it", async () => {
  for (const first of ["replay", "append"] as const) {
    const { store, id, lock } = await killedInBatch();
    // The dead writer's lease removed as an older Berth's recovery does (owner file, then directory), lock left.
    unlinkSync(store.paths.owner(id));
    rmSync(store.paths.lease(id), { recursive: true });
    const until = freshUntil(lock);
    const h = await store.acquire(id);
    assert.ok(existsSync(lock), "a plain acquire does not look at the append lock");
    if (first === "replay") {
      const snap = await store.readWindow(id);
      assert.ok(snap !== "unchanged" && snap.records.length === 3, "not busy");
    }
    await appendsAtOnce(store, h, id, `after the crash, ${first} first`);
    assert.ok(Date.now() < until, `${first} first: before the stale bound could have removed the lock`);
    await h.release();
  }
});

test("a live reader's unmarked lock is not taken by the lease holder: its writer and readers wait for it", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-in-batch-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.release();
  const lock = store.paths.append(s.id);
  const reader = peer(home, s.id, "take");
  try {
    assert.equal(await reader.line, "taken");
    const ino = statSync(lock).ino;
    const h = await store.acquire(s.id);
    const p = h.writer.append({ kind: "user", turn_id: "t", text: "waits" }, { sync: true });
    assert.doesNotMatch(readFileSync(store.paths.data(s.id), "utf8"), /"text":"waits"/, "the reader's lock is waited for");
    await assert.rejects(store.readWindow(s.id), isBusy);
    assert.equal(statSync(lock).ino, ino, "the reader's lock is untouched");
    // Its holder removes it: the append goes through.
    rmdirSync(lock);
    await p;
    await h.release();
  } finally {
    await reader.kill();
  }
});

test("the lease holder's reader never takes its own writer's lock, unmarked inside a batch", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-in-batch-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.release();
  const locks = new SessionLocks(store.paths, { readerWaitMs: 20 });
  const lease = await locks.acquireLease(s.id);
  // The writer's lock as a batch holds it: taken, not marked until its release.
  const release = locks.tryAppendNow(s.id, "writer");
  assert.ok(release !== null);
  assert.equal(existsSync(store.paths.appendMark(s.id)), false);
  assert.equal(locks.tryAppendNow(s.id, "reader"), null);
  await assert.rejects(locks.acquireAppend(s.id, "reader"), isBusy);
  assert.ok(existsSync(store.paths.append(s.id)), "the writer's lock is untouched");
  await release();
  await locks.releaseHeldAppend(s.id);
  await lease.release();
  assert.equal(existsSync(store.paths.append(s.id)), false);
});
