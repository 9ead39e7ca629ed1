/**
 * The single writer of one session file (only the lease holder constructs one).
 *
 * Contracts:
 * - `append` validates strictly and synchronously assigns the next `seq`, so records land in call order.
 *   Appends are queued per session and written in batches (one write under the append lock per batch).
 *   The promise resolves once the record's batch is written (not necessarily fsynced); `{ sync: true }`
 *   fsyncs that batch before resolving. `flush()` resolves when everything queued so far is written and fsynced:
 *   call it (or use `sync`) at turn boundaries. `appendMany` appends several records as `append` would, one after
 *   another, and they are written in one batch (one append lock, one write, one fsync with `sync`) unless a batch is
 *   already in flight, in which case they join the next one together.
 * - If the file did not end with LF when the writer was opened (torn tail after a crash), the first batch
 *   starts with LF, so the torn fragment stays an isolated malformed line and never merges with a new record.
 * - After a write error or a lost lease the writer is failed: every later append/flush rejects
 *   (`SessionError("lost")` for a lost lease, `"unavailable"` otherwise). Records already written stay valid.
 * - The append lock covers a batch's `write`: readers need it to tell an in-flight append from a torn line, and an
 *   fsync changes no byte they can read. Between batches that follow closely it is kept, not removed and taken again
 *   (locks.ts `appendHoldMs`); `close` removes it. A `flush` (or a synced batch with no new text) when every written
 *   byte is already fsynced does nothing: no lock, no fsync.
 * - A batch settles once its bytes are written (and, with `sync`, fsynced): the removal of its append lock runs on
 *   the thread pool meanwhile and is not waited for (an rmdir queued behind a busy journal can take milliseconds
 *   after the fsync returned, and a turn's provider request waits for its user record). The next batch, and
 *   `close`, wait for that removal first, so this writer never finds its own lock still present.
 * - `written` (for the store's history cache, store.ts) lists the records written since it was last taken, with
 *   the file's identity right after the last write; it is dropped (null) when this writer cannot vouch for it.
 */
import { fstatSync } from "node:fs";
import { SessionError, storageCause } from "./errors.js";
import { closeQuietly, syncData, writeAll, writeAllSync } from "./fdio.js";
import type { SessionLocks } from "./locks.js";
import { MAX_RECORD_BYTES, decodeLine, encodeRecord, type NewRecord, type StoredRecord } from "./records.js";
import type { FileVersion } from "./reader.js";

interface Pending {
  line: string;
  /** The record as a reader decodes it (null for a flush marker, or a record a reader would not accept). */
  stored: StoredRecord | null;
  sync: boolean;
  resolve: () => void;
  reject: (e: unknown) => void;
}

/**
 * Batches up to this size are written synchronously: a copy into the page cache, microseconds, where a thread-pool
 * round trip costs a scheduling delay that a turn's user record would wait for before its fsync could start. Larger
 * batches (long assistant segments, big tool results) and every fsync stay on the thread pool.
 */
export const SYNC_WRITE_MAX_BYTES = 64 * 1024;

/** A log is kept only while the file is at most this large (the store keeps histories of up to 512 KiB). */
const MAX_LOGGED_FILE_BYTES = 512 * 1024;

/** Records this writer wrote, in file order, and the file's identity right after the last of them was written. */
export interface WrittenLog {
  records: StoredRecord[];
  version: FileVersion;
}

export class SessionWriter {
  private queue: Pending[] = [];
  private draining: Promise<void> | null = null;
  private failed: SessionError | null = null;
  private closed = false;
  /** Set while `appendMany` queues its records (the drain starts once all are queued). */
  private corked = false;
  /** Bytes were written since the last successful fsync. */
  private unsynced = false;
  /** See `takeWritten` (null: not tracking, or no longer trustworthy). */
  private log: WrittenLog | null = null;
  /** The removal of the last batch's append lock, while it runs (never rejects). */
  private releasing: Promise<void> | null = null;

  constructor(
    readonly sessionId: string,
    /** Owned: an O_APPEND descriptor of the session file, closed by `close()`. */
    private readonly fd: number,
    private nextSeq: number,
    private needsLeadingNewline: boolean,
    private readonly locks: SessionLocks,
    private readonly clock: () => number,
    private readonly isLeaseLost: () => boolean,
    private readonly sync: (fd: number) => Promise<void> = syncData,
  ) {}

  /**
   * Starts (or restarts) the log of written records at `version`, the identity of the file as the caller last read
   * it; records written from now on are added. Returns the previous log (null when there was none, or when a write
   * left the file in a state this writer cannot account for).
   */
  takeWritten(version: FileVersion): WrittenLog | null {
    const prev = this.log;
    this.log = { records: [], version };
    return prev;
  }

  /** Stops the log (the next `takeWritten` returns null). */
  dropWritten(): void {
    this.log = null;
  }

  /** The seq the next appended record will get. */
  get peekNextSeq(): number {
    return this.nextSeq;
  }

  /** Strict append; see the module contract. Throws synchronously-in-promise on an invalid record. */
  append(rec: NewRecord, opts: { sync?: boolean } = {}): Promise<StoredRecord> {
    const err = this.check();
    if (err) return Promise.reject(err);
    let line: string;
    const seq = this.nextSeq;
    const at = new Date(this.clock()).toISOString();
    try {
      line = encodeRecord(rec, seq, at);
    } catch {
      return Promise.reject(new SessionError("invalid_record"));
    }
    if (Buffer.byteLength(line) + 1 > MAX_RECORD_BYTES) return Promise.reject(new SessionError("invalid_record"));
    this.nextSeq = seq + 1;
    // Decoded as a reader would (the same JSON.parse the stored copy needed anyway).
    const d = decodeLine(line);
    const stored = d.type === "record" ? d.record : null;
    return new Promise<StoredRecord>((resolve, reject) => {
      this.queue.push({ line, stored, sync: opts.sync === true, resolve: () => resolve(stored ?? (JSON.parse(line) as StoredRecord)), reject });
      this.kick();
    });
  }

  /**
   * Appends `recs` in order, each as `append(rec, opts)` would (one promise per record; an invalid one rejects alone),
   * written together in one batch. See the module contract.
   */
  appendMany(recs: readonly NewRecord[], opts: { sync?: boolean } = {}): Array<Promise<StoredRecord>> {
    this.corked = true;
    let out: Array<Promise<StoredRecord>>;
    try {
      out = recs.map((rec) => this.append(rec, opts));
    } finally {
      this.corked = false;
    }
    if (this.queue.length > 0) this.kick();
    return out;
  }

  /** Resolves when every record appended before this call is written and fsynced. */
  async flush(): Promise<void> {
    const err = this.check();
    if (err) throw err;
    await new Promise<void>((resolve, reject) => {
      this.queue.push({ line: "", stored: null, sync: true, resolve, reject });
      this.kick();
    });
  }

  /** Drains the queue (fsynced) and closes the file. Idempotent. After close, appends reject. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.failed === null && this.queue.length > 0) await this.flush().catch(() => undefined);
    if (this.draining) await this.draining;
    if (this.releasing) await this.releasing;
    await this.locks.releaseHeldAppend(this.sessionId);
    this.closed = true;
    closeQuietly(this.fd);
  }

  private check(): SessionError | null {
    if (this.failed) return this.failed;
    if (this.closed) return new SessionError("unavailable");
    if (this.isLeaseLost()) return (this.failed = new SessionError("lost"));
    return null;
  }

  private kick(): void {
    if (this.draining || this.corked) return;
    this.draining = this.drain().finally(() => {
      this.draining = null;
      if (this.queue.length > 0) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0);
      try {
        if (this.failed) throw this.failed;
        if (this.isLeaseLost()) throw (this.failed = new SessionError("lost"));
        await this.writeBatch(batch);
        for (const p of batch) p.resolve();
      } catch (e) {
        const err = e instanceof SessionError ? e : new SessionError("unavailable", storageCause(e));
        // A busy append lock leaves the file untouched: the writer stays usable. Anything else fails it.
        if (err.code !== "busy") this.failed ??= err;
        for (const p of batch) p.reject(err);
      }
    }
  }

  private async writeBatch(batch: Pending[]): Promise<void> {
    let text = "";
    for (const p of batch) if (p.line !== "") text += p.line + "\n";
    const sync = batch.some((p) => p.sync);
    if (text === "") {
      if (sync && this.unsynced) {
        await this.sync(this.fd);
        this.unsynced = false;
      }
      return;
    }
    if (this.needsLeadingNewline) text = "\n" + text;
    // The previous batch's lock removal still running: wait for it rather than find our own lock present.
    if (this.releasing !== null) await this.releasing;
    const removing = this.locks.removalOf(this.sessionId);
    if (removing !== undefined) await removing;
    // Uncontended (the usual case), the lock, the write and the fsync's start all happen in the appender's own step.
    const release = this.locks.tryAppendNow(this.sessionId, "writer") ?? (await this.locks.acquireAppend(this.sessionId, "writer"));
    let synced: Promise<void> | null = null;
    let failed: { error: unknown } | null = null;
    try {
      // If this write fails part-way, the next writer instance repairs the torn tail with a leading LF.
      const bytes = Buffer.from(text, "utf8");
      this.unsynced = true;
      this.log = this.log === null || this.needsLeadingNewline ? null : logged(this.log, batch);
      if (bytes.length <= SYNC_WRITE_MAX_BYTES) writeAllSync(this.fd, bytes);
      else await writeAll(this.fd, bytes);
      this.needsLeadingNewline = false;
      // The fsync starts first (a turn's provider request waits for it), then the log's `fstat` (`after` never throws)
      // and the lock's release (kept, or removed on the thread pool beside the fsync: locks.ts).
      if (sync) synced = this.sync(this.fd);
      if (this.log !== null) this.log = after(this.log, this.fd, bytes.length);
    } catch (e) {
      this.log = null;
      failed = { error: e };
    }
    if (release !== null) {
      const released: Promise<void> = release().then(
        () => {
          if (this.releasing === released) this.releasing = null;
        },
        () => {
          if (this.releasing === released) this.releasing = null;
        },
      );
      this.releasing = released;
    }
    // The batch settles with its fsync; the lock's removal is waited for by the next batch (module contract).
    const [s] = await Promise.allSettled([synced ?? Promise.resolve()]);
    if (failed !== null) throw failed.error;
    if (s.status === "rejected") throw s.reason;
    if (synced !== null) this.unsynced = false;
  }
}

/** The log with `batch`'s records added, or null when one of them is not a record a reader would accept. */
function logged(log: WrittenLog, batch: Pending[]): WrittenLog | null {
  // Past what a kept history may hold (store.ts): nothing to keep it for.
  if (log.version.size > MAX_LOGGED_FILE_BYTES) return null;
  for (const p of batch) {
    if (p.line === "") continue;
    if (p.stored === null) return null;
    log.records.push(p.stored);
  }
  return log;
}

/**
 * The log's version after a write of `bytes` bytes: the file's identity now, when the file grew by exactly those
 * bytes (else another writer interleaved, and the log is dropped).
 */
function after(log: WrittenLog, fd: number, bytes: number): WrittenLog | null {
  try {
    const st = fstatSync(fd);
    if (st.ino !== log.version.ino || st.size !== log.version.size + bytes) return null;
    log.version = { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs };
    return log;
  } catch {
    return null;
  }
}
