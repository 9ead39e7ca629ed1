/**
 * Locked, atomic JSON files shared by the settings, auth and catalog stores.
 * Contracts:
 * - `withFileLock` serializes across processes (proper-lockfile, `<file>.lock` directory); the
 *   file itself need not exist, but its directory must.
 * - `writeJsonAtomic` replaces the file atomically (write-file-atomic: temp file + rename) with
 *   the given mode; readers never see a partial document.
 * - `readJsonFile` reports a missing file as `undefined` and throws `JsonFileError` for anything
 *   unreadable or unparseable. Errors never carry file contents; callers must not surface the path.
 */
import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import lockfile from "proper-lockfile";
import writeFileAtomic from "write-file-atomic";

/** A file could not be read, parsed, locked or written. `reason` is a fixed label. */
export class JsonFileError extends Error {
  constructor(readonly reason: "unreadable" | "malformed" | "too_large" | "lock_failed" | "write_failed") {
    super(`json file ${reason}`);
    this.name = "JsonFileError";
  }
}

/** Documents we own are small; anything larger is treated as malformed before parsing. */
export const MAX_JSON_FILE_BYTES = 4 * 1024 * 1024;

export async function readJsonFile(path: string): Promise<unknown> {
  let buf: Buffer;
  try {
    buf = await readFile(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new JsonFileError("unreadable");
  }
  if (buf.byteLength > MAX_JSON_FILE_BYTES) throw new JsonFileError("too_large");
  try {
    return JSON.parse(buf.toString("utf8")) as unknown;
  } catch {
    throw new JsonFileError("malformed");
  }
}

/**
 * Read-side memo of one JSON file: re-reads and re-decodes only when the file's identity changes
 * (device, inode, size, change and modification times in ns), so hot read paths (`status` on every request)
 * cost one `stat` while the file is unchanged. Atomic replacement always yields a new identity. A missing file
 * is remembered too. `decode` runs on every (re)read and may throw; a failed read is not remembered. File times
 * are coarse (a few ms), so a file modified within the last `STABLE_AFTER_MS` is not remembered: an in-place
 * rewrite of the same size inside one timestamp tick cannot be missed.
 * Values come back as structured clones, so callers may not alter the memo.
 */
const STABLE_AFTER_MS = 100;

export class JsonFileMemo<T> {
  private key: string | null = null;
  private value: T | undefined;

  constructor(
    private readonly path: string,
    private readonly decode: (raw: unknown) => T,
  ) {}

  async read(): Promise<T> {
    let key: string;
    let stable: boolean;
    try {
      const st = statSync(this.path, { bigint: true, throwIfNoEntry: false });
      key = st === undefined ? "missing" : `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
      const changedMs = st === undefined ? 0 : Number((st.mtimeNs > st.ctimeNs ? st.mtimeNs : st.ctimeNs) / 1_000_000n);
      stable = Date.now() - changedMs > STABLE_AFTER_MS;
    } catch {
      throw new JsonFileError("unreadable");
    }
    if (key !== this.key) {
      this.key = null;
      const value = this.decode(await readJsonFile(this.path));
      this.value = value;
      if (stable) this.key = key;
    }
    return structuredClone(this.value) as T;
  }
}

export async function writeJsonAtomic(path: string, value: unknown, mode = 0o600): Promise<void> {
  try {
    await writeFileAtomic(path, JSON.stringify(value, null, 2) + "\n", { mode, fsync: true });
  } catch {
    throw new JsonFileError("write_failed");
  }
}

/** Lock options: bounded retry (~5 s worst case), stale locks of dead processes reclaimed after 10 s. */
const LOCK_OPTIONS = {
  realpath: false,
  stale: 10_000,
  retries: { retries: 200, minTimeout: 5, maxTimeout: 50, factor: 1.3, randomize: true },
} as const;

export async function withFileLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  let release: () => Promise<void>;
  try {
    release = await lockfile.lock(path, { ...LOCK_OPTIONS, onCompromised: () => undefined });
  } catch {
    throw new JsonFileError("lock_failed");
  }
  try {
    return await fn();
  } finally {
    await release().catch(() => undefined);
  }
}
