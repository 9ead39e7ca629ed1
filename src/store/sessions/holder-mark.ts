/**
 * The holder mark of a session's append lock (locks.ts; docs/sessions.md, "Append lock holder marks"): which process
 * instance took the lock directory, and which directory it took, so that a lock left by a process killed while
 * holding it can be told from a live holder's at once instead of after the stale bound.
 *
 * Contract:
 * - The mark is the target text of a symbolic link beside the lock directory (one `symlink`, atomic with its text; on
 *   ext4 a target under 60 bytes lives in the inode, so no data block). Text:
 *   `b1.<pid>.<start>.<ino>.<stamp>.<tag>` (base 36 but the tag):
 *   - `pid` and `start`, the holder's process and its start time (`/proc/<pid>/stat` field 22; where there is none,
 *     `_` and random characters drawn once per process): together they name one process instance, so a reused PID
 *     never passes for the holder;
 *   - `ino` and `stamp`, the lock directory's inode and birth time in µs (its mtime where the file system keeps no
 *     birth time) as seen right after the `mkdir`: they tie the mark to that one directory;
 *   - `tag`, a hash of the host name, the boot ID and the PID namespace (12 hex digits of SHA-256): a PID is only
 *     judged where it means the same process.
 * - `markedHolderGone(mark, dir)` is true only when the mark names `dir` (same inode and stamp) and its process is
 *   certainly gone: same tag, and no such PID (or a zombie), or that PID now started at another time, or it is our
 *   PID under another start. Everything else (another host, no readable mark, a mark of another directory, a live
 *   or unknowable process) is false: the lock is then judged as before, by its age.
 */
import type { Stats } from "node:fs";
import { instanceGone, selfInstance as me } from "../process-instance.js";

export interface HolderMark {
  pid: number;
  start: string;
  /** The directory's `<ino>.<stamp>`, compared as text (an inode number past 2^53 would not survive a parse). */
  dir: string;
  tag: string;
}

const VERSION = "b1";

/** `<ino>.<stamp>`: tells this directory from any later one, even one given the same inode (module contract). */
function dirOf(dir: Stats): string {
  return `${dir.ino.toString(36)}.${Math.round((dir.birthtimeMs > 0 ? dir.birthtimeMs : dir.mtimeMs) * 1000).toString(36)}`;
}

/** The mark of this process as holder of `dir` (the stat of the directory it has just created). */
export function markText(dir: Stats): string {
  const m = me();
  return `${VERSION}.${process.pid.toString(36)}.${m.start}.${dirOf(dir)}.${m.tag}`;
}

/** The mark `text` names, or null when it is not one. */
export function parseMark(text: string): HolderMark | null {
  const p = text.split(".");
  if (p.length !== 6 || p[0] !== VERSION) return null;
  const [, pid, start, ino, stamp, tag] = p as [string, string, string, string, string, string];
  const n = /^[0-9a-z]{1,8}$/.test(pid) ? parseInt(pid, 36) : 0;
  if (!(n > 0) || start === "" || ino === "" || stamp === "" || tag === "") return null;
  return { pid: n, start, dir: `${ino}.${stamp}`, tag };
}

/** True when `mark` was made for `dir` (same inode and stamp), not for a directory that was there before. */
export function marksDir(mark: HolderMark, dir: Stats): boolean {
  return mark.dir === dirOf(dir);
}

/** True only when `mark` names `dir` and its process is certainly gone (see the module contract). */
export function markedHolderGone(mark: HolderMark, dir: Stats): boolean {
  return marksDir(mark, dir) && instanceGone(mark.pid, mark.start, mark.tag);
}
