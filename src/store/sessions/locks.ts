/**
 * Cross-process locks for one session: mkdir-based, mtime-refreshed directories (dirlock.ts: proper-lockfile's
 * on-disk protocol without its dependencies).
 *
 * Writer lease (exclusive per session, held while a process is attached):
 * - Acquire = mkdir `<id>.lease` (dirlock) then write `<id>.owner` ({pid, host, token}).
 *   Release = unlink owner, then remove the lease directory.
 * - A lease whose holder is dead is recovered at once: same host and `pid` not alive (or our own pid with another
 *   process token, i.e. a reused pid). A lease without a readable owner whose directory has not been refreshed for
 *   `staleMs` (holder on another host, or died between mkdir and owner write) is recovered after that delay.
 *   Every removal of someone else's lease happens under the `<id>.reclaim` lock and removes the owner file first,
 *   so two recoverers can never both remove a fresh lease.
 * - dirlock refreshes the directory mtime every second; if it finds the lease taken over (we stalled past
 *   the threshold and were recovered), `onLost` fires and the holder must stop writing.
 *
 * Append/rotation lock (`<id>.append`): taken by the writer around every batch write. Readers respect it so they
 * never mistake an in-flight append for a torn line: when the lock directory is absent they read without taking it
 * (`appendLockPresent`; an append starting meanwhile only extends the file beyond the size they read, or leaves a
 * torn-looking tail, which sends them to the locked path); when it is present, or their read ended torn, they take
 * it and read again. Readers wait briefly, then report busy — unless the lease holder is dead, in which case
 * nothing can be appending and they read without it.
 *
 * Held between batches (`appendHoldMs`): a writer's lock is not removed right after its batch but kept ("parked")
 * while batches follow one another, and removed once no batch came for `appendHoldMs`, when the writer closes, when
 * a reader of this process reads (`releasingAppend`), or at the next batch's end when a reader of another process
 * waits for it. A waiting reader says so with a marker directory, `<id>.append.wait` (created when it finds the lock
 * held, removed when it is done; a marker older than `staleMs` is a dead reader's and is removed by the writer).
 * The lease holder is the only writer, so keeping the lock excludes nobody but readers, who wait for it as for any
 * append (≤ `appendHoldMs` when idle). Why: each `mkdir`/`rmdir` is a directory change the next `fdatasync` of the
 * session file must commit with it (docs/sessions.md).
 *
 * Abandoned locks (append-lock.ts): a reader marks its lock with its process instance at once, a writer the lock it
 * keeps (holder-mark.ts). A lock whose marked holder is dead (a daemon killed with SIGKILL mid-turn) is removed at
 * once by whoever wants it next — the next lease holder's first batch, in its own step, or a reader — under
 * `<id>.reclaim`, mark first. A writer's unmarked lock (its holder killed inside a batch) is removed at once by the
 * lease holder while its own writer holds none (`soleWriter`), and when the lease is recovered; any other unmarked
 * one (an older Berth's, a reader's) once stale (2 s without refresh). Readers also read without it once the lease
 * holder is dead.
 */
import { mkdirSync, rmdirSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { rm, stat, unlink } from "node:fs/promises";
import { reclaimAbandoned, takeAppend, takeAppendSync, type AppendTaker, type SoleWriter } from "./append-lock.js";
import * as dirlock from "./dirlock.js";
import { SessionError, storageCause } from "./errors.js";
import { HOST, PROCESS_TOKEN, ownerIsDead, readOwner, readOwnerSync, type OwnerInfo } from "../lock-owner.js";
import type { SessionPaths } from "./paths.js";

export interface LockTuning {
  /** Lease directory age after which an owner-less lease is recovered (≥ 2000). */
  staleMs: number;
  /** How long a writer waits for the append lock before failing the batch. */
  writerWaitMs: number;
  /** How long a reader waits for the append lock before `busy`. */
  readerWaitMs: number;
  /** How long a writer keeps its append lock after a batch for the next one (0: removed after every batch). */
  appendHoldMs: number;
}

export const DEFAULT_LOCK_TUNING: LockTuning = { staleMs: 5000, writerWaitMs: 3000, readerWaitMs: 150, appendHoldMs: 25 };

export interface Lease {
  /** True once the lease was found taken over; the holder must not write any more. */
  readonly lost: boolean;
  onLost(cb: () => void): void;
  /** Idempotent. */
  release(): Promise<void>;
}

function retriesFor(waitMs: number): dirlock.RetryOptions {
  // Exponential backoff bounded by maxTimeout; approximates the total wait.
  const maxTimeout = 25;
  return { retries: Math.max(0, Math.ceil(waitMs / maxTimeout)), minTimeout: 2, maxTimeout, factor: 1.5 };
}

/**
 * How the append lock is removed. A reader's is removed synchronously (an rmdir of an empty directory). The writer's
 * is removed on the thread pool (`release`, an rmdir that can take a quarter of a millisecond on a busy journal),
 * started right after its write and alongside the batch's fsync. The batch settles with its fsync, not with the
 * removal (an rmdir blocked behind a busy journal can finish milliseconds after the fsync, and a turn's provider
 * request waits for its user record); readers of this process wait for a running removal (`releasingAppend`)
 * before looking at the lock, so a door answering the next request right after a turn's terminal event never finds
 * its own process's lock, and the writer's next batch waits for it too (writer.ts).
 */
function releaser(l: dirlock.DirLock, onThreadPool: boolean): () => Promise<void> {
  if (onThreadPool) return () => l.release();
  return () => {
    try {
      l.releaseSync();
      return Promise.resolve();
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error("release failed"));
    }
  };
}

function isLocked(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === "ELOCKED";
}

function safely(fn: () => void): void {
  try {
    fn();
  } catch {
    /* already gone or compromised: nothing left to release */
  }
}

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

/** `f()`, or false when it throws. */
function safelyTrue(f: () => boolean): boolean {
  try {
    return f();
  } catch {
    return false;
  }
}

/** Reader marker paths a `SessionLocks` keeps (more: all are dropped and built again as used). */
const MAX_MARKERS = 1024;

export class SessionLocks {
  /** Writers' append-lock removals still running on the thread pool, by session (see `releasingAppend`). */
  private readonly releasing = new Map<string, Promise<void>>();
  /** Writers' append locks held between batches, by session. */
  private readonly parked = new Map<string, Parked>();
  /** Each session's reader marker path (checked every batch: `readerWaits`), built once; at most `MAX_MARKERS`. */
  private readonly markers = new Map<string, string>();
  /** The leases this instance holds, by session (`soleWriter`). */
  private readonly leases = new Map<string, Lease>();
  /** How many append locks this instance's writer of a session holds (taken, not yet removed; kept ones included). */
  private readonly writerLocks = new Map<string, number>();
  private readonly sole: SoleWriter = (id) => this.soleWriter(id);
  private readonly asWriter: AppendTaker = { writer: true, sole: this.sole };
  private readonly asReader: AppendTaker = { writer: false, sole: this.sole };
  private readonly tuning: LockTuning;

  constructor(
    private readonly paths: SessionPaths,
    tuning: Partial<LockTuning> = DEFAULT_LOCK_TUNING,
  ) {
    this.tuning = { ...DEFAULT_LOCK_TUNING, ...tuning };
  }

  /**
   * For readers of this process: removes a writer's append lock of session `id` kept between batches, and returns
   * the removal of this process's writer lock while it runs (a writer's batch settles without waiting for it:
   * writer.ts). Readers in this process wait for it rather than for the lock (never rejects).
   */
  releasingAppend(id: string): Promise<void> | undefined {
    this.unpark(id);
    return this.releasing.get(id);
  }

  /** The removal of this process's writer append lock of `id` while it runs (no side effect; never rejects). */
  removalOf(id: string): Promise<void> | undefined {
    return this.releasing.get(id);
  }

  /** Removes the writer append lock of `id` kept between batches, if any (writer close); resolves once removed. */
  async releaseHeldAppend(id: string): Promise<void> {
    this.unpark(id);
    await this.releasing.get(id);
  }

  /** A kept lock: starts its removal (tracked). */
  private unpark(id: string): void {
    const p = this.parked.get(id);
    if (p === undefined) return;
    this.parked.delete(id);
    clearTimeout(p.timer);
    void this.tracked(id, p.remove)().catch(() => undefined);
  }

  /** The marker directory of readers waiting for the append lock of `id`. */
  private waitMarker(id: string): string {
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
  private readerAsks(id: string): boolean {
    const st = statSync(this.waitMarker(id), { throwIfNoEntry: false });
    return st !== undefined && st.mtimeMs >= Date.now() - YIELD_FRESH_MS;
  }

  /** Waits until no reader of another process asks for the append lock, for at most `YIELD_FRESH_MS`. */
  private async yieldToReader(id: string): Promise<void> {
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
  private writerRelease(id: string, remove: () => Promise<void>, mark: () => void): () => Promise<void> {
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
  private takeParked(id: string): (() => Promise<void>) | null {
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

  /** Acquires the writer lease or throws `SessionError("busy")`. */
  async acquireLease(id: string): Promise<Lease> {
    const leasePath = this.paths.lease(id);
    const ownerPath = this.paths.owner(id);
    let lost = false;
    const lostCbs: Array<() => void> = [];
    const opts: dirlock.DirLockOptions = {
      stale: 1_000_000_000, // staleness is decided by `recover` under the reclaim lock, never by a racing lock() call
      update: 1000,
      onCompromised: () => {
        lost = true;
        for (const cb of lostCbs.splice(0)) cb();
      },
    };
    // The lease path uses the sync API (mkdir + stat, and a 1 s mtime refresh): a handful of microsecond syscalls,
    // cheaper than thread-pool round trips on the create/open/close hot path.
    let releaseDir: () => void;
    let recovered = false;
    try {
      const l = dirlock.lockSync(leasePath, opts);
      releaseDir = () => l.releaseSync();
    } catch (err) {
      if (!isLocked(err)) throw new SessionError("unavailable", storageCause(err));
      if (!(await this.recover(id))) throw new SessionError("busy");
      recovered = true;
      try {
        const l = dirlock.lockSync(leasePath, opts);
        releaseDir = () => l.releaseSync();
      } catch (err2) {
        throw isLocked(err2) ? new SessionError("busy") : new SessionError("unavailable", storageCause(err2));
      }
    }
    const me: OwnerInfo = { pid: process.pid, host: HOST, token: PROCESS_TOKEN };
    try {
      writeFileSync(ownerPath, JSON.stringify(me), { mode: 0o600 });
    } catch (err) {
      // We hold the lease directory, so a partly written owner file (a full disk) is ours to remove.
      safely(() => unlinkSync(ownerPath));
      safely(releaseDir);
      throw new SessionError("unavailable", storageCause(err));
    }
    let released = false;
    const leases = this.leases;
    const lease: Lease = {
      get lost() {
        return lost;
      },
      onLost(cb) {
        if (lost) cb();
        else lostCbs.push(cb);
      },
      release() {
        if (released) return Promise.resolve();
        released = true;
        if (leases.get(id) === lease) leases.delete(id);
        // Only our own owner file: after a takeover the owner file is the new holder's.
        if (!lost && readOwnerSync(ownerPath)?.token === PROCESS_TOKEN) safely(() => unlinkSync(ownerPath));
        safely(releaseDir);
        return Promise.resolve();
      },
    };
    this.leases.set(id, lease);
    // The holder we recovered the lease from is dead: an append lock it left is removed now, not at the first append
    // (a replay by any process meanwhile would wait for it and report busy).
    if (recovered) safelyTrue(() => reclaimAbandoned(this.paths, id, this.sole));
    return lease;
  }

  /**
   * True when this instance holds the lease of `id` (not lost, and the owner file is still ours) and its writer holds
   * no append lock of it: no live writer can hold one then, and an unmarked writer's lock is a dead or closed writer's
   * (append-lock.ts; docs/sessions.md, "Append lock holder marks"). Only asked on the contended path.
   */
  private soleWriter(id: string): boolean {
    const lease = this.leases.get(id);
    if (lease === undefined || lease.lost || (this.writerLocks.get(id) ?? 0) > 0) return false;
    const o = readOwnerSync(this.paths.owner(id));
    return o !== null && o.token === PROCESS_TOKEN && o.pid === process.pid && o.host === HOST;
  }

  /**
   * Removes a lease whose holder is dead (or owner-less and stale). Returns true when the lease is now free.
   * Runs under the reclaim lock; removes the owner file before the directory.
   */
  private async recover(id: string): Promise<boolean> {
    let reclaim: dirlock.DirLock;
    try {
      reclaim = await dirlock.lock(this.paths.reclaim(id), { stale: 2000, update: 1000, retries: retriesFor(500), onCompromised: () => undefined });
    } catch {
      return false;
    }
    try {
      const owner = await readOwner(this.paths.owner(id));
      let dead: boolean;
      if (owner !== null) dead = ownerIsDead(owner);
      else {
        try {
          dead = (await stat(this.paths.lease(id))).mtimeMs < Date.now() - this.tuning.staleMs;
        } catch {
          return true; // lease vanished meanwhile: free
        }
      }
      if (!dead) return false;
      await unlink(this.paths.owner(id)).catch(() => undefined);
      await rm(this.paths.lease(id), { recursive: true, force: true });
      return true;
    } finally {
      await reclaim.release().catch(() => undefined);
    }
  }

  /** True when no live process can be holding the lease (no lease, or a dead holder). */
  async leaseHolderGone(id: string): Promise<boolean> {
    try {
      await stat(this.paths.lease(id));
    } catch {
      return true;
    }
    const owner = await readOwner(this.paths.owner(id));
    return owner !== null && ownerIsDead(owner);
  }

  /** True when the append lock directory exists (held, being released, or abandoned); see the module contract. */
  appendLockPresent(id: string): boolean {
    try {
      return statSync(this.paths.append(id), { throwIfNoEntry: false }) !== undefined;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code !== "ENOENT";
    }
  }

  /**
   * The uncontended path of `acquireAppend`, synchronously (a writer's append then writes and starts its fsync in the
   * caller's own step, not a microtask later): the release function, or null when the lock is held elsewhere (then
   * `acquireAppend` waits for it). Throws `SessionError("unavailable")` on any other failure.
   */
  tryAppendNow(id: string, role: "writer" | "reader"): (() => Promise<void>) | null {
    if (role === "writer") {
      // A reader of another process asked for the lock: it goes first (`acquireAppend` waits for it).
      if (safelyTrue(() => this.readerAsks(id))) {
        this.unpark(id);
        return null;
      }
      const kept = this.takeParked(id);
      if (kept !== null) return kept;
    }
    let l: dirlock.DirLock | null;
    try {
      l = takeAppendSync(this.paths, id, role === "writer" ? this.asWriter : this.asReader);
    } catch (err) {
      throw new SessionError("unavailable", storageCause(err));
    }
    if (l === null) return null;
    return this.held(id, l, role);
  }

  /**
   * The release function of a freshly taken append lock: a reader's lock is marked at once, a writer's when kept. A
   * writer's lock counts in `writerLocks` until its removal ended (or failed: then it is left for anyone to reclaim).
   */
  private held(id: string, l: dirlock.DirLock, role: "writer" | "reader"): () => Promise<void> {
    if (role === "writer") {
      this.writerLocks.set(id, (this.writerLocks.get(id) ?? 0) + 1);
      let counted = true;
      const remove = (): Promise<void> =>
        releaser(l, true)().finally(() => {
          if (!counted) return;
          counted = false;
          const n = (this.writerLocks.get(id) ?? 1) - 1;
          if (n > 0) this.writerLocks.set(id, n);
          else this.writerLocks.delete(id);
        });
      return this.writerRelease(id, remove, () => l.mark());
    }
    l.mark();
    return releaser(l, false);
  }

  /**
   * Takes the append/rotation lock. Writers wait up to `writerWaitMs`; readers up to `readerWaitMs`.
   * Returns the release function, or `null` for a reader when the lock is abandoned by a dead lease holder
   * (the read may proceed unlocked: nobody can be appending). Throws `SessionError("busy")` on a real conflict.
   * An uncontended lock is taken synchronously (a mkdir and a stat; a reader also marks it); a lock abandoned by a
   * dead holder is removed and taken in the same step (append-lock.ts); only a live holder's is waited for, with
   * backoff.
   */
  async acquireAppend(id: string, role: "writer" | "reader"): Promise<(() => Promise<void>) | null> {
    const wait = role === "writer" ? this.tuning.writerWaitMs : this.tuning.readerWaitMs;
    const now = this.tryAppendNow(id, role);
    if (now !== null) return now;
    if (role === "writer") {
      await this.yieldToReader(id);
      await this.releasing.get(id);
    }
    // A reader asks a writer that keeps the lock between batches to remove it (module contract).
    const marker = role === "reader" ? this.waitMarker(id) : null;
    if (marker !== null) safely(() => mkdirSync(marker, { mode: 0o700 }));
    try {
      const l = await takeAppend(this.paths, id, retriesFor(wait), role === "writer" ? this.asWriter : this.asReader);
      if (l !== null) return this.held(id, l, role);
      if (role === "reader" && (await this.leaseHolderGone(id))) return null;
      throw new SessionError("busy");
    } catch (err) {
      throw err instanceof SessionError ? err : new SessionError("unavailable", storageCause(err));
    } finally {
      if (marker !== null) safely(() => rmdirSync(marker));
    }
  }
}
