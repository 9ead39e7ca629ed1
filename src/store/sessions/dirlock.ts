/**
 * mkdir-based lock directories with an mtime heartbeat: the on-disk protocol of proper-lockfile (which the settings
 * and host stores still use), reimplemented for the session hot path without its dependencies (graceful-fs patches
 * the whole `fs` module on load; loading it cost more than the rest of `session.create`).
 *
 * Contract (the same as proper-lockfile's, as used by locks.ts):
 * - Acquire = `mkdir <path>` (mode 0700, or `mode`). An existing directory whose mtime is older than `stale` ms is
 *   removed and the mkdir tried once more; otherwise the lock is held elsewhere (`code: "ELOCKED"`).
 * - While held, the directory's mtime is refreshed every `update` ms. Before each refresh the mtime must still be
 *   the one we set last; if the directory vanished or another process touched it (it took the lock over as stale),
 *   the lock is compromised: refreshing stops and `onCompromised` fires.
 * - Release removes the directory (a compromised lock is not removed: it is someone else's now). Locks still held
 *   at process exit are removed.
 * - With `mark` (the session append lock's holder mark, holder-mark.ts), the holder may mark the lock it holds
 *   (`DirLock.mark`): a symbolic link beside the directory, its text made from the stat taken right after the
 *   `mkdir` (a link left there is replaced). The mark is removed before the directory: by release, at exit, and by
 *   whoever removes the lock as abandoned (append-lock.ts). So a mark is there only while its directory is, and it
 *   names that directory's holder. A mark that cannot be made leaves the lock unmarked (judged by its age alone); a
 *   mark that cannot be removed keeps its directory (it goes stale) rather than outlive it.
 */
import { mkdir, mkdirSync, rmdir, rmdirSync, stat, statSync, symlinkSync, unlink, unlinkSync, utimes, type Stats } from "node:fs";

export interface DirLockOptions {
  /** A directory not refreshed for this long is taken over (ms). */
  stale: number;
  /** Heartbeat period (ms). */
  update: number;
  /**
   * The directory's mode (default 0700). Linux keeps the sticky bit through `mkdir` and the umask: the session append
   * lock uses it to tell a writer's directory from a reader's with the one `mkdir` (append-lock.ts).
   */
  mode?: number;
  onCompromised?: (err: Error) => void;
  /** The holder mark (`DirLock.mark`): a symbolic link at `path`, target `text(stat of the new directory)`. */
  mark?: { path: string; text: (dir: Stats) => string };
}

export interface RetryOptions {
  retries: number;
  minTimeout: number;
  maxTimeout: number;
  factor: number;
}

interface Held {
  path: string;
  mtimeMs: number;
  timer: NodeJS.Timeout | null;
  released: boolean;
  lastUpdate: number;
  opts: DirLockOptions;
  /** The directory as stat'ed right after its `mkdir` (the holder mark is made from it). */
  dir: Stats;
  /** The holder mark's path, once made. */
  mark: string | null;
}

const held = new Set<Held>();
let exitHook = false;

function lockedError(path: string): Error {
  return Object.assign(new Error(`lock is held: ${path}`), { code: "ELOCKED" });
}

function errCode(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | null)?.code;
}

/** Removes a lock's mark, if it has one; false when it is still there (then the directory must stay too). */
function unmarkSync(h: Held): boolean {
  if (h.mark === null) return true;
  try {
    unlinkSync(h.mark);
  } catch (e) {
    if (errCode(e) !== "ENOENT") return false;
  }
  return true;
}

function onExit(): void {
  for (const h of held) {
    try {
      if (unmarkSync(h)) rmdirSync(h.path);
    } catch {
      /* already gone */
    }
  }
  held.clear();
}

/** Makes the holder mark of a held lock, once (best effort: a lock without one is judged by its age). */
function markHeld(h: Held): void {
  const m = h.opts.mark;
  if (m === undefined || h.mark !== null || h.released) return;
  let text: string;
  try {
    text = m.text(h.dir);
  } catch {
    return;
  }
  for (let again = true; ; again = false) {
    try {
      symlinkSync(text, m.path);
      h.mark = m.path;
      return;
    } catch (e) {
      // A mark left by a holder whose directory someone else removed (an older Berth's stale takeover): replaced.
      if (errCode(e) !== "EEXIST" || !again) return;
    }
    try {
      unlinkSync(m.path);
    } catch (e) {
      if (errCode(e) !== "ENOENT") return;
    }
  }
}

function compromise(h: Held, why: string): void {
  if (h.released) return;
  h.released = true;
  if (h.timer !== null) clearTimeout(h.timer);
  h.timer = null;
  held.delete(h);
  h.opts.onCompromised?.(Object.assign(new Error(`lock compromised: ${why}`), { code: "ECOMPROMISED" }));
}

function schedule(h: Held): void {
  h.timer = setTimeout(() => {
    h.timer = null;
    stat(h.path, (err, st) => {
      if (h.released) return;
      const over = h.lastUpdate + h.opts.stale < Date.now();
      if (err) {
        if (err.code === "ENOENT" || over) compromise(h, "lock directory vanished");
        else schedule(h);
        return;
      }
      if (st.mtimeMs !== h.mtimeMs) return compromise(h, "taken over");
      const now = new Date();
      utimes(h.path, now, now, (uerr) => {
        if (h.released) return;
        if (uerr) {
          if (uerr.code === "ENOENT" || h.lastUpdate + h.opts.stale < Date.now()) compromise(h, "refresh failed");
          else schedule(h);
          return;
        }
        stat(h.path, (serr, st2) => {
          if (h.released) return;
          if (serr) return compromise(h, "lock directory vanished");
          h.mtimeMs = st2.mtimeMs;
          h.lastUpdate = Date.now();
          schedule(h);
        });
      });
    });
  }, h.opts.update);
  h.timer.unref();
}

/** A held lock. Release removes the directory; a compromised lock (someone else's now) is left alone. */
export interface DirLock {
  /** Removes the directory synchronously. Throws `ERELEASED` when already released or compromised. */
  releaseSync(): void;
  /**
   * Removes the directory on the thread pool (an rmdir can take a millisecond on a busy journal; the event loop does
   * not wait for it). The lock counts as held, and is removed at exit, until the removal completed. Rejects like
   * `releaseSync` throws.
   */
  release(): Promise<void>;
  /**
   * Makes the holder mark (`DirLockOptions.mark`) if it is not there yet; nothing without that option, or once the
   * lock is released or compromised. Never throws: a lock whose mark cannot be made stays unmarked.
   */
  mark(): void;
}

function hold(path: string, dir: Stats, opts: DirLockOptions): DirLock {
  const h: Held = { path, mtimeMs: dir.mtimeMs, timer: null, released: false, lastUpdate: Date.now(), opts, dir, mark: null };
  held.add(h);
  if (!exitHook) {
    exitHook = true;
    process.on("exit", onExit);
  }
  schedule(h);
  const stop = (): void => {
    if (h.released) throw Object.assign(new Error("lock already released"), { code: "ERELEASED" });
    h.released = true;
    if (h.timer !== null) clearTimeout(h.timer);
    h.timer = null;
  };
  return {
    mark: () => markHeld(h),
    releaseSync: () => {
      stop();
      held.delete(h);
      try {
        if (h.mark !== null) unlinkSync(h.mark);
      } catch (e) {
        if (errCode(e) !== "ENOENT") throw e;
      }
      try {
        rmdirSync(path);
      } catch (e) {
        if (errCode(e) !== "ENOENT") throw e;
      }
    },
    release: () => {
      try {
        stop();
      } catch (e) {
        return Promise.reject(e instanceof Error ? e : new Error("release failed"));
      }
      const removeDir = (resolve: () => void, reject: (e: Error) => void): void =>
        rmdir(path, (err) => {
          held.delete(h);
          if (err && err.code !== "ENOENT") reject(err);
          else resolve();
        });
      return new Promise<void>((resolve, reject) => {
        const mark = h.mark;
        if (mark === null) return removeDir(resolve, reject);
        unlink(mark, (err) => {
          if (!err || err.code === "ENOENT") return removeDir(resolve, reject);
          held.delete(h);
          reject(err);
        });
      });
    },
  };
}

/** Takes the lock now or throws (`ELOCKED` when held elsewhere). */
export function lockSync(path: string, opts: DirLockOptions): DirLock {
  for (let takeover = true; ; takeover = false) {
    try {
      mkdirSync(path, { mode: opts.mode ?? 0o700 });
      return hold(path, statSync(path), opts);
    } catch (e) {
      if (errCode(e) !== "EEXIST") throw e;
    }
    if (!takeover) throw lockedError(path);
    let mtimeMs: number;
    try {
      mtimeMs = statSync(path).mtimeMs;
    } catch (e) {
      if (errCode(e) === "ENOENT") continue; // released meanwhile: try once more
      throw e;
    }
    if (mtimeMs >= Date.now() - opts.stale) throw lockedError(path);
    try {
      rmdirSync(path);
    } catch (e) {
      if (errCode(e) !== "ENOENT") throw e;
    }
  }
}

function tryOnce(path: string, opts: DirLockOptions): Promise<DirLock> {
  const attempt = (takeover: boolean): Promise<DirLock> =>
    new Promise<Stats>((resolve, reject) => mkdir(path, { mode: opts.mode ?? 0o700 }, (err) => (err ? reject(err) : stat(path, (e, st) => (e ? reject(e) : resolve(st))))))
      .then((dir) => hold(path, dir, opts))
      .catch(async (e: unknown) => {
        if (errCode(e) !== "EEXIST" || !takeover) throw errCode(e) === "EEXIST" ? lockedError(path) : e;
        const st = await new Promise<number | null>((resolve, reject) =>
          stat(path, (err, s) => (err ? (err.code === "ENOENT" ? resolve(null) : reject(err)) : resolve(s.mtimeMs))),
        );
        if (st !== null) {
          if (st >= Date.now() - opts.stale) throw lockedError(path);
          await new Promise<void>((resolve, reject) => rmdir(path, (err) => (err && err.code !== "ENOENT" ? reject(err) : resolve())));
        }
        return attempt(false);
      });
  return attempt(true);
}

/** The wait before retry `i + 1` (exponential, bounded by `maxTimeout`, randomized up to twice that). */
export function backoff(r: RetryOptions, i: number): number {
  return Math.min(r.maxTimeout, r.minTimeout * r.factor ** i) * (1 + Math.random());
}

/** Takes the lock, retrying with exponential backoff while it is held elsewhere; rejects `ELOCKED` after the last try. */
export async function lock(path: string, opts: DirLockOptions & { retries: RetryOptions }): Promise<DirLock> {
  const r = opts.retries;
  for (let i = 0; ; i++) {
    try {
      return await tryOnce(path, opts);
    } catch (e) {
      if (errCode(e) !== "ELOCKED" || i >= r.retries) throw e;
    }
    await new Promise((resolve) => setTimeout(resolve, backoff(r, i)));
  }
}
