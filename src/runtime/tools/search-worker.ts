/**
 * Worker-thread body for `grep` and `glob`: the walk, file reads and (possibly pathological)
 * regular expressions run here so they can never stall the host's event loop; the main thread
 * terminates the worker on abort or timeout. Receives one `SearchJob` as workerData and posts
 * exactly one `SearchOutcome`.
 */
import { constants as FS, closeSync, fstatSync, lstatSync, openSync, readFileSync, readSync, realpathSync } from "node:fs";
import { sep } from "node:path";
import { parentPort, workerData } from "node:worker_threads";
import { compileGlob } from "./glob-match.js";
import type { SearchJob, SearchOutcome } from "./search.js";
import { walkFiles, type WalkState } from "./walk.js";

/** Files larger than this are skipped by grep. */
const GREP_MAX_FILE_BYTES = 10 * 1024 * 1024;
/** A matched line is cut to this many characters in the output. */
const GREP_MAX_LINE_CHARS = 500;

function within(child: string, root: string): boolean {
  return child === root || child.startsWith(root.endsWith(sep) ? root : root + sep);
}

/**
 * The text of a searchable file, or null to skip it: a symlink must lead inside the allowed roots (when confined)
 * and outside the denied ones; only regular files up to the size bound without a NUL in the first 8 KiB are read.
 * The open is O_NONBLOCK and checked with fstat, so a FIFO or device never blocks this thread.
 */
function readSearchable(abs: string, roots: SearchJob["roots"]): string | null {
  let path = abs;
  if (roots.denied.some((r) => within(abs, r))) return null;
  if (lstatSync(abs).isSymbolicLink()) {
    path = realpathSync(abs);
    if (roots.confine && !roots.allowed.some((r) => within(path, r))) return null;
    if (roots.denied.some((r) => within(path, r))) return null;
  }
  const fd = openSync(path, FS.O_RDONLY | FS.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > GREP_MAX_FILE_BYTES) return null;
    const buf = Buffer.alloc(8192);
    const n = readSync(fd, buf, 0, buf.length, 0);
    if (buf.subarray(0, n).includes(0)) return null;
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}

function run(job: SearchJob): SearchOutcome {
  const state: WalkState = { visited: 0, truncated: false, unreadable: 0 };
  const files: Iterable<{ rel: string; abs: string }> = job.rootIsFile
    ? [{ rel: "", abs: job.root }]
    : walkFiles(job.root, job.maxEntries, state);
  const results: string[] = [];
  let limited = false;
  let skipped = 0;
  if (job.op === "glob") {
    const re = compileGlob(job.pattern);
    for (const f of files) {
      if (!re.test(f.rel) || job.roots.denied.some((r) => within(f.abs, r))) continue;
      if (results.length >= job.limit) {
        limited = true;
        break;
      }
      results.push(f.rel);
    }
  } else {
    const re = new RegExp(job.pattern, job.ignoreCase ? "i" : "");
    const include = job.include === undefined ? null : compileGlob(job.include);
    const includeBasename = job.include !== undefined && !job.include.includes("/");
    outer: for (const f of files) {
      if (include !== null && f.rel !== "") {
        const subject = includeBasename ? f.rel.slice(f.rel.lastIndexOf("/") + 1) : f.rel;
        if (!include.test(subject)) continue;
      }
      let text: string | null;
      try {
        text = readSearchable(f.abs, job.roots);
      } catch {
        text = null;
      }
      if (text === null) {
        skipped++;
        continue;
      }
      const lines = text.split("\n");
      for (let i = 0; i < lines.length; i++) {
        let line = lines[i] as string;
        if (line.endsWith("\r")) line = line.slice(0, -1);
        if (!re.test(line)) continue;
        if (results.length >= job.limit) {
          limited = true;
          break outer;
        }
        const shown = line.length > GREP_MAX_LINE_CHARS ? `${line.slice(0, GREP_MAX_LINE_CHARS)} [… cut]` : line;
        results.push(`${f.rel}\u0000${i + 1}\u0000${shown}`);
      }
    }
  }
  return { ok: true, results, limited, walkTruncated: state.truncated, visited: state.visited, skipped };
}

let outcome: SearchOutcome;
try {
  outcome = run(workerData as SearchJob);
} catch (err) {
  outcome = { ok: false, message: err instanceof Error ? err.message : String(err) };
}
parentPort?.postMessage(outcome);
