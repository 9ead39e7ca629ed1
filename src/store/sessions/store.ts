/**
 * The durable session store: files under `<home>/sessions/`, leases under `<home>/session-locks/`.
 * Protocol-neutral: returns records and store errors; adapters project them to their wire formats.
 *
 * Contracts:
 * - Every method taking an ID validates it first (`SessionError("invalid_id")`) and builds paths only from valid IDs.
 * - `create` durably records the header (file + directory fsync) before returning a held `SessionHandle`.
 * - `acquire` takes the exclusive writer lease of an existing session and opens its writer.
 * - `readWindow` takes the append/rotation lock for the duration of the read (see locks.ts) and never writes.
 * - `list` examines at most `maxScanEntries` directory entries; exceeding it throws `SessionError("limit")`
 *   and returns nothing partial.
 */
import { mkdir, open, opendir, unlink, type FileHandle } from "node:fs/promises";
import { constants as FS } from "node:fs";
import { SessionError } from "./errors.js";
import { defaultSessionId, isValidSessionId, type SessionIdGenerator } from "./ids.js";
import { DEFAULT_LOCK_TUNING, SessionLocks, type Lease, type LockTuning } from "./locks.js";
import { SessionPaths } from "./paths.js";
import { FORMAT_VERSION, HeaderSchema, type HeaderRecord, type StoredRecord } from "./records.js";
import {
  openForRead,
  readHeader,
  readListHead,
  readTailState,
  readWindow,
  type FileVersion,
  type WindowBounds,
  type WindowSnapshot,
} from "./reader.js";
import { SessionWriter } from "./writer.js";

export interface SessionStoreOptions {
  /** The resolved Berth home (MC_HOME / BERTH_HOME / ~/.berth); the store never reads the environment. */
  home: string;
  clock?: () => number;
  newId?: SessionIdGenerator;
  locks?: Partial<LockTuning>;
  /** List scan budget (app-service: 20,000). */
  maxScanEntries?: number;
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

export interface HistoryBounds {
  maxBytes: number;
  maxRecords: number;
}

export interface History {
  /** The last valid compaction checkpoint, if any; `records` are those after its cutoff. */
  checkpoint: (StoredRecord & { kind: "checkpoint" }) | null;
  /** Full records (every kind) after the checkpoint cutoff (or all in the window), file order, checkpoints excluded. */
  records: StoredRecord[];
  /** False when older records needed for the context lie outside the bounds (no checkpoint covers them). */
  complete: boolean;
  badLines: number;
  torn: boolean;
}

export const DEFAULT_WINDOW: WindowBounds = { maxBytes: 2 * 1024 * 1024, maxRecords: 100_000, quantumBytes: 64 * 1024 };

export class SessionStore {
  readonly paths: SessionPaths;
  private readonly locks: SessionLocks;
  private readonly clock: () => number;
  private readonly newId: SessionIdGenerator;
  private readonly maxScanEntries: number;
  private dirsReady: Promise<void> | null = null;

  constructor(opts: SessionStoreOptions) {
    this.paths = new SessionPaths(opts.home);
    this.locks = new SessionLocks(this.paths, { ...DEFAULT_LOCK_TUNING, ...opts.locks });
    this.clock = opts.clock ?? Date.now;
    this.newId = opts.newId ?? defaultSessionId;
    this.maxScanEntries = opts.maxScanEntries ?? 20_000;
  }

  private ensureDirs(): Promise<void> {
    this.dirsReady ??= (async () => {
      await mkdir(this.paths.sessionsDir, { recursive: true, mode: 0o700 });
      await mkdir(this.paths.locksDir, { recursive: true, mode: 0o700 });
    })().catch((e: unknown) => {
      this.dirsReady = null;
      throw e;
    });
    return this.dirsReady;
  }

  /** Creates a new session (header fsynced, directory entry fsynced) and returns it held. */
  async create(cwd: string): Promise<SessionHandle> {
    try {
      await this.ensureDirs();
    } catch {
      throw new SessionError("unavailable");
    }
    for (let attempt = 0; attempt < 8; attempt++) {
      const id = this.newId(this.clock());
      if (!isValidSessionId(id)) throw new SessionError("invalid_id");
      const header: HeaderRecord = HeaderSchema.parse({
        kind: "header",
        format: FORMAT_VERSION,
        session_id: id,
        created_at: new Date(this.clock()).toISOString(),
        cwd,
      });
      // The lease and the exclusive file creation (header + fsyncs) run concurrently; a fresh random ID makes a
      // conflict on either practically impossible, and each side undoes the other when one fails.
      const [leaseR, fileR] = await Promise.allSettled([this.locks.acquireLease(id), this.createFile(id, header)]);
      if (leaseR.status === "fulfilled" && fileR.status === "fulfilled") return this.handle(id, header, fileR.value, leaseR.value, 1, false);
      if (fileR.status === "fulfilled") {
        await fileR.value.close().catch(() => undefined);
        await unlink(this.paths.data(id)).catch(() => undefined);
      }
      if (leaseR.status === "fulfilled") await leaseR.value.release();
      const retry =
        (fileR.status === "rejected" && (fileR.reason as NodeJS.ErrnoException).code === "EEXIST") ||
        (leaseR.status === "rejected" && leaseR.reason instanceof SessionError && leaseR.reason.code === "busy");
      if (!retry) throw new SessionError("unavailable");
    }
    throw new SessionError("busy");
  }

  /** Creates `<id>.jsonl` exclusively with its header, fsyncs it and the directory. Rejects with EEXIST on collision. */
  private async createFile(id: string, header: HeaderRecord): Promise<FileHandle> {
    const fh = await open(this.paths.data(id), FS.O_WRONLY | FS.O_APPEND | FS.O_CREAT | FS.O_EXCL, 0o600);
    try {
      await fh.write(JSON.stringify(header) + "\n");
      await fh.datasync();
      await this.fsyncDir(this.paths.sessionsDir);
      return fh;
    } catch (e) {
      await fh.close().catch(() => undefined);
      await unlink(this.paths.data(id)).catch(() => undefined);
      throw e;
    }
  }

  /** Takes the writer lease of an existing session (`busy` if held elsewhere, `unavailable` if missing/damaged). */
  async acquire(id: string): Promise<SessionHandle> {
    const path = this.paths.data(id);
    // Existence check before touching the lock directory (`unavailable` when missing).
    await (await openForRead(path)).close().catch(() => undefined);
    await this.ensureDirs().catch(() => {
      throw new SessionError("unavailable");
    });
    const lease = await this.locks.acquireLease(id);
    let fh: FileHandle | null = null;
    try {
      fh = await open(path, FS.O_RDWR | FS.O_APPEND);
      const st = await fh.stat();
      const h = await readHeader(fh, st.size);
      if (h === null || h.header.session_id !== id) throw new SessionError("unavailable");
      const tail = await readTailState(fh, st.size, h.end);
      return this.handle(id, h.header, fh, lease, tail.nextSeq, tail.torn);
    } catch (e) {
      await fh?.close().catch(() => undefined);
      await lease.release();
      throw e instanceof SessionError ? e : new SessionError("unavailable");
    }
  }

  private handle(id: string, header: HeaderRecord, fh: FileHandle, lease: Lease, nextSeq: number, torn: boolean): SessionHandle {
    const writer = new SessionWriter(id, fh, nextSeq, torn, this.locks, this.clock, () => lease.lost);
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

  private async fsyncDir(dir: string): Promise<void> {
    const d = await open(dir, "r");
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  }

  /**
   * Reads the recent window under the append lock (`busy` on a real conflict). Needs no lease.
   * With `unchanged`, returns "unchanged" when the file still has that version (callers cache projections).
   */
  async readWindow(id: string, bounds: WindowBounds = DEFAULT_WINDOW, unchanged?: FileVersion): Promise<WindowSnapshot | "unchanged"> {
    const path = this.paths.data(id);
    await (await openForRead(path)).close().catch(() => undefined);
    await this.ensureDirs().catch(() => {
      throw new SessionError("unavailable");
    });
    const release = await this.locks.acquireAppend(id, "reader");
    try {
      return await readWindow(path, id, bounds, unchanged);
    } finally {
      if (release) await release().catch(() => undefined);
    }
  }

  /**
   * Model-context history: the last valid checkpoint in the bounded window and every record after its cutoff.
   * The turn loop calls this after acquiring the session (it holds the lease, so nobody else appends).
   */
  async readHistory(id: string, bounds: HistoryBounds): Promise<History> {
    const snap = await this.readWindow(id, { ...bounds, quantumBytes: 1 });
    if (snap === "unchanged") throw new SessionError("unavailable"); // unreachable: no version passed
    const cp = lastValidCheckpoint(snap.records);
    const records = snap.records.filter((r) => r.kind !== "checkpoint" && (cp === null || r.seq > cp.cutoff_seq));
    const firstSeq = snap.records[0]?.seq ?? Infinity;
    const complete = cp === null ? !snap.omitted : !(snap.omitted && cp.cutoff_seq + 1 < firstSeq);
    return { checkpoint: cp, records, complete, badLines: snap.badLines, torn: snap.torn };
  }

  /** One list page ordered by ID (see `ListPage`). `after` must be a valid ID or null. */
  async list(after: string | null, limit: number): Promise<ListPage> {
    if (after !== null && !isValidSessionId(after)) throw new SessionError("invalid_id");
    const ids: string[] = [];
    let scanned = 0;
    let unrepresentable = false;
    try {
      const dir = await opendir(this.paths.sessionsDir, { bufferSize: 1024 });
      for await (const ent of dir) {
        if (++scanned > this.maxScanEntries) throw new SessionError("limit"); // closes the iterator (and dir)
        const id = SessionPaths.idFromFileName(ent.name);
        if (id === "invalid") unrepresentable = true;
        else if (id !== null && (after === null || id > after)) ids.push(id);
      }
    } catch (e) {
      if (e instanceof SessionError) throw e;
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return { entries: [], nextAfter: null, truncated: false, incomplete: false };
      throw new SessionError("unavailable");
    }
    ids.sort();
    const examined = ids.slice(0, limit);
    const heads = await Promise.all(examined.map((id) => readListHead(this.paths.data(id), id)));
    const entries: ListEntry[] = [];
    let incomplete = unrepresentable;
    heads.forEach((h, i) => {
      if (h === null) incomplete = true;
      else entries.push({ id: examined[i] as string, createdAt: h.header.created_at, updatedAtMs: h.mtimeMs, titleSource: h.titleSource });
    });
    return {
      entries,
      nextAfter: examined.length > 0 ? (examined[examined.length - 1] as string) : null,
      truncated: ids.length > examined.length,
      incomplete,
    };
  }
}

/** The last checkpoint whose cutoff precedes it. */
export function lastValidCheckpoint(records: StoredRecord[]): (StoredRecord & { kind: "checkpoint" }) | null {
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i] as StoredRecord;
    if (r.kind === "checkpoint" && r.cutoff_seq < r.seq) return r;
  }
  return null;
}
