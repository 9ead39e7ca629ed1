/**
 * The temporary file of an atomic replacement (confine.ts `replaceContent`) and the removal of ones a killed Berth
 * left in the user's directory.
 *
 * Contract:
 * - `tempName(base)` is `.<base>.w1-<pid>-<start>-<tag>-<random>.berth-tmp`: `base` is the target's name (cut to 128
 *   UTF-8 bytes), `pid` this process's (base 36), `start` and `tag` its instance (store/process-instance.ts: start
 *   time, and a hash of host, boot and PID namespace), `random` 12 hex digits.
 * - `removeDeadTemps(dir, base)` removes the entries of `dir` named exactly like a temporary file of `base`
 *   (`.<base>.` then `w1-…` with every field well formed, then `.berth-tmp`) that are regular files (`lstat`: a
 *   symlink, directory or anything else so named is left alone) and whose writer is certainly gone (its instance on
 *   this host, boot and PID namespace is not running: `instanceGone`). A live writer's (this process's included) is
 *   kept, so is one whose writer cannot be judged (another host, an unknowable start), and every other name (an older
 *   Berth's `.<base>.<hex>.berth-tmp` included). Bounded: at most 4096 entries of `dir` are read and 16 files removed
 *   per call. Never throws; a failed removal is skipped.
 */
import { lstat, opendir, unlink } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { truncateUtf8 } from "../../core/utf8.js";
import { instanceGone, selfInstance } from "../../store/process-instance.js";

const VERSION = "w1";
const SUFFIX = ".berth-tmp";
/** Directory entries read per call at most (memory and time stay bounded in a directory of millions of names). */
export const TEMP_SCAN_ENTRIES = 4096;
/** Leftovers removed per call at most. */
export const TEMP_REMOVALS = 16;
const MIDDLE = /^w1-([0-9a-z]{1,8})-(_?[0-9a-z]{1,13})-([0-9a-f]{12})-[0-9a-f]{12}$/;

/** The name's part that stands for the target (bounded: a temp name stays under NAME_MAX). */
export function tempBase(name: string): string {
  return truncateUtf8(name, 128);
}

/** The temporary file name for target `name` written by instance `inst` (default: this process). */
export function tempName(name: string, inst: { pid: number; start: string; tag: string } = { pid: process.pid, ...selfInstance() }): string {
  return `.${tempBase(name)}.${VERSION}-${inst.pid.toString(36)}-${inst.start}-${inst.tag}-${randomBytes(6).toString("hex")}${SUFFIX}`;
}

/** The writer named by `entry` when it is a temporary file name of target `name`, else null. */
function writerOf(entry: string, name: string): { pid: number; start: string; tag: string } | null {
  const prefix = `.${tempBase(name)}.`;
  if (!entry.startsWith(prefix) || !entry.endsWith(SUFFIX) || entry.length <= prefix.length + SUFFIX.length) return null;
  const m = MIDDLE.exec(entry.slice(prefix.length, entry.length - SUFFIX.length));
  if (m === null) return null;
  const pid = parseInt(m[1]!, 36);
  return pid > 0 ? { pid, start: m[2]!, tag: m[3]! } : null;
}

/** See the module contract. Resolves with the names removed. */
export async function removeDeadTemps(dir: string, name: string): Promise<string[]> {
  const removed: string[] = [];
  const candidates: string[] = [];
  try {
    const d = await opendir(dir, { bufferSize: 256 });
    try {
      for (let read = 0; read < TEMP_SCAN_ENTRIES; read++) {
        const e = await d.read();
        if (e === null) break;
        if (e.name.startsWith(".") && e.name.endsWith(SUFFIX)) candidates.push(e.name);
      }
    } finally {
      await d.close().catch(() => undefined);
    }
  } catch {
    return removed;
  }
  for (const entry of candidates) {
    if (removed.length >= TEMP_REMOVALS) break;
    const w = writerOf(entry, name);
    if (w === null || !instanceGone(w.pid, w.start, w.tag)) continue;
    const path = join(dir, entry);
    try {
      if (!(await lstat(path)).isFile()) continue;
      await unlink(path);
      removed.push(entry);
    } catch {
      /* gone meanwhile, or not ours to remove: skipped */
    }
  }
  return removed;
}
