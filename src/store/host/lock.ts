/**
 * The exclusive state-directory lock (one daemon per state directory), on the mkdir lock protocol of
 * store/sessions/dirlock.ts (the one lock implementation of the repository).
 *
 * The protocol alone recovers a crashed owner's lock only once its mtime is older than the
 * staleness window (5 s). This module adds a faster, still safe, recovery for a *dead* owner:
 *  - the owner writes `daemon.owner` {pid, hostname, bootId, lockIno} right after taking the lock;
 *  - a contender that finds the lock held takes it over at once only when that record names the
 *    lock directory it sees (same inode), this host and boot, and a PID that no longer exists;
 *  - every acquisition, owner-record write and takeover happens under a short-lived startup
 *    mutex (`startup.lock`, itself a dirlock), so a contender can never judge a
 *    lock by a record that is not yet (or no longer) the lock holder's.
 * Any other case — a live or unknown owner, a foreign host or boot, no record — waits for the
 * library's staleness rule as before, up to LOCK_WAIT_MS.
 */
import { chmodSync, readFileSync, rmdirSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { lock } from "../sessions/dirlock.js";
import { pidAlive } from "../process-alive.js";

export const LOCK_STALE_MS = 5000;
export const LOCK_WAIT_MS = 6500;
const RETRY_MS = 250;
const NO_RETRY = { retries: 0, minTimeout: 0, maxTimeout: 0, factor: 1 };

interface OwnerRecord {
  pid: number;
  hostname: string;
  bootId: string;
  lockIno: number;
}

function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "";
  }
}

function readOwner(path: string): OwnerRecord | undefined {
  try {
    const o = JSON.parse(readFileSync(path, "utf8")) as Partial<OwnerRecord>;
    if (typeof o.pid !== "number" || typeof o.hostname !== "string" || typeof o.bootId !== "string" || typeof o.lockIno !== "number") return undefined;
    return o as OwnerRecord;
  } catch {
    return undefined;
  }
}

/** True only when the recorded owner of the lock directory we see is provably gone; its pid when recorded. */
function ownerIsDead(lockPath: string, ownerPath: string): { dead: boolean; pid?: number } {
  const o = readOwner(ownerPath);
  if (!o) return { dead: false };
  let ino: number;
  try {
    ino = statSync(lockPath).ino;
  } catch {
    return { dead: false }; // gone meanwhile: the next attempt takes it normally
  }
  if (o.lockIno !== ino || o.hostname !== hostname()) return { dead: false, pid: o.pid };
  const boot = bootId();
  if (o.bootId !== "" && boot !== "" && o.bootId !== boot) return { dead: true, pid: o.pid }; // owner from a previous boot
  if (o.pid === process.pid) return { dead: false, pid: o.pid };
  return { dead: !pidAlive(o.pid), pid: o.pid };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Take the exclusive lock on `stateDir`. Resolves with a release function (idempotent), or
 * rejects when another daemon still holds the lock after LOCK_WAIT_MS.
 */
export async function acquireStateLock(stateDir: string, log: (m: string) => void): Promise<() => Promise<void>> {
  const lockPath = join(stateDir, "daemon.lock");
  const ownerPath = join(stateDir, "daemon.owner");
  const deadline = Date.now() + LOCK_WAIT_MS;
  const startup = await lock(join(stateDir, "startup.lock"), {
    stale: LOCK_STALE_MS,
    update: LOCK_STALE_MS / 2,
    retries: { retries: Math.ceil(LOCK_WAIT_MS / RETRY_MS), minTimeout: RETRY_MS / 2, maxTimeout: RETRY_MS / 2, factor: 1 },
  });
  let said = false;
  try {
    for (;;) {
      try {
        const held = await lock(lockPath, {
          stale: LOCK_STALE_MS,
          update: 2000,
          retries: NO_RETRY,
          onCompromised: (e) => log(`state-directory lock compromised: ${e.message}`),
        });
        try {
          const record: OwnerRecord = { pid: process.pid, hostname: hostname(), bootId: bootId(), lockIno: statSync(lockPath).ino };
          writeFileSync(ownerPath, JSON.stringify(record) + "\n", { mode: 0o600 });
          // Owner-only whatever a previous owner left: the record, and the lock directories.
          chmodSync(ownerPath, 0o600);
        } catch (e) {
          // A disk that refuses the record (full, read-only): give the lock back, so no later start finds it held.
          try {
            unlinkSync(ownerPath);
          } catch {
            /* never written */
          }
          await held.release().catch(() => {});
          throw e;
        }
        for (const d of [lockPath, join(stateDir, "startup.lock")]) {
          try {
            chmodSync(d, 0o700);
          } catch {
            /* the startup mutex may already be released */
          }
        }
        let released = false;
        return async () => {
          if (released) return;
          released = true;
          try {
            unlinkSync(ownerPath);
          } catch {
            /* already gone */
          }
          await held.release();
        };
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ELOCKED") throw e;
      }
      const owner = ownerIsDead(lockPath, ownerPath);
      if (owner.dead) {
        log(`state-directory lock owner (pid ${owner.pid}) is gone; taking the lock over`);
        try {
          rmdirSync(lockPath);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
        }
        continue;
      }
      if (Date.now() >= deadline) throw Object.assign(new Error("Lock file is already being held"), { code: "ELOCKED" });
      if (!said) {
        // Said once, so the wait (a daemon being stopped may release it) is not mistaken for a hang.
        said = true;
        log(`another daemon${owner.pid !== undefined ? ` (pid ${owner.pid})` : ""} holds ${stateDir}; waiting up to ${LOCK_WAIT_MS / 1000} s for it to stop`);
      }
      await sleep(RETRY_MS);
    }
  } finally {
    await startup.release().catch(() => {});
  }
}
