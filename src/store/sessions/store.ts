/**
 * The durable session store: files under `<home>/sessions/`, leases under `<home>/session-locks/`.
 * Protocol-neutral: returns records and store errors; adapters project them to their wire formats.
 *
 * Contracts:
 * - Every method taking an ID validates it first (`SessionError("invalid_id")`) and builds paths only from valid IDs.
 * - `create` durably records the header (file + directory fsync) before returning a held `SessionHandle`.
 * - `list` treats an empty session file (debris of a create killed by an older Berth) as no session and removes it
 *   once its lease is free; it is never reported as `incomplete`. A `createWith` killed before its session was in
 *   place leaves a temporary file that is never listed; `list` removes it likewise (create-whole.ts).
 * - `createWith` makes a session that starts with records, whole or not at all (create-whole.ts).
 * - `acquire` takes the exclusive writer lease of an existing session and opens its writer; with `closeInterrupted`
 *   (the session manager's attach) a turn left open by a writer that died mid-turn is closed first (a `failed`
 *   terminal record with its text on disk, interrupted.ts).
 * - `readWindow` never writes and never returns a snapshot cut by an in-flight append: it reads without the
 *   append/rotation lock only while that lock is absent and the read ends on a complete line, and otherwise reads
 *   again under the lock (see locks.ts).
 * - Sidecars (`readSidecar`/`writeSidecar`, see sidecar.ts) hold data derived from a session file version; they
 *   are a cache, never a source of truth, and live outside `sessions/`.
 * - `list` examines at most `maxScanEntries` directory entries; exceeding it throws `SessionError("limit")`
 *   and returns nothing partial.
 * - `readHistory` with the session's writer (this process holds the lease, so nobody else appends) keeps the
 *   window it read in memory and, next time, adds the records that writer wrote since, instead of reading the file
 *   again — only when one `stat` of the file shows exactly the identity (inode, size, mtime) the writer left it at
 *   and the window still holds the whole file, of at most `MAX_KEPT_HISTORY_BYTES` (memory: each attached session
 *   keeps its records parsed). Anything else (another process wrote, the file was replaced, the
 *   bounds are reached, a write the writer cannot account for) reads the file as before. A session `create` made
 *   starts with its empty window kept (the header it wrote), under the same `stat` check.
 */
import { opendir } from "node:fs/promises";
import { constants as FS, fstatSync, mkdirSync, openSync, statSync, writeSync } from "node:fs";
import { SessionError, storageCause } from "./errors.js";
import { closeQuietly, syncData, syncDir, unlinkQuietly } from "./fdio.js";
import { defaultSessionId, isValidSessionId, type SessionIdGenerator } from "./ids.js";
import { DEFAULT_LOCK_TUNING, SessionLocks, type Lease, type LockTuning } from "./locks.js";
import { INVALID_SESSION_FILE, SessionPaths } from "./paths.js";
import { FIRST_SEQ, FORMAT_VERSION, validateHeader, type HeaderRecord, type NewRecord, type RecordKind } from "./records.js";
import {
  openForRead,
  readHeader,
  readListHead,
  readTailState,
  readWindow,
  readLinesBefore,
  type FileVersion,
  type RangeRecords,
  type ReuseCheck,
  type WindowBounds,
  type WindowSnapshot,
} from "./reader.js";
import { readSidecar, sweepAbandonedTemps, writeSidecar } from "./sidecar.js";
import { SessionWriter } from "./writer.js";
import { interruptedTerminal, openTurnOf } from "./interrupted.js";
import { createWhole, removeAbandonedCopy } from "./create-whole.js";
import { historyOf, KeptHistories, MAX_KEPT_HISTORY_BYTES, type History, type HistoryBounds } from "./kept-history.js";

export { lastValidCheckpoint, type History, type HistoryBounds } from "./kept-history.js";

export interface SessionStoreOptions {
  /** The resolved Berth home (MC_HOME / BERTH_HOME / ~/.berth); the store never reads the environment. */
  home: string;
  clock?: () => number;
  newId?: SessionIdGenerator;
  locks?: Partial<LockTuning>;
  /** List scan budget (app-service: 20,000). */
  maxScanEntries?: number;
  /**
   * The fsync of session writes (default: `fdatasync`). Tests wrap the real one to observe when a record becomes
   * durable; it must call through to a real sync.
   */
  syncData?: (fd: number) => Promise<void>;
}

/** A held writer lease plus the session's writer. Release exactly once when detaching. */
export interface SessionHandle {
  readonly id: string;
  readonly header: HeaderRecord;
  readonly writer: SessionWriter;
  readonly lease: Lease;
  /** Flushes (fsync) and closes the writer, then releases the lease. Idempotent. */
  release(): Promise<void>;
}

export interface ListEntry {
  id: string;
  createdAt: string;
  /** The session's working directory (from its header). */
  cwd: string;
  updatedAtMs: number;
  /** Raw text (or a prefix) of the first user message; adapters sanitize/redact before showing it. */
  titleSource: string | null;
}

export interface ListPage {
  entries: ListEntry[];
  /** The last examined ID (it may have no entry), or null when nothing was examined. */
  nextAfter: string | null;
  /** More candidates remain after `nextAfter`. */
  truncated: boolean;
  /** Some candidates (in this page's examined range, or unrepresentable names anywhere) could not be read. */
  incomplete: boolean;
}

export const DEFAULT_WINDOW: WindowBounds = { maxBytes: 2 * 1024 * 1024, maxRecords: 100_000, quantumBytes: 64 * 1024 };

export class SessionStore {
  readonly paths: SessionPaths;
  private readonly locks: SessionLocks;
  private readonly clock: () => number;
  private readonly newId: SessionIdGenerator;
  private readonly maxScanEntries: number;
  /** Abandoned sidecar temporary files were looked for (once per store: `writeSidecar`). */
  private swept = false;
  private readonly sync: (fd: number) => Promise<void>;
  private dirsReady: Promise<void> | null = null;
  /** History windows kept per writer between turns (kept-history.ts). */
  private readonly kept = new KeptHistories();

  constructor(opts: SessionStoreOptions) {
    this.paths = new SessionPaths(opts.home);
    this.locks = new SessionLocks(this.paths, { ...DEFAULT_LOCK_TUNING, ...opts.locks });
    this.clock = opts.clock ?? Date.now;
    this.newId = opts.newId ?? defaultSessionId;
    this.maxScanEntries = opts.maxScanEntries ?? 20_000;
    this.sync = opts.syncData ?? syncData;
  }

  /**
   * Makes the sessions and locks directories once per store. Synchronous (two mkdir calls, each a single syscall
   * once the directories exist): a session request then reaches its file's creation, on the thread pool, before
   * anything queued behind it (a door's background module loads) runs, instead of waiting behind them for two
   * thread-pool round trips first.
   */
  private ensureDirs(): Promise<void> {
    if (this.dirsReady === null) {
      try {
        mkdirSync(this.paths.sessionsDir, { recursive: true, mode: 0o700 });
        mkdirSync(this.paths.locksDir, { recursive: true, mode: 0o700 });
      } catch (e) {
        return Promise.reject(e instanceof Error ? e : new Error("mkdir failed"));
      }
      this.dirsReady = Promise.resolve();
    }
    return this.dirsReady;
  }

  /** Creates a new session (header fsynced, directory entry fsynced) and returns it held. */
  async create(cwd: string): Promise<SessionHandle> {
    try {
      await this.ensureDirs();
    } catch (e) {
      throw new SessionError("unavailable", storageCause(e));
    }
    for (let attempt = 0; attempt < 8; attempt++) {
      const header = this.newHeader(cwd);
      const id = header.session_id;
      // The lease first (its uncontended path is synchronous: a mkdir and the owner file), then the exclusive file
      // creation and header write, all before the fsyncs start: no directory update here then waits behind a journal
      // commit that our own fsync started. Nobody can know the ID before the lease exists, so a process that lists
      // the new file finds it held. A fresh random ID makes a conflict on either practically impossible, and each side
      // undoes the other when one fails.
      const lease = this.locks.acquireLease(id);
      const file = this.createFile(id, header);
      const [leaseR, fileR] = await Promise.allSettled([lease, file]);
      if (leaseR.status === "fulfilled" && fileR.status === "fulfilled") {
        const h = this.handle(id, header, fileR.value, leaseR.value, FIRST_SEQ, false);
        this.kept.keepCreated(h.writer, id, header, fileR.value);
        return h;
      }
      if (fileR.status === "fulfilled") {
        closeQuietly(fileR.value);
        unlinkQuietly(this.paths.data(id));
      }
      if (leaseR.status === "fulfilled") await leaseR.value.release();
      const retry =
        (fileR.status === "rejected" && (fileR.reason as NodeJS.ErrnoException).code === "EEXIST") ||
        (leaseR.status === "rejected" && leaseR.reason instanceof SessionError && leaseR.reason.code === "busy");
      if (!retry) throw new SessionError("unavailable", storageCause(fileR.status === "rejected" ? fileR.reason : leaseR.status === "rejected" ? leaseR.reason : undefined));
    }
    throw new SessionError("busy");
  }

  /**
   * Creates a session that starts with `records` (seqs from `FIRST_SEQ`), whole or not at all: a process killed
   * meanwhile leaves no session (create-whole.ts). Resolves with its ID once it is durable; holds nothing after.
   */
  async createWith(cwd: string, records: readonly NewRecord[]): Promise<string> {
    try {
      await this.ensureDirs();
    } catch (e) {
      throw new SessionError("unavailable", storageCause(e));
    }
    return createWhole({ paths: this.paths, locks: this.locks, clock: this.clock, sync: this.sync, newHeader: () => this.newHeader(cwd) }, records);
  }

  /** A fresh ID's header (validated). */
  private newHeader(cwd: string): HeaderRecord {
    const id = this.newId(this.clock());
    if (!isValidSessionId(id)) throw new SessionError("invalid_id");
    const header: HeaderRecord = { kind: "header", format: FORMAT_VERSION, session_id: id, created_at: new Date(this.clock()).toISOString(), cwd };
    if (!validateHeader(header)) throw new SessionError("invalid_record");
    return header;
  }

  /**
   * Creates `<id>.jsonl` exclusively with its header and returns its O_APPEND descriptor once the header and the
   * directory entry are both fsynced (the two fsyncs run concurrently). Rejects with EEXIST on collision.
   * A process killed between the exclusive create and the header write (one `write` of a few hundred bytes) leaves an
   * empty file; `list` recognises and removes that debris (issue 18), and nothing else can name its ID.
   */
  private async createFile(id: string, header: HeaderRecord): Promise<number> {
    const path = this.paths.data(id);
    // Synchronous, like the lease's mkdir and owner file before it (one directory update each): the fsyncs then start
    // on the thread pool at once, instead of after a round trip that anything queued on this thread (a door's
    // background module loads) would hold back.
    const fd = openSync(path, FS.O_WRONLY | FS.O_APPEND | FS.O_CREAT | FS.O_EXCL, 0o600);
    try {
      const line = Buffer.from(JSON.stringify(header) + "\n", "utf8");
      // A short write of a new file is a page-cache copy (see fdio.ts); loop for the contract's sake.
      for (let off = 0; off < line.length; ) off += writeSync(fd, line, off, line.length - off);
      const synced = await Promise.allSettled([this.sync(fd), syncDir(this.paths.sessionsDir)]);
      for (const r of synced) if (r.status === "rejected") throw r.reason;
      return fd;
    } catch (e) {
      closeQuietly(fd);
      unlinkQuietly(path);
      throw e;
    }
  }

  /**
   * Takes the writer lease of an existing session (`busy` if held elsewhere, `unavailable` if missing/damaged). With
   * `closeInterrupted` (the session manager, so every door), a turn a dead writer left open is closed first.
   * `settleOnly`: the lease is taken only for that and released right after (its owner file says so throughout); a
   * kept lease says so while it settles. A holder settling is waited for (locks.ts `settleWaitMs`), not `busy`.
   */
  async acquire(id: string, opts: { closeInterrupted?: boolean; settleOnly?: boolean } = {}): Promise<SessionHandle> {
    const path = this.paths.data(id);
    // Existence check before touching the lock directory (`unavailable` when missing).
    closeQuietly(openForRead(path).fd);
    await this.ensureDirs().catch(() => {
      throw new SessionError("unavailable");
    });
    const lease = await this.locks.acquireLease(id, opts.settleOnly === true);
    let fd: number | null = null;
    try {
      fd = openSync(path, FS.O_RDWR | FS.O_APPEND | FS.O_NONBLOCK);
      const st = fstatSync(fd);
      if (!st.isFile()) throw new SessionError("unavailable");
      const h = await readHeader(fd, st.size);
      if (h === null || h.header.session_id !== id) throw new SessionError("unavailable");
      const tail = await readTailState(fd, st.size, h.end);
      const handle = this.handle(id, h.header, fd, lease, tail.nextSeq, tail.torn);
      fd = null; // the writer owns it now
      if (opts.closeInterrupted === true && tail.lastKind !== null && tail.lastKind !== "terminal") {
        // While it settles, a kept lease says so: another door opening the session now waits instead of `busy`.
        if (opts.settleOnly !== true) lease.markSettling(true);
        await this.closeInterrupted(handle);
        if (opts.settleOnly !== true) lease.markSettling(false);
      }
      return handle;
    } catch (e) {
      if (fd !== null) closeQuietly(fd);
      await lease.release();
      throw e instanceof SessionError ? e : new SessionError("unavailable");
    }
  }

  /**
   * The session's last turn when a dead writer left it open (interrupted.ts): closed `failed` with the text it had
   * on disk, fsynced before the handle is returned. We hold the lease, so its writer can never append again.
   * Failing that write releases the handle and rejects with the write's cause: the session could not take a turn.
   */
  private async closeInterrupted(handle: SessionHandle): Promise<void> {
    try {
      const snap = await readWindow(this.paths.data(handle.id), handle.id, DEFAULT_WINDOW);
      const open = snap === "unchanged" ? null : openTurnOf(snap.records);
      if (open !== null) await handle.writer.append(interruptedTerminal(open), { sync: true });
    } catch (e) {
      await handle.writer.close().catch(() => undefined);
      throw e instanceof SessionError ? e : new SessionError("unavailable", storageCause(e));
    }
  }

  private handle(id: string, header: HeaderRecord, fd: number, lease: Lease, nextSeq: number, torn: boolean): SessionHandle {
    const writer = new SessionWriter(id, fd, nextSeq, torn, this.locks, this.clock, () => lease.lost, this.sync);
    let released: Promise<void> | null = null;
    return {
      id,
      header,
      writer,
      lease,
      release: () =>
        (released ??= (async () => {
          await writer.close();
          await lease.release();
        })()),
    };
  }


  /**
   * The records of at most `maxBytes` ending at byte `end` (null: the end of the file), with their offsets, for
   * paging history older than any window (see reader.ts `readLinesBefore`); null when `end` is not a line start.
   * Needs no lease and no lock: it returns complete lines only, and bytes before `end` never change.
   */
  async readRecordsBefore(id: string, end: number | null, maxBytes: number): Promise<RangeRecords | null> {
    return readLinesBefore(this.paths.data(id), id, end, maxBytes);
  }

  /**
   * Reads the recent window, respecting the append lock (`busy` on a real conflict; see the module contract).
   * Needs no lease. With `reuse`, returns "unchanged" without reading when it accepts the current version (callers
   * cache projections); a function may be called twice (lock-free attempt, then under the lock). Records of the
   * `leaveOut` kinds are validated but not returned.
   */
  async readWindow(
    id: string,
    bounds: WindowBounds = DEFAULT_WINDOW,
    reuse?: ReuseCheck,
    leaveOut?: ReadonlySet<RecordKind>,
  ): Promise<WindowSnapshot | "unchanged"> {
    const path = this.paths.data(id);
    // A removal of this process's own append lock still running: wait for it, not for the lock (locks.ts).
    const releasing = this.locks.releasingAppend(id);
    if (releasing !== undefined) await releasing;
    if (!this.locks.appendLockPresent(id)) {
      const snap = await readWindow(path, id, bounds, reuse, leaveOut);
      if (snap === "unchanged" || !snap.torn) return snap;
    }
    // Existence check before touching the lock directory (`unavailable` when missing).
    closeQuietly(openForRead(path).fd);
    await this.ensureDirs().catch(() => {
      throw new SessionError("unavailable");
    });
    const release = await this.locks.acquireAppend(id, "reader");
    try {
      return await readWindow(path, id, bounds, reuse, leaveOut);
    } finally {
      if (release) await release().catch(() => undefined);
    }
  }

  /**
   * Model-context history: the last valid checkpoint in the bounded window and every record after its cutoff.
   * The turn loop calls this after acquiring the session (it holds the lease, so nobody else appends).
   * With the lease's `writer` the file is read without the append lock: only this writer appends, so the lock can
   * only be a reader's (who writes nothing) or one left by a process that died holding it (a killed daemon, whose
   * lease this process recovered): waiting for that one until it is stale would fail the turn as busy. A torn tail
   * is read again once this writer's own writes have landed (or failed); then it is a crash's or a failed write's,
   * which the writer's next append repairs.
   */
  async readHistory(id: string, bounds: HistoryBounds, writer?: SessionWriter): Promise<History> {
    if (writer !== undefined) {
      const kept = this.kept.history(id, bounds, writer, this.paths.data(id));
      if (kept !== null) return kept;
      writer.dropWritten();
      this.kept.forget(writer);
    }
    const window = { ...bounds, quantumBytes: 1 };
    const snap = writer !== undefined ? await this.readAsWriter(id, window, writer) : await this.readWindow(id, window);
    if (snap === "unchanged") throw new SessionError("unavailable"); // unreachable: no version passed
    // The whole file in the window, no torn tail: kept for the writer's next turn (see the module contract).
    const small = snap.version.size <= MAX_KEPT_HISTORY_BYTES;
    if (writer !== undefined && small && !snap.omitted && !snap.torn && snap.resume !== null && writer.sessionId === id) {
      this.kept.keep(writer, { id, bounds, records: snap.records, firstSeq: snap.firstSeq, badLines: snap.badLines, headerEnd: snap.resume.windowFrom, lines: snap.resume.lines }, snap.version);
    }
    return historyOf(snap.records, snap.firstSeq, snap.omitted, snap.badLines, snap.torn);
  }

  /** `readHistory`'s read for the lease holder (`writer`): no append lock. */
  private async readAsWriter(id: string, bounds: WindowBounds, writer: SessionWriter): Promise<WindowSnapshot> {
    const path = this.paths.data(id);
    const releasing = this.locks.releasingAppend(id);
    if (releasing !== undefined) await releasing;
    const snap = await readWindow(path, id, bounds);
    if (snap === "unchanged" || !snap.torn) return snap as WindowSnapshot;
    // A failed writer (a full disk) fails the turn's own first append, with its cause: not this read.
    await writer.flush().catch(() => undefined);
    return (await readWindow(path, id, bounds)) as WindowSnapshot;
  }

  /**
   * The session's sidecar in `format` with the file version it was derived from, or null (missing, other format,
   * damaged). The caller decides whether that version is still current. Never throws for content.
   */
  readSidecar(id: string, format: string): Promise<{ version: FileVersion; payload: Buffer } | null> {
    return readSidecar(this.paths.sidecar(id), id, format);
  }

  /**
   * Atomically replaces the session's sidecar (tmp file + rename). Best effort: failures are swallowed. The first
   * write of this store also removes temporary files that killed writers left (sidecar.ts `sweepAbandonedTemps`).
   */
  async writeSidecar(id: string, format: string, version: FileVersion, payload: Buffer): Promise<void> {
    await writeSidecar(this.paths.indexDir, this.paths.sidecar(id), id, format, version, payload);
    if (this.swept) return;
    this.swept = true;
    await sweepAbandonedTemps(this.paths.indexDir);
  }

  /** Removes an empty session file (creation debris) when its lease can be taken; best effort. */
  private async removeEmpty(id: string): Promise<void> {
    let lease: Lease;
    try {
      lease = await this.locks.acquireLease(id);
    } catch {
      return;
    }
    try {
      if (isEmptyFile(this.paths.data(id))) unlinkQuietly(this.paths.data(id));
    } finally {
      await lease.release();
    }
  }

  /** One list page ordered by ID (see `ListPage`). `after` must be a valid ID or null. */
  async list(after: string | null, limit: number): Promise<ListPage> {
    if (after !== null && !isValidSessionId(after)) throw new SessionError("invalid_id");
    // The `limit` smallest candidate IDs, kept sorted (no sort of every candidate), and how many candidates exist.
    const examined: string[] = [];
    let candidates = 0;
    let scanned = 0;
    let unrepresentable = false;
    const copies: string[] = [];
    try {
      // Batches of entries are fetched on the thread pool; the entries of a batch are then taken synchronously
      // (`readSync` returns buffered entries without a syscall), avoiding a promise per directory entry.
      const batch = 1024;
      const dir = await opendir(this.paths.sessionsDir, { bufferSize: batch });
      try {
        for (let inBatch = 0; ; inBatch = (inBatch + 1) % batch) {
          const ent = inBatch === 0 ? await dir.read() : dir.readSync();
          if (ent === null) break;
          if (++scanned > this.maxScanEntries) throw new SessionError("limit");
          const id = SessionPaths.idFromFileName(ent.name);
          if (id === INVALID_SESSION_FILE) unrepresentable = true;
          else if (id === null) {
            const copy = SessionPaths.idFromCopyTemp(ent.name);
            if (copy !== null) copies.push(copy);
          } else if (after === null || id > after) {
            candidates++;
            if (examined.length < limit || id < (examined[examined.length - 1] as string)) insertSorted(examined, id, limit);
          }
        }
      } finally {
        await dir.close().catch(() => undefined);
      }
    } catch (e) {
      if (e instanceof SessionError) throw e;
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return { entries: [], nextAfter: null, truncated: false, incomplete: false };
      throw new SessionError("unavailable");
    }
    const heads = await Promise.all(examined.map((id) => readListHead(this.paths.data(id), id)));
    const entries: ListEntry[] = [];
    let incomplete = unrepresentable;
    const debris: string[] = [];
    heads.forEach((h, i) => {
      const id = examined[i] as string;
      if (h !== null) entries.push({ id, createdAt: h.header.created_at, cwd: h.header.cwd, updatedAtMs: h.mtimeMs, titleSource: h.titleSource });
      else if (isEmptyFile(this.paths.data(id))) debris.push(id);
      else incomplete = true;
    });
    for (const id of debris) await this.removeEmpty(id);
    for (const id of copies) await removeAbandonedCopy(this.paths, this.locks, id);
    return {
      entries,
      nextAfter: examined.length > 0 ? (examined[examined.length - 1] as string) : null,
      truncated: candidates > examined.length,
      incomplete,
    };
  }
}

/** Inserts `id` into sorted `into` (code-unit order, as `Array.prototype.sort`), keeping at most `max` entries. */
function insertSorted(into: string[], id: string, max: number): void {
  let lo = 0;
  let hi = into.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((into[mid] as string) < id) lo = mid + 1;
    else hi = mid;
  }
  into.splice(lo, 0, id);
  if (into.length > max) into.pop();
}

function isEmptyFile(path: string): boolean {
  try {
    const st = statSync(path);
    return st.isFile() && st.size === 0;
  } catch {
    return false;
  }
}
