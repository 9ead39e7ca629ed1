/**
 * Worker-thread body for `grep` and `glob`: the walk, file reads and (possibly pathological)
 * regular expressions run here so they can never stall the host's event loop; the main thread
 * terminates the worker on abort or timeout. Receives one `SearchJob` as workerData and posts
 * exactly one `SearchOutcome`.
 */
import { constants as FS, closeSync, fstatSync, lstatSync, openSync, readFileSync, readSync, realpathSync } from "node:fs";
import { sep } from "node:path";
import { parentPort, workerData } from "node:worker_threads";
import { compileGlob, couldContainMatch } from "./glob-match.js";
import { GREP_MAX_FILE_BYTES, GREP_MAX_LINE_CHARS, type SearchJob, type SearchOutcome } from "./search.js";
import { newWalkState, walkFiles, type WalkEntry } from "./walk.js";


function within(child: string, root: string): boolean {
  return child === root || child.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** Why a file was not searched: outside the policy or not a regular file (silent), binary, or over the size bound. */
type Skip = { skip: "other" } | { skip: "binary" } | { skip: "large"; size: number };

/**
 * The text of a searchable file, or why it is skipped: a symlink must lead inside the allowed roots (when confined)
 * and outside the denied ones; only regular files up to the size bound without a NUL in the first 8 KiB are read.
 * The open is O_NONBLOCK and checked with fstat, so a FIFO or device never blocks this thread.
 */
function readSearchable(abs: string, roots: SearchJob["roots"]): string | Skip {
  let path = abs;
  if (roots.denied.some((r) => within(abs, r))) return { skip: "other" };
  if (lstatSync(abs).isSymbolicLink()) {
    path = realpathSync(abs);
    if (roots.confine && !roots.allowed.some((r) => within(path, r))) return { skip: "other" };
    if (roots.denied.some((r) => within(path, r))) return { skip: "other" };
  }
  const fd = openSync(path, FS.O_RDONLY | FS.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { skip: "other" };
    if (st.size > GREP_MAX_FILE_BYTES) return { skip: "large", size: st.size };
    const buf = Buffer.alloc(8192);
    const n = readSync(fd, buf, 0, buf.length, 0);
    if (buf.subarray(0, n).includes(0)) return { skip: "binary" };
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}

/** Index of a surrogate-pair-safe cut at or before `i` (never between the halves of a pair). */
function safeCut(line: string, i: number): number {
  const c = line.charCodeAt(i);
  return i > 0 && c >= 0xdc00 && c <= 0xdfff ? i - 1 : i;
}

/**
 * A matched line as shown: whole when short; else `GREP_MAX_LINE_CHARS` characters around the first match (a
 * little context before it), each cut side marked, so a match deep in a minified file is visible.
 */
function shownLine(line: string, matchAt: number): string {
  if (line.length <= GREP_MAX_LINE_CHARS) return line;
  const start = safeCut(line, Math.max(0, Math.min(matchAt - 100, line.length - GREP_MAX_LINE_CHARS)));
  const end = safeCut(line, start + GREP_MAX_LINE_CHARS);
  return `${start > 0 ? `[… ${start} chars cut] ` : ""}${line.slice(start, end)}${end < line.length ? ` [… ${line.length - end} chars cut]` : ""}`;
}

function run(job: SearchJob): SearchOutcome {
  const state = newWalkState();
  const files: Iterable<WalkEntry> = job.rootIsFile
    ? [{ rel: "", abs: job.root, kind: "file" }]
    : // glob names only the symlinked directories a match could have been under (not `docs/x` for `src/**/*.ts`).
      walkFiles(job.root, job.maxEntries, state, job.op === "glob" ? couldContainMatch(job.pattern) : undefined);
  const results: string[] = [];
  let limited = false;
  let skipped = 0;
  let binary = 0;
  const large: Array<{ rel: string; size: number }> = [];
  const broken: string[] = [];
  let brokenCount = 0;
  if (job.op === "glob") {
    const re = compileGlob(job.pattern);
    for (const f of files) {
      if (!re.test(f.rel) || job.roots.denied.some((r) => within(f.abs, r))) continue;
      if (f.kind === "broken") {
        if (brokenCount++ < 3) broken.push(f.rel);
        continue;
      }
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
      if (f.kind === "broken") continue;
      if (include !== null && f.rel !== "") {
        const subject = includeBasename ? f.rel.slice(f.rel.lastIndexOf("/") + 1) : f.rel;
        if (!include.test(subject)) continue;
      }
      let text: string | Skip;
      try {
        text = readSearchable(f.abs, job.roots);
      } catch {
        text = { skip: "other" };
      }
      if (typeof text !== "string") {
        skipped++;
        if (text.skip === "large") large.push({ rel: f.rel, size: text.size });
        else if (text.skip === "binary") binary++;
        continue;
      }
      const lines = text.split("\n");
      for (let i = 0; i < lines.length; i++) {
        let line = lines[i] as string;
        if (line.endsWith("\r")) line = line.slice(0, -1);
        const m = re.exec(line);
        if (m === null) continue;
        if (results.length >= job.limit) {
          limited = true;
          break outer;
        }
        results.push(`${f.rel}\u0000${i + 1}\u0000${shownLine(line, m.index)}`);
      }
    }
  }
  return {
    ok: true,
    results,
    limited,
    walkTruncated: state.truncated,
    ...(state.stoppedIn !== undefined ? { stoppedIn: state.stoppedIn } : {}),
    visited: state.visited,
    skipped,
    binary,
    large,
    links: { dirs: state.linkedDirs, dirNames: state.linkedDirNames, broken: brokenCount, brokenNames: broken },
  };
}

let outcome: SearchOutcome;
try {
  outcome = run(workerData as SearchJob);
} catch (err) {
  outcome = { ok: false, message: err instanceof Error ? err.message : String(err) };
}
parentPort?.postMessage(outcome);
