/**
 * A process killed with SIGKILL while it holds a session's append lock (a daemon mid-turn) leaves the lock directory
 * behind. The process that takes the session over must not wait for it to go stale: the lock carries its holder's
 * mark (holder-mark.ts, docs/sessions.md), and a lock whose marked holder is dead is removed at once — by the next
 * lease holder's first append and by a reader of another process alike. A live holder's lock, a lock whose mark does
 * not prove its holder dead (a reused PID, another directory's mark, another host's), and an older Berth's unmarked
 * lock are never taken that way: the last two still go once stale, as before.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmdirSync, statSync, symlinkSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStore } from "../../src/store/sessions/index.js";
import { markText } from "../../src/store/sessions/holder-mark.js";
import { SessionLocks } from "../../src/store/sessions/locks.js";
import { peer } from "./peer.js";

/** A session whose append lock was left by a holder killed with SIGKILL (its lease is dead, its lock present). */
async function killedHolder(): Promise<{ home: string; store: SessionStore; id: string }> {
  const home = mkdtempSync(join(tmpdir(), "berth-takeover-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t0", text: "before" }, { sync: true });
  await s.release();
  const holder = peer(home, s.id, "hold");
  try {
    assert.equal(await holder.line, "held");
  } finally {
    await holder.kill();
  }
  assert.ok(existsSync(store.paths.append(s.id)), "the killed holder's append lock is left behind");
  return { home, store, id: s.id };
}

test("after a takeover the first record is written within its append call, not after the dead holder's lock went stale", async () => {
  const { store, id } = await killedHolder();
  const h = await store.acquire(id);
  const p = h.writer.append({ kind: "user", turn_id: "after", text: "first after the crash" }, { sync: true });
  // Written in the caller's own step: no retry, no timer, so no waiting for the dead holder's lock to go stale.
  assert.match(readFileSync(store.paths.data(id), "utf8"), /"text":"first after the crash"/);
  const rec = await p;
  assert.equal(rec.seq, 3);
  await h.release();
  assert.equal(existsSync(store.paths.append(id)), false);
  const snap = await store.readWindow(id);
  assert.ok(snap !== "unchanged");
  assert.deepEqual(
    snap.records.map((r) => r.kind === "user" && r.text),
    ["before", "kept lock", "first after the crash"],
  );
});

test("after a takeover another process replays the session at once, though the new lease holder is alive", async () => {
  const { home, store, id } = await killedHolder();
  // The new holder is alive and has not appended yet: the lock present is the dead process's.
  const h = await store.acquire(id);
  const reader = peer(home, id, "read");
  try {
    assert.equal(await reader.line, "read 2 false", "not busy: the dead holder's lock was recognised as such");
  } finally {
    await reader.kill();
  }
  const rec = await h.writer.append({ kind: "user", turn_id: "after", text: "after the crash" }, { sync: true });
  assert.equal(rec.seq, 3);
  await h.release();
});

test("a live holder's lock is never taken: another process's reader and writer wait for it, its mark stays", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-takeover-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.release();
  const holder = peer(home, s.id, "hold");
  try {
    assert.equal(await holder.line, "held");
    const mark = readlinkSync(store.paths.appendMark(s.id));
    const locks = new SessionLocks(store.paths);
    assert.equal(locks.tryAppendNow(s.id, "writer"), null);
    await assert.rejects(store.readWindow(s.id), (e: { code?: string }) => e.code === "busy");
    assert.equal(readlinkSync(store.paths.appendMark(s.id)), mark, "the live holder's lock and mark are untouched");
  } finally {
    await holder.kill();
  }
});

/** A session with an append lock directory made by hand (as another process would), and the lease holder's writer. */
async function foreignLock(): Promise<{ store: SessionStore; id: string; lock: string; markPath: string }> {
  const home = mkdtempSync(join(tmpdir(), "berth-takeover-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.release();
  const lock = store.paths.append(s.id);
  mkdirSync(lock, { mode: 0o700 });
  return { store, id: s.id, lock, markPath: store.paths.appendMark(s.id) };
}

/** The mark of `dir` with its fields replaced (`b1.<pid>.<start>.<ino>.<stamp>.<tag>`, base 36). */
function markOf(dir: string, fields: { pid?: number; start?: string; ino?: string; tag?: string }): string {
  const p = markText(statSync(dir)).split(".");
  if (fields.pid !== undefined) p[1] = fields.pid.toString(36);
  if (fields.start !== undefined) p[2] = fields.start;
  if (fields.ino !== undefined) p[3] = fields.ino;
  if (fields.tag !== undefined) p[5] = fields.tag;
  return p.join(".");
}

/** `/proc/<pid>/stat` field 22 in base 36, as marks write it. */
function startOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]).toString(36);
}

/** Appends one record with the lease holder's writer; true when it was written within the append call. */
async function appendNow(store: SessionStore, id: string, text: string): Promise<boolean> {
  const h = await store.acquire(id);
  const p = h.writer.append({ kind: "user", turn_id: "t", text }, { sync: true });
  const inCall = readFileSync(store.paths.data(id), "utf8").includes(`"text":"${text}"`);
  await p;
  await h.release();
  return inCall;
}

test("a reused PID is not the holder: a mark naming a live process started at another time is a dead holder's", { skip: process.platform !== "linux" }, async () => {
  const child = spawn(process.execPath, ["-e", "setInterval(() => undefined, 60_000)"], { stdio: "ignore" });
  const closed = new Promise((r) => child.once("close", r));
  try {
    const pid = child.pid!;
    await new Promise((r) => child.once("spawn", r));
    const live = await foreignLock();
    // Its own start time: the live process is the holder, so its lock stays.
    symlinkSync(markOf(live.lock, { pid, start: startOf(pid) }), live.markPath);
    assert.equal(new SessionLocks(live.store.paths).tryAppendNow(live.id, "reader"), null);
    assert.ok(existsSync(live.lock));
    // Another start time: the PID was reused, the marked holder is gone; the next append takes the lock at once.
    const reused = await foreignLock();
    symlinkSync(markOf(reused.lock, { pid, start: "1" }), reused.markPath);
    assert.equal(await appendNow(reused.store, reused.id, "after reuse"), true);
    assert.equal(existsSync(reused.lock), false);
  } finally {
    child.kill("SIGKILL");
    await closed;
  }
});

test("a mark that does not prove its holder dead leaves a fresh lock alone", async () => {
  const gone = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((r) => gone.once("close", r));
  const pid = gone.pid!;
  // A mark of another directory (a holder whose lock an older Berth removed as stale, its mark left behind), and a
  // mark of another host, boot or PID namespace, where the PID means nothing.
  for (const fields of [{ pid, ino: "zz" }, { pid, tag: "other" }]) {
    const f = await foreignLock();
    symlinkSync(markOf(f.lock, fields), f.markPath);
    assert.equal(new SessionLocks(f.store.paths).tryAppendNow(f.id, "writer"), null, JSON.stringify(fields));
    // With a live lease holder (else a reader reads without the lock), a reader waits for it and reports busy.
    const h = await f.store.acquire(f.id);
    await assert.rejects(f.store.readWindow(f.id), (e: { code?: string }) => e.code === "busy");
    await h.release();
    assert.ok(existsSync(f.lock));
  }
  // The control: the same dead PID with the directory's own mark is removed at once.
  const f = await foreignLock();
  symlinkSync(markOf(f.lock, { pid }), f.markPath);
  assert.equal(await appendNow(f.store, f.id, "after the dead holder"), true);
});

test("an older Berth's unmarked lock is judged by its age alone, as before", async () => {
  const fresh = await foreignLock();
  const h = await fresh.store.acquire(fresh.id);
  const p = h.writer.append({ kind: "user", turn_id: "t", text: "waits" }, { sync: true });
  assert.doesNotMatch(readFileSync(fresh.store.paths.data(fresh.id), "utf8"), /"text":"waits"/, "a fresh lock is waited for");
  // Its holder removes it: the append goes through.
  rmdirSync(fresh.lock);
  await p;
  await h.release();
  // Not refreshed for longer than the stale bound: taken over at once.
  const stale = await foreignLock();
  const old = new Date(Date.now() - 10_000);
  utimesSync(stale.lock, old, old);
  assert.equal(await appendNow(stale.store, stale.id, "after the stale lock"), true);
});
