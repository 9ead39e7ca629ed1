/**
 * The single writer of one session file (only the lease holder constructs one).
 *
 * Contracts:
 * - `append` validates strictly and synchronously assigns the next `seq`, so records land in call order.
 *   Appends are queued per session and written in batches (one write under the append lock per batch).
 *   The promise resolves once the record's batch is written (not necessarily fsynced); `{ sync: true }`
 *   fsyncs that batch before resolving. `flush()` resolves when everything queued so far is written and fsynced:
 *   call it (or use `sync`) at turn boundaries.
 * - If the file did not end with LF when the writer was opened (torn tail after a crash), the first batch
 *   starts with LF, so the torn fragment stays an isolated malformed line and never merges with a new record.
 * - After a write error or a lost lease the writer is failed: every later append/flush rejects
 *   (`SessionError("lost")` for a lost lease, `"unavailable"` otherwise). Records already written stay valid.
 */
import { SessionError } from "./errors.js";
import { closeQuietly, syncData, writeAll } from "./fdio.js";
import type { SessionLocks } from "./locks.js";
import { MAX_RECORD_BYTES, encodeRecord, type NewRecord, type StoredRecord } from "./records.js";

interface Pending {
  line: string;
  sync: boolean;
  resolve: () => void;
  reject: (e: unknown) => void;
}

export class SessionWriter {
  private queue: Pending[] = [];
  private draining: Promise<void> | null = null;
  private failed: SessionError | null = null;
  private closed = false;

  constructor(
    readonly sessionId: string,
    /** Owned: an O_APPEND descriptor of the session file, closed by `close()`. */
    private readonly fd: number,
    private nextSeq: number,
    private needsLeadingNewline: boolean,
    private readonly locks: SessionLocks,
    private readonly clock: () => number,
    private readonly isLeaseLost: () => boolean,
  ) {}

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
    const stored = JSON.parse(line) as StoredRecord;
    return new Promise<StoredRecord>((resolve, reject) => {
      this.queue.push({ line, sync: opts.sync === true, resolve: () => resolve(stored), reject });
      this.kick();
    });
  }

  /** Resolves when every record appended before this call is written and fsynced. */
  async flush(): Promise<void> {
    const err = this.check();
    if (err) throw err;
    await new Promise<void>((resolve, reject) => {
      this.queue.push({ line: "", sync: true, resolve, reject });
      this.kick();
    });
  }

  /** Drains the queue (fsynced) and closes the file. Idempotent. After close, appends reject. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.failed === null && this.queue.length > 0) await this.flush().catch(() => undefined);
    if (this.draining) await this.draining;
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
    if (this.draining) return;
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
        const err = e instanceof SessionError ? e : new SessionError("unavailable");
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
    if (text === "" && !sync) return;
    if (text !== "" && this.needsLeadingNewline) text = "\n" + text;
    const release = await this.locks.acquireAppend(this.sessionId, "writer");
    try {
      if (text !== "") {
        // If this write fails part-way, the next writer instance repairs the torn tail with a leading LF.
        await writeAll(this.fd, Buffer.from(text, "utf8"));
        this.needsLeadingNewline = false;
      }
      if (sync) await syncData(this.fd);
    } finally {
      if (release) await release().catch(() => undefined);
    }
  }
}
