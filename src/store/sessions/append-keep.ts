/**
 * A writer's append lock kept between batches, and the wait markers of readers of other processes (locks.ts has the
 * whole locking contract, "Held between batches").
 *
 * A writer's lock is not removed right after its batch but kept ("parked") while batches follow one another, and
 * removed once no batch came for `appendHoldMs`, when the writer closes, when a reader of this process reads
 * (`releasingAppend`), or at the next batch's end when a reader of another process waits for it. A waiting reader
 * says so with a marker directory, `<id>.append.wait` (created when it finds the lock held, removed when it is done;
 * a marker older than `staleMs` is a dead reader's and is removed by the writer). A writer's removal runs on the
 * thread pool and is tracked (`releasing`) so that readers of this process, and the writer's next batch, wait for it.
 */
import { rmdirSync, statSync } from "node:fs";
import { safely, safelyTrue } from "./lock-util.js";
import type { SessionPaths } from "./paths.js";

/** A writer's append lock kept between batches (see the module contract). */
interface Parked {
  remove: () => Promise<void>;
  /** Marks the lock (done when it was kept; idempotent). */
  mark: () => void;
  timer: NodeJS.Timeout;
  /** When it was kept (`Date.now()`). */
  at: number;
}

/**
 * A kept lock older than this is not reused (removed, then taken anew): only a process stalled past its idle timer
 * can find one, and after a stall of `APPEND_STALE_MS` another process may have removed the lock as abandoned.
 */
const MAX_KEPT_MS = 1000;

/**
 * How long a reader's wait marker makes a writer let it go first, at most (per batch; a reader waits `readerWaitMs`
 * and then removes its marker, so only a reader killed while waiting leaves one this young).
 */
const YIELD_FRESH_MS = 1000;

/** Reader marker paths an `AppendKeeper` keeps (more: all are dropped and built again as used). */
const MAX_MARKERS = 1024;

export class AppendKeeper {
  /** Writers' append-lock removals still running on the thread pool, by session (see `releasingAppend`). */
  private readonly releasing = new Map<string, Promise<void>>();
  /** Writers' append locks held between batches, by session. */
  private readonly parked = new Map<string, Parked>();
  /** Each session's reader marker path (checked every batch: `readerWaits`), built once; at most `MAX_MARKERS`. */
  private readonly markers = new Map<string, string>();

  constructor(
    private readonly paths: SessionPaths,
    private readonly tuning: { readonly staleMs: number; readonly appendHoldMs: number },
  ) {}

  /** The removal of this process's writer append lock of `id` while it runs (no side effect; never rejects). */
  removalOf(id: string): Promise<void> | undefined {
    return this.releasing.get(id);
  }

  /** A kept lock: starts its removal (tracked). */
  unpark(id: string): void {
    const p = this.parked.get(id);
    if (p === undefined) return;
    this.parked.delete(id);
    clearTimeout(p.timer);
    void this.tracked(id, p.remove)().catch(() => undefined);
  }

  /** The marker directory of readers waiting for the append lock of `id`. */
  waitMarker(id: string): string {
    let m = this.markers.get(id);
    if (m === undefined) {
      m = this.paths.append(id) + ".wait";
      if (this.markers.size >= MAX_MARKERS) this.markers.clear();
      this.markers.set(id, m);
    }
    return m;
  }

  /** True when a live reader of another process waits for the append lock (a stale marker is removed). */
  private readerWaits(id: string): boolean {
    let mtimeMs: number;
    try {
      // Usually missing: no exception built for it (a thrown ENOENT costs several times the syscall).
      const st = statSync(this.waitMarker(id), { throwIfNoEntry: false });
      if (st === undefined) return false;
      mtimeMs = st.mtimeMs;
    } catch {
      return false;
    }
    if (mtimeMs >= Date.now() - this.tuning.staleMs) return true;
    safely(() => rmdirSync(this.waitMarker(id)));
    return false;
  }

  /**
   * True when a reader of another process asked for the append lock within `YIELD_FRESH_MS` (its marker's age): the
   * next batch of this process's writer lets it go first (`yieldToReader`). Without this, a writer appending back to
   * back takes the lock again right after each removal, and a polling reader finds it held until it reports busy.
   */
  readerAsks(id: string): boolean {
    const st = statSync(this.waitMarker(id), { throwIfNoEntry: false });
    return st !== undefined && st.mtimeMs >= Date.now() - YIELD_FRESH_MS;
  }

  /** Waits until no reader of another process asks for the append lock, for at most `YIELD_FRESH_MS`. */
  async yieldToReader(id: string): Promise<void> {
    const until = Date.now() + YIELD_FRESH_MS;
    for (let delay = 1; safelyTrue(() => this.readerAsks(id)) && Date.now() < until; delay = Math.min(delay * 2, 10)) {
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  /**
   * A writer lock's release: keeps the lock for the next batch (`appendHoldMs`) unless a reader waits for it or
   * holding is off; else removes it on the thread pool (tracked). Never waits for the removal. A kept lock is marked
   * (`mark`, a symlink made after the batch's write and fsync start): a process killed while keeping it is then known
   * dead at once by whoever wants the lock next (append-lock.ts).
   */
  writerRelease(id: string, remove: () => Promise<void>, mark: () => void): () => Promise<void> {
    const removeTracked = this.tracked(id, remove);
    return () => {
      const hold = this.tuning.appendHoldMs;
      if (hold <= 0 || this.parked.has(id) || this.readerWaits(id)) return removeTracked();
      mark();
      const timer = setTimeout(() => {
        if (this.parked.get(id)?.timer === timer) this.unpark(id);
      }, hold);
      timer.unref();
      this.parked.set(id, { remove, mark, timer, at: Date.now() });
      return Promise.resolve();
    };
  }

  /** A kept writer lock of `id`, taken for the next batch (its release function), or null. */
  takeParked(id: string): (() => Promise<void>) | null {
    const p = this.parked.get(id);
    if (p === undefined) return null;
    if (Date.now() - p.at >= MAX_KEPT_MS) {
      this.unpark(id);
      return null;
    }
    this.parked.delete(id);
    clearTimeout(p.timer);
    return this.writerRelease(id, p.remove, p.mark);
  }

  /** `release` for a writer's lock: tracked in `releasing` while it runs. */
  private tracked(id: string, release: () => Promise<void>): () => Promise<void> {
    return () => {
      // The map holds the non-rejecting copy: that is what must be compared when the removal ends (comparing `p`
      // never matched, so a finished removal stayed listed and every later batch awaited it: a microtask hop that
      // moved the user record's write and fsync start behind the turn's synchronous set-up).
      // (`finally` runs a microtask later at the earliest, once `entry` is set.)
      const p: Promise<void> = release().finally(() => {
        if (this.releasing.get(id) === entry) this.releasing.delete(id);
      });
      const entry = p.catch(() => undefined);
      this.releasing.set(id, entry);
      return p;
    };
  }
}
