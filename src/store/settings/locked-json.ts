/**
 * Locked, atomic JSON files shared by the settings, auth and catalog stores.
 * Contracts:
 * - `withFileLock` serializes across processes (the mkdir lock protocol of store/sessions/dirlock.ts: a `<file>.lock`
 *   directory, 0700, mtime-refreshed while held, taken over once LOCK_STALE_MS old; plus a 0600 `<file>.lock.owner`
 *   record); the file itself need not exist, but its directory must. A lock whose holder died is recovered at once,
 *   and temp files a killed writer left are removed under the lock.
 * - `writeJsonAtomic` replaces the file atomically and durably (store/atomic-file.ts: temp file, fsync, rename,
 *   directory fsync) with the given mode; readers never see a partial document.
 * - A path that is a symbolic link (a dotfiles set-up: settings.json links into a dotfiles repository) is written
 *   through, never replaced: both the lock and the replacement act on the link's final target (`linkTarget`), in the
 *   target's own directory, so the link stays and writers through different links to one file serialize. The target
 *   keeps its mode unless the caller forces one (auth.json: credentials stay 0600). A dangling link's target is
 *   created (0600 by default) when its directory exists; otherwise the write fails as it would for a missing directory.
 *   A caller may confine that to a directory (`within`: a project's): a link to a target outside it is replaced.
 * - `readJsonFile` reports a missing file as `undefined` and throws `JsonFileError` for anything
 *   unreadable or unparseable; a file that is not UTF-8 is `not_utf8` (decoding it would turn its bytes into U+FFFD,
 *   which the next locked write would store for good); valid JSON nested deeper than MAX_JSON_DEPTH is `too_deep`. Errors never carry file contents; callers must not surface the path.
 */
import { isUtf8 } from "node:buffer";
import { existsSync, rmSync, statSync, writeFileSync, type BigIntStats } from "node:fs";
import { lstat, readdir, readlink, realpath, rm, stat } from "node:fs/promises";
import { basename, dirname, join, resolve, sep } from "node:path";
import { checkJsonBounds } from "../../core/json-bounds.js";
import { isTempName, writeFileAtomic } from "../atomic-file.js";
import { readRegularFile, readRegularFileSync } from "../regular-file.js";
import { lock, type DirLock } from "../sessions/dirlock.js";
import { HOST, PROCESS_TOKEN, ownerIsDead, readOwnerSync, type OwnerInfo } from "../lock-owner.js";

/** A file could not be read, parsed, locked or written. `reason` is a fixed label. */
export class JsonFileError extends Error {
  constructor(
    readonly reason: "unreadable" | "not_file" | "malformed" | "not_utf8" | "too_large" | "too_deep" | "lock_failed" | "write_failed",
    /** The read's own failure (an ErrnoException or IrregularFileError: a code, never file contents), when there is one. */
    options?: { cause: unknown },
  ) {
    super(`json file ${reason}`, options);
    this.name = "JsonFileError";
  }
}

/** Documents we own are small; anything larger is treated as malformed before parsing. */
export const MAX_JSON_FILE_BYTES = 4 * 1024 * 1024;

/**
 * Nesting bound of the documents we own, in containers (`{}` is 1; the same count and number as an MCP tool's input
 * schema). Our own documents nest 5 levels at most; the bound leaves room for unknown fields a user keeps in settings.
 * Past it a document is refused by name before any recursive code sees it: `structuredClone` (every memo read)
 * overflows the stack near 2,000 levels, and that overflow used to be reported as "not valid JSON".
 */
export const MAX_JSON_DEPTH = 64;

const DEPTH_ONLY = { maxDepth: MAX_JSON_DEPTH, maxArrayItems: Infinity, maxObjectFields: Infinity, maxStringBytes: Infinity };

export async function readJsonFile(path: string): Promise<unknown> {
  return readBoundedJsonFile(path, MAX_JSON_FILE_BYTES);
}

/**
 * `readJsonFile` with another size bound (the channels' delivery state can legitimately pass 4 MiB): the same
 * checks (regular file, UTF-8, BOM, MAX_JSON_DEPTH) and the same errors, `cause` set for a failed read.
 */
export async function readBoundedJsonFile(path: string, maxBytes: number): Promise<unknown> {
  let buf: Buffer;
  try {
    // Opened non-blocking and checked before reading: a FIFO planted as a project's settings file never hangs us.
    buf = await readRegularFile(path, maxBytes);
  } catch (err) {
    return missingOr(err);
  }
  return parseJsonFile(buf, maxBytes);
}

/** A read failure as this module reports it: `undefined` for a missing file, else a fixed label thrown. */
function missingOr(err: unknown): undefined {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return undefined;
  throw new JsonFileError(code === "EFBIG" ? "too_large" : code === "EISDIR" || code === "ENOTREG" ? "not_file" : "unreadable", { cause: err });
}

function parseJsonFile(buf: Buffer, maxBytes = MAX_JSON_FILE_BYTES): unknown {
  if (buf.byteLength > maxBytes) throw new JsonFileError("too_large");
  if (!isUtf8(buf)) throw new JsonFileError("not_utf8");
  let value: unknown;
  try {
    const text = buf.toString("utf8");
    // A leading byte order mark (Windows editors write one) is not part of the JSON.
    value = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text) as unknown;
  } catch {
    throw new JsonFileError("malformed");
  }
  // JSON.parse itself takes any depth; the walk is iterative.
  if (checkJsonBounds(value, DEPTH_ONLY) !== null) throw new JsonFileError("too_deep");
  return value;
}

/** `readJsonFile` done synchronously: the same result and errors. */
function readJsonFileSync(path: string): unknown {
  let buf: Buffer;
  try {
    buf = readRegularFileSync(path, MAX_JSON_FILE_BYTES);
  } catch (err) {
    return missingOr(err);
  }
  return parseJsonFile(buf);
}

/**
 * Files the memo has just found (by its synchronous `stat`) to be at most this large, or missing, are read
 * synchronously too: a few page-cache copies, where an async read is four thread-pool round trips (open, fstat,
 * read, close) that queue behind whatever holds the pool — a new session's fsyncs, when `berth stdio`'s
 * `session.start` reads the approval policy and resolves the model (~1.5 ms of it; docs/runtime.md, ninth pass).
 * A FIFO or device is refused after a non-blocking open (store/regular-file.ts), never read.
 */
export const SYNC_READ_MAX_BYTES = 64 * 1024;

/**
 * Read-side memo of one JSON file: re-reads and re-decodes only when the file's identity changes
 * (device, inode, size, change and modification times in ns), so hot read paths (`status` on every request)
 * cost one `stat` while the file is unchanged. Atomic replacement always yields a new identity. A missing file
 * is remembered too. `decode` runs on every (re)read and may throw; a failed read is not remembered. File times
 * are coarse (a few ms), so a file modified within the last `STABLE_AFTER_MS` is not remembered: an in-place
 * rewrite of the same size inside one timestamp tick cannot be missed.
 * Values come back as structured clones, so callers may not alter the memo; `readShared` returns the memo's own
 * value instead, deeply frozen, and the same object while the file's identity is remembered (a hot path may key its
 * own memos on that object). Concurrent reads of one identity share one read and decode.
 */
export const STABLE_AFTER_MS = 100;

export class JsonFileMemo<T> {
  private key: string | null = null;
  /** The identity behind `key` as `stat` gave it (null: none remembered), compared field by field on the hot path. */
  private ident: BigIntStats | "missing" | null = null;
  private value: T | undefined;
  /** The read under way, by file identity: concurrent reads of an unchanged file share it. */
  private pending: { key: string; value: Promise<T> } | null = null;

  constructor(
    private readonly path: string,
    private readonly decode: (raw: unknown) => T,
    /** Wall clock (ms) compared with the file's change time; injectable for tests. */
    private readonly now: () => number = Date.now,
  ) {}

  async read(): Promise<T> {
    return structuredClone(await this.readShared());
  }

  /** The memo's own value (deeply frozen; see the class contract). */
  async readShared(): Promise<T> {
    let key: string;
    let stable: boolean;
    let small: boolean;
    let identOf: BigIntStats | "missing";
    try {
      const st = statSync(this.path, { bigint: true, throwIfNoEntry: false });
      // The remembered identity, unchanged (every turn's case): no key string built from five BigInts.
      const id = this.ident;
      if (this.key !== null && id !== null && (st === undefined ? id === "missing" : id !== "missing" && sameIdentity(st, id))) return this.value as T;
      identOf = st ?? "missing";
      small = st === undefined || st.size <= BigInt(SYNC_READ_MAX_BYTES);
      key = st === undefined ? "missing" : `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
      const changedMs = st === undefined ? 0 : Number((st.mtimeNs > st.ctimeNs ? st.mtimeNs : st.ctimeNs) / 1_000_000n);
      stable = this.now() - changedMs > STABLE_AFTER_MS;
    } catch {
      throw new JsonFileError("unreadable");
    }
    if (key !== this.key) {
      this.key = null;
      this.ident = null;
      let read = this.pending?.key === key ? this.pending : null;
      if (read === null) {
        let value: Promise<T>;
        if (small) {
          try {
            value = Promise.resolve(deepFreeze(this.decode(readJsonFileSync(this.path))));
          } catch (e) {
            value = Promise.reject(e instanceof Error ? e : new JsonFileError("unreadable"));
          }
        } else {
          value = readJsonFile(this.path).then((raw) => deepFreeze(this.decode(raw)));
        }
        const entry = { key, value };
        this.pending = read = entry;
        const done = (): void => void (this.pending === entry && (this.pending = null));
        entry.value.then(done, done);
      }
      const value = await read.value;
      this.value = value;
      if (stable) {
        this.key = key;
        this.ident = identOf;
      }
      return value;
    }
    return this.value as T;
  }
}

/** Whether two `stat`s show the same file identity (the fields of `JsonFileMemo`'s key). */
function sameIdentity(a: BigIntStats, b: BigIntStats): boolean {
  return a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs && a.dev === b.dev;
}

/** Freezes `v` and everything reachable from it (decoded JSON: plain objects and arrays). */
function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/** Links followed before giving up (Linux's own limit for one path lookup). */
const MAX_LINK_HOPS = 40;

/**
 * The file a write of `path` must replace: `path` itself unless it is a symbolic link, else the final target of its
 * chain of links (each relative target taken against its link's directory), whether or not that target exists. Only
 * the last component is followed: a symlinked directory on the way is the same place either way. A loop, or a chain
 * longer than MAX_LINK_HOPS, throws `write_failed`. With `within` (a project's directory), a link is followed only to a
 * target inside that directory: a cloned repository's `.berth/settings.json` may link anywhere (the user's own
 * files), and a write must not reach there; such a link is replaced by a regular file, as any path is.
 */
export async function linkTarget(path: string, within?: string): Promise<string> {
  const target = await finalTarget(path);
  if (within === undefined || target === path) return target;
  return (await isInside(target, within)) ? target : path;
}

/** Whether `file`'s directory is `dir` or below it, both resolved through links; false when either is missing. */
async function isInside(file: string, dir: string): Promise<boolean> {
  try {
    const [d, root] = await Promise.all([realpath(dirname(file)), realpath(dir)]);
    return d === root || d.startsWith(root.endsWith(sep) ? root : root + sep);
  } catch {
    return false;
  }
}

async function finalTarget(path: string): Promise<string> {
  let cur = path;
  for (let hops = 0; ; hops++) {
    let isLink: boolean;
    try {
      isLink = (await lstat(cur)).isSymbolicLink();
    } catch {
      return cur; // missing (or unreadable: the write reports it)
    }
    if (!isLink) return cur;
    if (hops >= MAX_LINK_HOPS) throw new JsonFileError("write_failed");
    try {
      cur = resolve(dirname(cur), await readlink(cur));
    } catch {
      throw new JsonFileError("write_failed");
    }
  }
}

/**
 * Replaces `path`'s content (through a symbolic link: its target's; see the module contract). `mode` is the new
 * file's mode; a link's existing target keeps its own mode unless `forceMode` (a file holding credentials). `within`:
 * see `linkTarget`.
 */
export async function writeJsonAtomic(path: string, value: unknown, mode = 0o600, o: { forceMode?: boolean; within?: string } = {}): Promise<void> {
  const forceMode = o.forceMode === true;
  try {
    const target = await linkTarget(path, o.within);
    let keep = mode;
    if (target !== path && !forceMode) keep = await stat(target).then((st) => st.mode & 0o777, () => mode);
    await writeFileAtomic(target, JSON.stringify(value, null, 2) + "\n", keep);
  } catch {
    throw new JsonFileError("write_failed");
  }
}

/**
 * Lock tuning: a live holder is waited for up to LOCK_WAIT_MS; a holder proven dead (its owner record names this
 * host and a pid that no longer exists, or this pid under another process token) is recovered at once; a lock
 * without a readable owner record is recovered once its directory is LOCK_STALE_MS old (dirlock.ts's rule; a live
 * holder refreshes its directory's mtime every LOCK_STALE_MS / 2).
 */
const LOCK_WAIT_MS = 5000;
const LOCK_STALE_MS = 10_000;
const NO_RETRY = { retries: 0, minTimeout: 0, maxTimeout: 0, factor: 1 };

/** One-shot timers the lock wait runs on (the channels' `Timers`): injectable, so a test moves the 5 s by hand. */
export interface LockTimers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const realLockTimers: LockTimers = { set: (fn, ms) => setTimeout(fn, ms), clear: (h) => clearTimeout(h as NodeJS.Timeout) };

/**
 * Removes `<path>.lock` when its recorded owner is dead. Runs under `<path>.lock.reclaim` and removes the owner
 * record before the directory, so two recoverers can never remove a lock a live process has just taken.
 */
async function recoverDeadLock(path: string): Promise<void> {
  let reclaim: DirLock;
  try {
    reclaim = await lock(`${path}.lock.reclaim`, { stale: 2000, update: 1000, retries: NO_RETRY, onCompromised: () => undefined });
  } catch {
    return;
  }
  try {
    const owner = readOwnerSync(`${path}.lock.owner`);
    if (owner === null || !ownerIsDead(owner)) return;
    rmSync(`${path}.lock.owner`, { force: true });
    rmSync(`${path}.lock`, { recursive: true, force: true });
  } finally {
    await reclaim.release().catch(() => undefined);
  }
}

/**
 * Removes atomic-write temp files (`<name>.<digits>`) of `path` left by a writer killed mid-write. Called
 * with the lock held: every writer of `path` holds it, so any such file is debris.
 */
async function removeTempDebris(path: string): Promise<void> {
  const dir = dirname(path);
  const name = basename(path);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  for (const n of names) if (isTempName(n, name)) await rm(join(dir, n), { force: true }).catch(() => undefined);
}

/**
 * Runs `fn` holding `path`'s lock (taken beside a symbolic link's target: see the module contract; `within`: see
 * `linkTarget`). The wait for a live holder (LOCK_WAIT_MS, then `lock_failed`) and its retries run on `timers`.
 */
export async function withFileLock<T>(linkPath: string, fn: () => Promise<T>, within?: string, timers: LockTimers = realLockTimers): Promise<T> {
  const path = await linkTarget(linkPath, within).catch(() => {
    throw new JsonFileError("lock_failed");
  });
  let expired = false;
  // The retry being waited for, cut short when the wait runs out: the error comes at LOCK_WAIT_MS, not a retry later.
  let retry: { handle: unknown; go: () => void } | null = null;
  const deadline = timers.set(() => {
    expired = true;
    if (retry !== null) {
      timers.clear(retry.handle);
      retry.go();
    }
  }, LOCK_WAIT_MS);
  let held: DirLock | undefined;
  try {
    for (let wait = 5; held === undefined; wait = Math.min(50, Math.ceil(wait * 1.3))) {
      try {
        held = await lock(`${path}.lock`, { stale: LOCK_STALE_MS, update: LOCK_STALE_MS / 2, retries: NO_RETRY, onCompromised: () => undefined });
      } catch (err) {
        if ((err as { code?: string }).code !== "ELOCKED") throw new JsonFileError("lock_failed");
        await recoverDeadLock(path);
        if (expired) throw new JsonFileError("lock_failed");
        if (existsSync(`${path}.lock`)) {
          await new Promise<void>((go) => (retry = { handle: timers.set(go, wait), go }));
          retry = null;
        }
      }
    }
  } finally {
    timers.clear(deadline);
  }
  const ownerPath = `${path}.lock.owner`;
  try {
    writeFileSync(ownerPath, JSON.stringify({ pid: process.pid, host: HOST, token: PROCESS_TOKEN } satisfies OwnerInfo), { mode: 0o600 });
    await removeTempDebris(path);
    return await fn();
  } finally {
    if (readOwnerSync(ownerPath)?.token === PROCESS_TOKEN) rmSync(ownerPath, { force: true });
    await held.release().catch(() => undefined);
  }
}
