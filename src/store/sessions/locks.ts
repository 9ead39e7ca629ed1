/**
 * Cross-process locks for one session: mkdir-based, mtime-refreshed directories (dirlock.ts: proper-lockfile's
 * on-disk protocol without its dependencies).
 *
 * Writer lease (exclusive per session, held while a process is attached; lease.ts):
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
 * Held between batches (`appendHoldMs`; append-keep.ts): a writer's lock is not removed right after its batch but kept ("parked")
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
import { mkdirSync, rmdirSync, statSync } from "node:fs";
import { AppendKeeper } from "./append-keep.js";
import { reclaimAbandoned, takeAppend, takeAppendSync, type AppendTaker, type SoleWriter } from "./append-lock.js";
import type * as dirlock from "./dirlock.js";
import { SessionError, storageCause } from "./errors.js";
import { acquireLease, leaseHolderGone, ownsLeaseOnDisk, type Lease } from "./lease.js";
import { retriesFor, safely, safelyTrue } from "./lock-util.js";
import type { SessionPaths } from "./paths.js";

export type { Lease } from "./lease.js";

export interface LockTuning {
  /** Lease directory age after which an owner-less lease is recovered (≥ 2000). */
  staleMs: number;
  /** How long a writer waits for the append lock before failing the batch. */
  writerWaitMs: number;
  /** How long a reader waits for the append lock before `busy`. */
  readerWaitMs: number;
  /** How long a writer keeps its append lock after a batch for the next one (0: removed after every batch). */
  appendHoldMs: number;
  /**
   * How long an acquirer waits for a live lease holder that is only settling an interrupted turn (lease.ts) before
   * `busy`: a settle is a window read and one fsynced record, whose append may itself wait `writerWaitMs`.
   */
  settleWaitMs: number;
}

export const DEFAULT_LOCK_TUNING: LockTuning = { staleMs: 5000, writerWaitMs: 3000, readerWaitMs: 150, appendHoldMs: 25, settleWaitMs: 5000 };

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

export class SessionLocks {
  /** Writer locks kept between batches, their tracked removals, and readers' wait markers. */
  private readonly keeper: AppendKeeper;
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
    this.keeper = new AppendKeeper(paths, this.tuning);
  }

  /**
   * For readers of this process: removes a writer's append lock of session `id` kept between batches, and returns
   * the removal of this process's writer lock while it runs (a writer's batch settles without waiting for it:
   * writer.ts). Readers in this process wait for it rather than for the lock (never rejects).
   */
  releasingAppend(id: string): Promise<void> | undefined {
    this.keeper.unpark(id);
    return this.keeper.removalOf(id);
  }

  /** The removal of this process's writer append lock of `id` while it runs (no side effect; never rejects). */
  removalOf(id: string): Promise<void> | undefined {
    return this.keeper.removalOf(id);
  }

  /** Removes the writer append lock of `id` kept between batches, if any (writer close); resolves once removed. */
  async releaseHeldAppend(id: string): Promise<void> {
    this.keeper.unpark(id);
    await this.keeper.removalOf(id);
  }

  /**
   * Acquires the writer lease or throws `SessionError("busy")`, waiting up to `settleWaitMs` for a holder that only
   * settles an interrupted turn (lease.ts). `settling`: this lease is taken only to settle one.
   */
  async acquireLease(id: string, settling = false): Promise<Lease> {
    const { lease, recovered } = await acquireLease(this.paths, id, this.tuning.staleMs, this.leases, { settling, settleWaitMs: this.tuning.settleWaitMs });
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
    return ownsLeaseOnDisk(this.paths, id);
  }

  /** True when no live process can be holding the lease (no lease, or a dead holder). */
  leaseHolderGone(id: string): Promise<boolean> {
    return leaseHolderGone(this.paths, id);
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
      if (safelyTrue(() => this.keeper.readerAsks(id))) {
        this.keeper.unpark(id);
        return null;
      }
      const kept = this.keeper.takeParked(id);
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
      return this.keeper.writerRelease(id, remove, () => l.mark());
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
      await this.keeper.yieldToReader(id);
      await this.keeper.removalOf(id);
    }
    // A reader asks a writer that keeps the lock between batches to remove it (module contract).
    const marker = role === "reader" ? this.keeper.waitMarker(id) : null;
    if (marker !== null) safely(() => mkdirSync(marker, { mode: 0o700 }));
    try {
      const l = await takeAppend(this.paths, id, retriesFor(wait), role === "writer" ? this.asWriter : this.asReader);
      if (l !== null) return this.held(id, l, role);
      if (role === "reader" && (await leaseHolderGone(this.paths, id))) return null;
      throw new SessionError("busy");
    } catch (err) {
      throw err instanceof SessionError ? err : new SessionError("unavailable", storageCause(err));
    } finally {
      if (marker !== null) safely(() => rmdirSync(marker));
    }
  }
}
