/**
 * mkdir-based lock directories with an mtime heartbeat: the on-disk protocol of proper-lockfile (which the settings
 * and host stores still use), reimplemented for the session hot path without its dependencies (graceful-fs patches
 * the whole `fs` module on load; loading it cost more than the rest of `session.create`).
 *
 * Contract (the same as proper-lockfile's, as used by locks.ts):
 * - Acquire = `mkdir <path>` (mode 0700). An existing directory whose mtime is older than `stale` ms is removed and
 *   the mkdir tried once more; otherwise the lock is held elsewhere (`code: "ELOCKED"`).
 * - While held, the directory's mtime is refreshed every `update` ms. Before each refresh the mtime must still be
 *   the one we set last; if the directory vanished or another process touched it (it took the lock over as stale),
 *   the lock is compromised: refreshing stops and `onCompromised` fires.
 * - Release removes the directory (a compromised lock is not removed: it is someone else's now). Locks still held
 *   at process exit are removed.
 */
import { mkdir, mkdirSync, rmdir, rmdirSync, stat, statSync, utimes } from "node:fs";

export interface DirLockOptions {
  /** A directory not refreshed for this long is taken over (ms). */
  stale: number;
  /** Heartbeat period (ms). */
  update: number;
  onCompromised?: (err: Error) => void;
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
}

const held = new Set<Held>();
let exitHook = false;

function lockedError(path: string): Error {
  return Object.assign(new Error(`lock is held: ${path}`), { code: "ELOCKED" });
}

function errCode(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | null)?.code;
}

function onExit(): void {
  for (const h of held) {
    try {
      rmdirSync(h.path);
    } catch {
      /* already gone */
    }
  }
  held.clear();
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
}

function hold(path: string, mtimeMs: number, opts: DirLockOptions): DirLock {
  const h: Held = { path, mtimeMs, timer: null, released: false, lastUpdate: Date.now(), opts };
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
    releaseSync: () => {
      stop();
      held.delete(h);
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
      return new Promise<void>((resolve, reject) =>
        rmdir(path, (err) => {
          held.delete(h);
          if (err && err.code !== "ENOENT") reject(err);
          else resolve();
        }),
      );
    },
  };
}

/** Takes the lock now or throws (`ELOCKED` when held elsewhere). */
export function lockSync(path: string, opts: DirLockOptions): DirLock {
  for (let takeover = true; ; takeover = false) {
    try {
      mkdirSync(path, { mode: 0o700 });
      return hold(path, statSync(path).mtimeMs, opts);
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
    new Promise<number>((resolve, reject) => mkdir(path, { mode: 0o700 }, (err) => (err ? reject(err) : stat(path, (e, st) => (e ? reject(e) : resolve(st.mtimeMs))))))
      .then((mtimeMs) => hold(path, mtimeMs, opts))
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

/** Takes the lock, retrying with exponential backoff while it is held elsewhere; rejects `ELOCKED` after the last try. */
export async function lock(path: string, opts: DirLockOptions & { retries: RetryOptions }): Promise<DirLock> {
  const r = opts.retries;
  for (let i = 0; ; i++) {
    try {
      return await tryOnce(path, opts);
    } catch (e) {
      if (errCode(e) !== "ELOCKED" || i >= r.retries) throw e;
    }
    const delay = Math.min(r.maxTimeout, r.minTimeout * r.factor ** i) * (1 + Math.random());
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}
