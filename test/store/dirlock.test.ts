/**
 * dirlock (the session store's lock directories): exclusive mkdir, stale takeover, heartbeat with compromise
 * detection, synchronous and thread-pool release, retries, removal of held locks at process exit, and the holder
 * mark (made after the directory, removed before it, a leftover one replaced).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readlinkSync, rmdirSync, statSync, symlinkSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import * as dirlock from "../../src/store/sessions/dirlock.js";

const fresh = (): string => join(mkdtempSync(join(tmpdir(), "dirlock-")), "x.lock");
/** Keeps the event loop alive until `p` settles (the heartbeat's timers are unref'd, like a daemon's). */
async function alive<T>(p: Promise<T>): Promise<T> {
  const t = setInterval(() => undefined, 1000);
  try {
    return await p;
  } finally {
    clearInterval(t);
  }
}
const code = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    return (e as NodeJS.ErrnoException).code;
  }
  return undefined;
};

test("a held lock is exclusive; release removes it (sync and on the thread pool)", async () => {
  const p = fresh();
  const a = dirlock.lockSync(p, { stale: 2000, update: 1000 });
  assert.equal(statSync(p).mode & 0o777, 0o700);
  assert.equal(code(() => dirlock.lockSync(p, { stale: 2000, update: 1000 })), "ELOCKED");
  a.releaseSync();
  assert.equal(existsSync(p), false);
  assert.equal(code(() => a.releaseSync()), "ERELEASED");
  const b = dirlock.lockSync(p, { stale: 2000, update: 1000 });
  const done = b.release();
  await done;
  assert.equal(existsSync(p), false);
  await assert.rejects(b.release(), (e: NodeJS.ErrnoException) => e.code === "ERELEASED");
});

test("a directory older than the stale bound is taken over; a fresh one is not", () => {
  const p = fresh();
  mkdirSync(p);
  assert.equal(code(() => dirlock.lockSync(p, { stale: 2000, update: 1000 })), "ELOCKED");
  const old = new Date(Date.now() - 10_000);
  utimesSync(p, old, old);
  const l = dirlock.lockSync(p, { stale: 2000, update: 1000 });
  assert.ok(statSync(p).mtimeMs > old.getTime());
  l.releaseSync();
});

test("the heartbeat refreshes the mtime, and reports the lock compromised when another process touches or removes it", async () => {
  const p = fresh();
  let refreshed!: () => void;
  const firstRefresh = new Promise<void>((r) => (refreshed = r));
  const before = new Date(Date.now() - 60_000);
  let compromised!: (e: Error) => void;
  const lost = new Promise<Error>((r) => (compromised = r));
  const l = dirlock.lockSync(p, { stale: 1_000_000, update: 10, onCompromised: (e) => compromised(e) });
  // Make the lock's own mtime recognisably old, as if we had set it: the heartbeat must take it as someone else's.
  utimesSync(p, before, before);
  const e = await alive(lost);
  assert.equal((e as NodeJS.ErrnoException).code, "ECOMPROMISED");
  assert.equal(existsSync(p), true, "a compromised lock is someone else's: it stays");
  assert.equal(code(() => l.releaseSync()), "ERELEASED");
  rmdirSync(p);

  // An untouched lock keeps being refreshed and is never reported.
  const q = fresh();
  let reported = false;
  const m = dirlock.lockSync(q, { stale: 1_000_000, update: 10, onCompromised: () => void (reported = true) });
  const start = statSync(q).mtimeMs;
  const poll = (): void => {
    if (statSync(q).mtimeMs !== start) refreshed();
    else setTimeout(poll, 5);
  };
  poll();
  await alive(firstRefresh);
  assert.equal(reported, false);
  // Removed under us: compromised.
  let gone!: () => void;
  const removed = new Promise<void>((r) => (gone = r));
  const r = fresh();
  dirlock.lockSync(r, { stale: 1_000_000, update: 10, onCompromised: () => gone() });
  rmdirSync(r);
  await alive(removed);
  m.releaseSync();
});

test("lock() retries while the lock is held and takes it once released; gives up with ELOCKED", async () => {
  const p = fresh();
  const holder = dirlock.lockSync(p, { stale: 60_000, update: 1000 });
  await assert.rejects(
    dirlock.lock(p, { stale: 60_000, update: 1000, retries: { retries: 2, minTimeout: 1, maxTimeout: 2, factor: 1.5 } }),
    (e: NodeJS.ErrnoException) => e.code === "ELOCKED",
  );
  const waiting = dirlock.lock(p, { stale: 60_000, update: 1000, retries: { retries: 100_000, minTimeout: 1, maxTimeout: 5, factor: 1.5 } });
  holder.releaseSync();
  const l = await waiting;
  assert.equal(existsSync(p), true);
  await l.release();
  assert.equal(existsSync(p), false);
});

test("locks still held when the process exits are removed", () => {
  const p = fresh();
  const mod = pathToFileURL(new URL("../../src/store/sessions/dirlock.js", import.meta.url).pathname).href;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", `const d = await import(${JSON.stringify(mod)}); d.lockSync(${JSON.stringify(p)}, { stale: 2000, update: 1000 }); process.stdout.write(String((await import("node:fs")).existsSync(${JSON.stringify(p)})));`], {
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, "true", "held while the process ran");
  assert.equal(existsSync(p), false, "removed at exit");
});

test("a marked lock: the mark names the directory, is replaced when left over, and goes before the directory", async () => {
  const p = fresh();
  const markPath = p + ".owner";
  const seen: number[] = [];
  const mark = { path: markPath, text: (dir: { ino: number }) => (seen.push(dir.ino), `held-${dir.ino}`) };
  // A mark left by a holder whose directory someone else removed: replaced by the new holder's.
  symlinkSync("left-over", markPath);
  const a = dirlock.lockSync(p, { stale: 2000, update: 1000, mark });
  assert.equal(readlinkSync(markPath), "left-over", "made only when the holder asks");
  a.mark();
  a.mark();
  assert.deepEqual(seen, [statSync(p).ino], "made once, from the stat of the directory the holder created");
  assert.equal(readlinkSync(markPath), `held-${statSync(p).ino}`);
  a.releaseSync();
  assert.equal(existsSync(p), false);
  assert.throws(() => lstatSync(markPath), /ENOENT/, "the mark went with the lock");
  a.mark();
  assert.throws(() => lstatSync(markPath), /ENOENT/, "a released lock is never marked");
  // The same on the thread pool, and for the asynchronous acquisition.
  const b = await dirlock.lock(p, { stale: 2000, update: 1000, mark, retries: { retries: 0, minTimeout: 1, maxTimeout: 1, factor: 1 } });
  b.mark();
  assert.equal(readlinkSync(markPath), `held-${statSync(p).ino}`);
  await b.release();
  assert.equal(existsSync(p), false);
  assert.throws(() => lstatSync(markPath), /ENOENT/);
  // A mark that cannot be made (here its directory is missing) leaves the lock unmarked: taken and removed as usual.
  const c = dirlock.lockSync(p, { stale: 2000, update: 1000, mark: { path: join(p, "..", "no-such-dir", "m"), text: () => "x" } });
  c.mark();
  assert.equal(existsSync(p), true);
  c.releaseSync();
  assert.equal(existsSync(p), false);
});

test("a marked lock still held at exit loses its mark, then its directory", () => {
  const p = fresh();
  const markPath = p + ".owner";
  const mod = pathToFileURL(new URL("../../src/store/sessions/dirlock.js", import.meta.url).pathname).href;
  const script = `const d = await import(${JSON.stringify(mod)}); const fs = await import("node:fs");
d.lockSync(${JSON.stringify(p)}, { stale: 2000, update: 1000, mark: { path: ${JSON.stringify(markPath)}, text: () => "m" } }).mark();
process.stdout.write(fs.readlinkSync(${JSON.stringify(markPath)}));`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, "m", "marked while the process ran");
  assert.equal(existsSync(p), false, "removed at exit");
  assert.throws(() => lstatSync(markPath), /ENOENT/, "with its mark");
});
