/**
 * Taking a session's append lock directory (`<id>.append`), and removing one its holder abandoned (locks.ts has the
 * roles and the waiting; docs/sessions.md, "Append lock holder marks", the protocol and why it is safe).
 *
 * Contract:
 * - Every lock taken here can be marked (holder-mark.ts, dirlock.ts `mark`): `<id>.append.holder`, made by its
 *   holder while it holds the lock and removed before the `rmdir`. A reader marks its lock at once; a writer marks
 *   the lock it keeps between batches, after the batch's write and the start of its fsync (the symlink is a directory
 *   change of about a mkdir's cost: not on the user record's path to disk). dirlock itself never takes this lock over
 *   (its stale bound is unbounded, as for the lease): only `reclaimAbandoned` removes another process's lock.
 * - A lock is abandoned when its mark names it and a process that is certainly gone (removed at once), or when it
 *   was not refreshed for `APPEND_STALE_MS` (marked or not: an older Berth's lock, or a holder killed between its
 *   `mkdir` and its mark — the rule every holder has always been under, as dirlock's stale bound).
 * - `reclaimAbandoned` judges without a lock first (a live holder costs a `stat`, a `readlink` and a `/proc` read,
 *   nothing written), then again under `<id>.reclaim` — the lock the lease's recovery takes too — and removes the
 *   mark, then the directory. Every removal of another process's lock by this code happens there, so no two
 *   removers can act on one judgement: the directory judged is the one removed.
 */
import { readlinkSync, rmdirSync, statSync, unlinkSync, type Stats } from "node:fs";
import * as dirlock from "./dirlock.js";
import { markText, markedHolderGone, parseMark } from "./holder-mark.js";
import type { SessionPaths } from "./paths.js";

/** A lock directory not refreshed for this long is abandoned (its holder refreshes it every second). */
export const APPEND_STALE_MS = 2000;

const RECLAIM_LOCK: dirlock.DirLockOptions = { stale: 2000, update: 1000, onCompromised: () => undefined };

function code(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | null)?.code;
}

/** True when the lock directory at `path` is abandoned (see the module contract); false when absent or unknown. */
function abandoned(path: string, markPath: string): boolean {
  let dir: Stats | undefined;
  try {
    dir = statSync(path, { throwIfNoEntry: false });
  } catch {
    return false;
  }
  if (dir === undefined) return false;
  if (dir.mtimeMs < Date.now() - APPEND_STALE_MS) return true;
  let text: string;
  try {
    text = readlinkSync(markPath);
  } catch {
    return false; // no mark: an older Berth's lock, or a holder between its mkdir and its mark
  }
  const mark = parseMark(text);
  return mark !== null && markedHolderGone(mark, dir);
}

/**
 * Removes the append lock of session `id` when it is abandoned; true when it removed it. Never waits: when another
 * process is removing one (the reclaim lock is taken), false.
 */
export function reclaimAbandoned(paths: SessionPaths, id: string): boolean {
  const path = paths.append(id);
  const markPath = paths.appendMark(id);
  if (!abandoned(path, markPath)) return false;
  let reclaim: dirlock.DirLock;
  try {
    reclaim = dirlock.lockSync(paths.reclaim(id), RECLAIM_LOCK);
  } catch {
    return false;
  }
  try {
    if (!abandoned(path, markPath)) return false;
    try {
      unlinkSync(markPath);
    } catch (e) {
      if (code(e) !== "ENOENT") return false; // a mark never outlives its directory (dirlock.ts)
    }
    try {
      rmdirSync(path);
    } catch (e) {
      return code(e) === "ENOENT";
    }
    return true;
  } finally {
    try {
      reclaim.releaseSync();
    } catch {
      /* compromised: nothing left to release */
    }
  }
}

/**
 * Takes the append lock of session `id` now (not marked yet: `DirLock.mark`), removing an abandoned one first; null
 * when it is held. Throws any error other than the lock being held.
 */
export function takeAppendSync(paths: SessionPaths, id: string): dirlock.DirLock | null {
  const path = paths.append(id);
  // Staleness is decided by `reclaimAbandoned` under the reclaim lock, never by a racing `lockSync`.
  const mark = { path: paths.appendMark(id), text: markText };
  const opts: dirlock.DirLockOptions = { stale: 1_000_000_000, update: 1000, onCompromised: () => undefined, mark };
  for (let again = true; ; again = false) {
    try {
      return dirlock.lockSync(path, opts);
    } catch (e) {
      if (code(e) !== "ELOCKED") throw e;
    }
    if (!again || !reclaimAbandoned(paths, id)) return null;
  }
}

/** `takeAppendSync` retried with backoff while a live holder has the lock; null when it still has it after `r`. */
export async function takeAppend(paths: SessionPaths, id: string, r: dirlock.RetryOptions): Promise<dirlock.DirLock | null> {
  for (let i = 0; ; i++) {
    const l = takeAppendSync(paths, id);
    if (l !== null || i >= r.retries) return l;
    await new Promise((resolve) => setTimeout(resolve, dirlock.backoff(r, i)));
  }
}
