/**
 * Worker-thread body for `grep` and `glob`: the walk, file reads and (possibly pathological)
 * regular expressions run here so they can never stall the host's event loop; the main thread
 * terminates the worker on abort or timeout. Receives one `SearchJob` as workerData and posts
 * exactly one `SearchOutcome`.
 */
import { openSync, readSync, closeSync, statSync, readFileSync } from "node:fs";
import { parentPort, workerData } from "node:worker_threads";
import { compileGlob } from "./glob-match.js";
import type { SearchJob, SearchOutcome } from "./search.js";
import { walkFiles, type WalkState } from "./walk.js";

/** Files larger than this are skipped by grep. */
const GREP_MAX_FILE_BYTES = 10 * 1024 * 1024;
/** A matched line is cut to this many characters in the output. */
const GREP_MAX_LINE_CHARS = 500;

function isBinary(abs: string): boolean {
  const fd = openSync(abs, "r");
  try {
    const buf = Buffer.alloc(8192);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return buf.subarray(0, n).includes(0);
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
      if (!re.test(f.rel)) continue;
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
      let text: string;
      try {
        const st = statSync(f.abs);
        if (!st.isFile() || st.size > GREP_MAX_FILE_BYTES || isBinary(f.abs)) {
          skipped++;
          continue;
        }
        text = readFileSync(f.abs, "utf8");
      } catch {
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
