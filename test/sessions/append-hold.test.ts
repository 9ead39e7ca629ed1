/**
 * A writer keeps its append lock between batches (locks.ts `appendHoldMs`): no `mkdir`/`rmdir` per batch while
 * batches follow one another. Readers of other processes still get their read (a waiting reader's marker makes the
 * writer remove the lock after its next batch; an idle writer removes it after the hold), readers of the writer's
 * own process never wait for it, `close` removes it, and a holder killed with SIGKILL while keeping it blocks
 * nobody: readers read at once, the next lease holder appends at once (the kept lock is marked with its holder:
 * append-takeover.test.ts).
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
import { peer } from "./peer.js";

test("the append lock is kept between batches and removed by close; a reader of the same process reads at once", async () => {
  const store = new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-hold-")), locks: { appendHoldMs: 60_000, readerWaitMs: 1 } });
  const s = await store.create("/");
  const lock = store.paths.append(s.id);
  await s.writer.append({ kind: "user", turn_id: "t1", text: "one" }, { sync: true });
  assert.ok(existsSync(lock), "kept after the batch");
  // The next batches take the kept lock (were it someone else's, they would wait for it).
  await s.writer.append({ kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "ok" }, { sync: true });
  await s.writer.append({ kind: "user", turn_id: "t2", text: "two" }, { sync: true });
  assert.ok(existsSync(lock));
  // This process's reader has the kept lock removed rather than waiting for it (it would be `busy` after 1 ms).
  const snap = await store.readWindow(s.id);
  assert.ok(snap !== "unchanged" && snap.records.length === 3);
  assert.equal(existsSync(lock), false);
  await s.writer.append({ kind: "user", turn_id: "t3", text: "three" }, { sync: true });
  assert.ok(existsSync(lock), "taken again by the next batch");
  await s.release();
  assert.equal(existsSync(lock), false, "removed by close");
});

test("an idle writer's kept lock is removed after the hold; with holding off it is removed after each batch", async () => {
  const store = new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-hold-")), locks: { appendHoldMs: 5 } });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t1", text: "one" }, { sync: true });
  while (existsSync(store.paths.append(s.id))) await new Promise((r) => setTimeout(r, 5));
  await s.release();
  const off = new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-hold-")), locks: { appendHoldMs: 0 } });
  const o = await off.create("/");
  await o.writer.append({ kind: "user", turn_id: "t1", text: "one" }, { sync: true });
  // The removal runs on the thread pool after the batch settled; the next batch waits for it (writer.ts).
  await o.writer.append({ kind: "user", turn_id: "t2", text: "two" }, { sync: true });
  while (existsSync(off.paths.append(o.id))) await new Promise((r) => setTimeout(r, 5));
  await o.release();
});

test("another process reads a session whose writer keeps appending: its wait marker ends the hold", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-hold-"));
  // A hold far longer than any reader waits: only the marker can free the lock while batches keep coming.
  const store = new SessionStore({ home, locks: { appendHoldMs: 60_000 } });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t0", text: "first" }, { sync: true });
  assert.ok(existsSync(store.paths.append(s.id)));
  const reader = peer(home, s.id, "read");
  const res: { line: string | null } = { line: null };
  void reader.line.then((l) => (res.line = l), (e: unknown) => (res.line = String(e)));
  let n = 1;
  while (res.line === null) {
    await s.writer.append({ kind: "user", turn_id: `t${n}`, text: `r${n}` }, { sync: true });
    n++;
  }
  const got: string = res.line;
  assert.match(got, /^read \d+ false$/, "the other process read the session (not busy)");
  assert.ok(Number(got.split(" ")[1]) >= 1);
  assert.equal(existsSync(store.paths.append(s.id) + ".wait"), false, "the reader removed its marker");
  await s.release();
  await reader.kill();
});

test("another process reads a session whose writer is idle with its lock kept (default hold)", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-hold-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t0", text: "first" }, { sync: true });
  const reader = peer(home, s.id, "read");
  assert.equal(await reader.line, "read 1 false");
  await s.release();
  await reader.kill();
});

test("kill -9 while the append lock is kept: readers read at once, the next holder appends", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-hold-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t0", text: "before" }, { sync: true });
  await s.release();
  const holder = peer(home, s.id, "hold");
  assert.equal(await holder.line, "held");
  await holder.kill();
  assert.ok(existsSync(store.paths.append(s.id)), "the dead holder's kept lock is left behind");
  const snap = await store.readWindow(s.id);
  assert.ok(snap !== "unchanged");
  assert.deepEqual(
    snap.records.map((r) => r.kind === "user" && r.text),
    ["before", "kept lock"],
    "the acknowledged record survived",
  );
  const h = await store.acquire(s.id);
  const rec = await h.writer.append({ kind: "user", turn_id: "after", text: "after the crash" }, { sync: true });
  assert.equal(rec.seq, 3);
  await h.release();
  assert.equal(existsSync(store.paths.append(s.id)), false);
});

test("a small append is written within the append call, after a kept lock and after a finished removal", async () => {
  for (const appendHoldMs of [60_000, 0]) {
    const home = mkdtempSync(join(tmpdir(), "berth-hold-"));
    const store = new SessionStore({ home });
    const s = await store.create("/");
    await s.release();
    const paths = new SessionPaths(home);
    const locks = new SessionLocks(paths, { appendHoldMs });
    const data = paths.data(s.id);
    const w = new SessionWriter(s.id, openSync(data, constants.O_WRONLY | constants.O_APPEND), 2, false, locks, Date.now, () => false);
    await w.append({ kind: "user", turn_id: "t1", text: "one" }, { sync: true });
    // Holding off: let the removal run to its end (the writer must not wait for a finished one).
    await locks.removalOf(s.id);
    // The writer's drain settles a few microtasks after the batch's promise (an earlier turn, as between two turns).
    await new Promise((r) => setImmediate(r));
    const p = w.append({ kind: "user", turn_id: "t2", text: "two" }, { sync: true });
    // No await yet: the record's write (and its fsync's start) happen in the caller's own step.
    assert.match(readFileSync(data, "utf8"), /"text":"two"/, `written inside append() (hold ${appendHoldMs})`);
    await p;
    await w.close();
    assert.equal(existsSync(paths.append(s.id)), false);
  }
});
