/**
 * Runs a grep/glob job in a worker thread (see search-worker.ts) with an AbortSignal and a time
 * limit. Never rejects: abort, timeout and worker failure come back as outcomes.
 */

export type SearchJob = {
  root: string;
  rootIsFile: boolean;
  /** Canonical roots a symlinked file must resolve into (when `confine`) and must not resolve into (`denied`). */
  roots: { allowed: string[]; denied: string[]; confine: boolean };
  limit: number;
  /** Directory entries visited before the walk stops. */
  maxEntries: number;
} & ({ op: "glob"; pattern: string } | { op: "grep"; pattern: string; ignoreCase: boolean; include?: string });

/** Files larger than this are skipped by grep. */
export const GREP_MAX_FILE_BYTES = 10 * 1024 * 1024;
/** A matched line is shown as at most this many characters (around the match). */
export const GREP_MAX_LINE_CHARS = 500;

export type SearchOutcome =
  | {
      ok: true;
      results: string[];
      limited: boolean;
      walkTruncated: boolean;
      /** When the walk was cut: the directory (relative to the root, "" for the root) it stopped reading. */
      stoppedIn?: string;
      visited: number;
      skipped: number;
      /** grep: files skipped as binary, and those over GREP_MAX_FILE_BYTES (path relative to the root, size). */
      binary?: number;
      large?: Array<{ rel: string; size: number }>;
      /**
       * Symlinks the walk did not list as files: links to directories (never descended) and, for glob, matching links
       * that lead nowhere (dangling, looping, or to a FIFO/socket/device); counts and the first three paths.
       */
      links?: { dirs: number; dirNames: string[]; broken: number; brokenNames: string[] };
    }
  | { ok: false; message: string };

export type SearchRun = SearchOutcome | { ok: false; aborted: true } | { ok: false; timedOut: true };

const WORKER_URL = new URL("./search-worker.js", import.meta.url);

/** node:worker_threads loads on the first search (a first turn that runs none never pays for it). */
export async function runSearch(job: SearchJob, signal: AbortSignal, timeoutMs: number): Promise<SearchRun> {
  const { Worker } = await import("node:worker_threads");
  return new Promise((resolve) => {
    const worker = new Worker(WORKER_URL, { workerData: job });
    let settled = false;
    const finish = (r: SearchRun): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      worker.terminate().catch(() => undefined);
      resolve(r);
    };
    const onAbort = (): void => finish({ ok: false, aborted: true });
    const timer = setTimeout(() => finish({ ok: false, timedOut: true }), timeoutMs);
    if (signal.aborted) return finish({ ok: false, aborted: true });
    signal.addEventListener("abort", onAbort, { once: true });
    worker.once("message", (m: SearchOutcome) => finish(m));
    worker.once("error", (err) => finish({ ok: false, message: err.message }));
    worker.once("exit", () => finish({ ok: false, message: "search worker exited without a result" }));
  });
}
