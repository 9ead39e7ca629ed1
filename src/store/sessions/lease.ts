/**
 * A session's writer lease (exclusive per session, held while a process is attached); locks.ts has the whole
 * locking contract.
 * - Acquire = mkdir `<id>.lease` (dirlock) then write `<id>.owner` ({pid, host, token}).
 *   Release = unlink owner, then remove the lease directory.
 * - A lease whose holder is dead is recovered at once: same host and `pid` not alive (or our own pid with another
 *   process token, i.e. a reused pid). A lease without a readable owner whose directory has not been refreshed for
 *   `staleMs` (holder on another host, or died between mkdir and owner write) is recovered after that delay.
 *   Every removal of someone else's lease happens under the `<id>.reclaim` lock and removes the owner file first,
 *   so two recoverers can never both remove a fresh lease.
 * - A lease taken only to settle a turn a dead writer left open (`settling`: ACP's `session/load`, the host's
 *   registration) says so in its owner file (`"settling": true`) for its whole life; a lease that is kept writes it
 *   around the settle alone (`markSettling`, an atomic rename of `<id>.owner.new` over the owner file). An acquirer
 *   that finds a live holder settling waits for it (polling every 5 ms, at most `settleWaitMs`) instead of reporting
 *   `busy` at once: a settle is a window read and one fsynced record. A holder not settling is `busy` at once, as
 *   before.
 * - dirlock refreshes the directory mtime every second; if it finds the lease taken over (we stalled past
 *   the threshold and were recovered), `onLost` fires and the holder must stop writing.
 */
import { renameSync, unlinkSync, writeFileSync } from "node:fs";
import { rm, stat, unlink } from "node:fs/promises";
import * as dirlock from "./dirlock.js";
import { SessionError, storageCause } from "./errors.js";
import { isLocked, retriesFor, safely } from "./lock-util.js";
import { HOST, PROCESS_TOKEN, ownerIsDead, readOwner, readOwnerSync, type OwnerInfo } from "../lock-owner.js";
import type { SessionPaths } from "./paths.js";

export interface Lease {
  /** True once the lease was found taken over; the holder must not write any more. */
  readonly lost: boolean;
  onLost(cb: () => void): void;
  /**
   * Marks the lease in its owner file as held to settle an interrupted turn (`on`), or as an ordinary lease again.
   * Does nothing once the lease is lost or its owner file is not ours. Never throws: a mark that cannot be written (a
   * full disk) only costs other openers the wait.
   */
  markSettling(on: boolean): void;
  /** Idempotent. */
  release(): Promise<void>;
}

export interface LeaseOptions {
  /** The lease is taken only to settle an interrupted turn (written in its owner file from the start). */
  settling?: boolean;
  /** How long to wait for a live holder that is settling before `busy` (0: never wait). */
  settleWaitMs?: number;
}

const SETTLE_POLL_MS = 5;

/**
 * After a failed attempt on the lease of `id`: true to try again (before `deadline`) — its holder is settling (after
 * a poll interval), is dead (recovered at the next try), or released it meanwhile; false for `busy` — a live holder
 * not settling (or one whose owner file is not there yet or unreadable), or the deadline passed.
 */
async function settleGoesOn(paths: SessionPaths, id: string, deadline: number): Promise<boolean> {
  if (Date.now() >= deadline) return false;
  const o = await readOwner(paths.owner(id));
  if (o === null) {
    try {
      await stat(paths.lease(id));
      return false;
    } catch {
      return true; // released meanwhile: free
    }
  }
  if (ownerIsDead(o)) return true;
  if (o.settling !== true) return false;
  await new Promise((r) => setTimeout(r, SETTLE_POLL_MS));
  return true;
}

/**
 * Acquires the writer lease of `id` or throws `SessionError("busy")`; a dead holder's lease is recovered first
 * (`recovered`). The lease is listed in `leases` while held (removed from it on release).
 */
export async function acquireLease(
  paths: SessionPaths,
  id: string,
  staleMs: number,
  leases: Map<string, Lease>,
  options: LeaseOptions = {},
): Promise<{ lease: Lease; recovered: boolean }> {
  const leasePath = paths.lease(id);
  const ownerPath = paths.owner(id);
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
  const tryLock = (): (() => void) | null => {
    try {
      const l = dirlock.lockSync(leasePath, opts);
      return () => l.releaseSync();
    } catch (err) {
      if (!isLocked(err)) throw new SessionError("unavailable", storageCause(err));
      return null;
    }
  };
  const deadline = Date.now() + (options.settleWaitMs ?? 0);
  let releaseDir: () => void;
  let recovered = false;
  for (;;) {
    const got = tryLock();
    if (got !== null) {
      releaseDir = got;
      break;
    }
    if (await recoverLease(paths, id, staleMs)) {
      recovered = true;
      const again = tryLock();
      if (again !== null) {
        releaseDir = again;
        break;
      }
    }
    // A live holder that is not settling is `busy` at once; one settling is waited for, within the bound.
    if (!(await settleGoesOn(paths, id, deadline))) throw new SessionError("busy");
  }
  const me: OwnerInfo = { pid: process.pid, host: HOST, token: PROCESS_TOKEN };
  try {
    writeFileSync(ownerPath, JSON.stringify(options.settling === true ? { ...me, settling: true } : me), { mode: 0o600 });
  } catch (err) {
    // We hold the lease directory, so a partly written owner file (a full disk) is ours to remove.
    safely(() => unlinkSync(ownerPath));
    safely(releaseDir);
    throw new SessionError("unavailable", storageCause(err));
  }
  let released = false;
  const lease: Lease = {
    get lost() {
      return lost;
    },
    onLost(cb) {
      if (lost) cb();
      else lostCbs.push(cb);
    },
    markSettling(on) {
      if (released || lost || readOwnerSync(ownerPath)?.token !== PROCESS_TOKEN) return;
      // A rename: a reader of the owner file (a recoverer, an acquirer waiting) never finds it torn or missing.
      const next = `${ownerPath}.new`;
      safely(() => {
        writeFileSync(next, JSON.stringify(on ? { ...me, settling: true } : me), { mode: 0o600 });
        renameSync(next, ownerPath);
      });
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
  leases.set(id, lease);
  return { lease, recovered };
}

/** True when the owner file of `id` names this very process (the lease is ours on disk). */
export function ownsLeaseOnDisk(paths: SessionPaths, id: string): boolean {
  const o = readOwnerSync(paths.owner(id));
  return o !== null && o.token === PROCESS_TOKEN && o.pid === process.pid && o.host === HOST;
}

/**
 * Removes a lease whose holder is dead (or owner-less and stale). Returns true when the lease is now free.
 * Runs under the reclaim lock; removes the owner file before the directory.
 */
async function recoverLease(paths: SessionPaths, id: string, staleMs: number): Promise<boolean> {
  let reclaim: dirlock.DirLock;
  try {
    reclaim = await dirlock.lock(paths.reclaim(id), { stale: 2000, update: 1000, retries: retriesFor(500), onCompromised: () => undefined });
  } catch {
    return false;
  }
  try {
    const owner = await readOwner(paths.owner(id));
    let dead: boolean;
    if (owner !== null) dead = ownerIsDead(owner);
    else {
      try {
        dead = (await stat(paths.lease(id))).mtimeMs < Date.now() - staleMs;
      } catch {
        return true; // lease vanished meanwhile: free
      }
    }
    if (!dead) return false;
    await unlink(paths.owner(id)).catch(() => undefined);
    await unlink(`${paths.owner(id)}.new`).catch(() => undefined); // a holder killed inside `markSettling`
    await rm(paths.lease(id), { recursive: true, force: true });
    return true;
  } finally {
    await reclaim.release().catch(() => undefined);
  }
}

/** True when no live process can be holding the lease of `id` (no lease, or a dead holder). */
export async function leaseHolderGone(paths: SessionPaths, id: string): Promise<boolean> {
  try {
    await stat(paths.lease(id));
  } catch {
    return true;
  }
  const owner = await readOwner(paths.owner(id));
  return owner !== null && ownerIsDead(owner);
}
