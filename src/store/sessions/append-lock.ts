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
 * - A writer makes its directory with the sticky bit (`WRITER_LOCK_MODE`, given to the same `mkdir`: no syscall
 *   more), a reader without it; an older Berth without it too.
 * - A lock is abandoned when its mark names it and a process that is certainly gone (removed at once); when it is a
 *   writer's, not marked, and the caller is the lease holder whose own writer holds no append lock (`SoleWriter`:
 *   only the lease holder's writer takes a writer's lock, so this one was taken by an earlier holder's writer, which
 *   is dead or closed; removed at once); or when it was not refreshed for `APPEND_STALE_MS` (marked or not: an older
 *   Berth's lock, or a reader killed between its `mkdir` and its mark — the rule every holder has always been
 *   under, as dirlock's stale bound).
 * - `reclaimAbandoned` judges without a lock first (a live holder costs a `stat`, a `readlink` and a `/proc` read,
 *   nothing written), then again under `<id>.reclaim` — the lock the lease's recovery takes too — and removes the
 *   mark, then the directory. Every removal of another process's lock by this code happens there, so no two
 *   removers can act on one judgement: the directory judged is the one removed.
 */
import { readlinkSync, rmdirSync, statSync, unlinkSync, type Stats } from "node:fs";
import * as dirlock from "./dirlock.js";
import { markText, markedHolderGone, marksDir, parseMark } from "./holder-mark.js";
import type { SessionPaths } from "./paths.js";

/** A lock directory not refreshed for this long is abandoned (its holder refreshes it every second). */
export const APPEND_STALE_MS = 2000;

/** The mode of a writer's lock directory: 0700 and the sticky bit, which no reader's directory has. */
export const WRITER_LOCK_MODE = 0o1700;
const STICKY = 0o1000;

/**
 * True when the caller holds the lease of session `id` and its own writer holds no append lock of it (locks.ts
 * `soleWriter`): then no live writer can hold a writer's lock of that session. Asked only about an unmarked writer's
 * lock, and again under `<id>.reclaim`, which the lease's recovery takes too.
 */
export type SoleWriter = (id: string) => boolean;

const RECLAIM_LOCK: dirlock.DirLockOptions = { stale: 2000, update: 1000, onCompromised: () => undefined };

function code(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | null)?.code;
}

/** True when the lock directory of `id` is abandoned (see the module contract); false when absent or unknown. */
function abandoned(paths: SessionPaths, id: string, sole: SoleWriter | undefined): boolean {
  let dir: Stats | undefined;
  try {
    dir = statSync(paths.append(id), { throwIfNoEntry: false });
  } catch {
    return false;
  }
  if (dir === undefined) return false;
  if (dir.mtimeMs < Date.now() - APPEND_STALE_MS) return true;
  let text: string | null = null;
  try {
    text = readlinkSync(paths.appendMark(id));
  } catch {
    /* no mark: a writer between its mkdir and its mark (or dead there), a reader in that window, an older Berth */
  }
  const mark = text === null ? null : parseMark(text);
  if (text !== null && mark === null) return false; // a mark this version cannot read: judged by age alone
  if (mark !== null && marksDir(mark, dir)) return markedHolderGone(mark, dir);
  // Not marked (a mark of another directory is a leftover): a writer's lock, when we are the sole writer, is a dead one's.
  return (dir.mode & STICKY) !== 0 && sole !== undefined && sole(id);
}

/**
 * Removes the append lock of session `id` when it is abandoned; true when it removed it. Never waits: when another
 * process is removing one (the reclaim lock is taken), false.
 */
export function reclaimAbandoned(paths: SessionPaths, id: string, sole?: SoleWriter): boolean {
  const path = paths.append(id);
  const markPath = paths.appendMark(id);
  if (!abandoned(paths, id, sole)) return false;
  let reclaim: dirlock.DirLock;
  try {
    reclaim = dirlock.lockSync(paths.reclaim(id), RECLAIM_LOCK);
  } catch {
    return false;
  }
  try {
    if (!abandoned(paths, id, sole)) return false;
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

/** How a lock is taken: by the lease holder's `writer` (its directory gets `WRITER_LOCK_MODE`) or not; `sole`, when known. */
export interface AppendTaker {
  writer: boolean;
  sole?: SoleWriter;
}

const READER: AppendTaker = { writer: false };

/**
 * Takes the append lock of session `id` now (not marked yet: `DirLock.mark`), removing an abandoned one first; null
 * when it is held. Throws any error other than the lock being held.
 */
export function takeAppendSync(paths: SessionPaths, id: string, by: AppendTaker = READER): dirlock.DirLock | null {
  const path = paths.append(id);
  // Staleness is decided by `reclaimAbandoned` under the reclaim lock, never by a racing `lockSync`.
  const mark = { path: paths.appendMark(id), text: markText };
  const mode = by.writer ? WRITER_LOCK_MODE : 0o700;
  const opts: dirlock.DirLockOptions = { stale: 1_000_000_000, update: 1000, onCompromised: () => undefined, mark, mode };
  for (let again = true; ; again = false) {
    try {
      return dirlock.lockSync(path, opts);
    } catch (e) {
      if (code(e) !== "ELOCKED") throw e;
    }
    if (!again || !reclaimAbandoned(paths, id, by.sole)) return null;
  }
}

/** `takeAppendSync` retried with backoff while a live holder has the lock; null when it still has it after `r`. */
export async function takeAppend(paths: SessionPaths, id: string, r: dirlock.RetryOptions, by: AppendTaker = READER): Promise<dirlock.DirLock | null> {
  for (let i = 0; ; i++) {
    const l = takeAppendSync(paths, id, by);
    if (l !== null || i >= r.retries) return l;
    await new Promise((resolve) => setTimeout(resolve, dirlock.backoff(r, i)));
  }
}
