/**
 * History windows kept between turns, one per session writer (store.ts `readHistory`; the contract is in store.ts's
 * module comment): a window read whole, or a session's empty window at its creation, plus the records its writer
 * appended since, reused only when one `stat` shows the file exactly as that writer left it.
 */
import { fstatSync, statSync } from "node:fs";
import type { HeaderRecord, StoredRecord } from "./records.js";
import { sameVersion, type FileVersion } from "./reader.js";
import type { SessionWriter } from "./writer.js";

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

/**
 * Session files up to this size have their history kept between turns (memory: up to 16 attached sessions, each
 * kept as parsed records); a larger one is read at every admission, as before.
 */
export const MAX_KEPT_HISTORY_BYTES = 512 * 1024;

/** A history window kept for one writer: all its records (checkpoints included) and its extent. */
export interface HistoryMemo {
  id: string;
  /** The bounds it was read under; null for a created session's empty window (any bounds, see `keepCreated`). */
  bounds: HistoryBounds | null;
  records: StoredRecord[];
  firstSeq: number | null;
  badLines: number;
  /** Where the window starts: just after the header line. */
  headerEnd: number;
  /** Complete lines in the window (bad and unknown ones included). */
  lines: number;
}

export class KeptHistories {
  private readonly memos = new WeakMap<SessionWriter, HistoryMemo>();

  /** Keeps `memo` (a window read whole at `version`) for `writer`. */
  keep(writer: SessionWriter, memo: HistoryMemo, version: FileVersion): void {
    this.memos.set(writer, memo);
    writer.takeWritten(version);
  }

  /** Drops what is kept for `writer`. */
  forget(writer: SessionWriter): void {
    this.memos.delete(writer);
  }

  /**
   * A session this store has just created holds its header only: its (empty) window is kept for its writer as
   * `readHistory` keeps one it read, so the first turn of a session created by this process reads nothing (issue 19:
   * two thread-pool reads before the provider request). Same check at that turn: one `stat` must show the file
   * exactly as the writer left it. Not kept when the file already holds more than the header we wrote.
   */
  keepCreated(writer: SessionWriter, id: string, header: HeaderRecord, fd: number): void {
    let version: FileVersion;
    try {
      const st = fstatSync(fd);
      version = { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs };
    } catch {
      return;
    }
    const headerEnd = Buffer.byteLength(JSON.stringify(header)) + 1;
    if (version.size !== headerEnd) return;
    this.memos.set(writer, { id, bounds: null, records: [], firstSeq: null, badLines: 0, headerEnd, lines: 0 });
    writer.takeWritten(version);
  }

  /**
   * The kept window of `writer` plus what it wrote since, when the file at `dataPath` is exactly as the writer left it;
   * else null (the caller reads the file and may `keep` the result).
   */
  history(id: string, bounds: HistoryBounds, writer: SessionWriter, dataPath: string): History | null {
    const memo = this.memos.get(writer);
    if (memo === undefined || memo.id !== id) return null;
    // A created session's window (the whole file, empty) holds under any bounds: the first read's are adopted.
    memo.bounds ??= bounds;
    if (memo.bounds.maxBytes !== bounds.maxBytes || memo.bounds.maxRecords !== bounds.maxRecords) return null;
    let now: FileVersion;
    try {
      const st = statSync(dataPath);
      now = { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs };
    } catch {
      return null;
    }
    const log = writer.takeWritten(now);
    if (log === null || !sameVersion(log.version, now)) return null;
    if (now.size > MAX_KEPT_HISTORY_BYTES || now.size - memo.headerEnd > bounds.maxBytes || memo.lines + log.records.length > bounds.maxRecords) return null;
    let last = memo.records.length > 0 ? (memo.records[memo.records.length - 1] as StoredRecord).seq : 0;
    for (const r of log.records) {
      if (r.seq <= last) return null; // a full read would count it a bad line
      last = r.seq;
    }
    if (log.records.length > 0) {
      memo.records = memo.records.concat(log.records);
      memo.firstSeq ??= (log.records[0] as StoredRecord).seq;
      memo.lines += log.records.length;
    }
    return historyOf(memo.records, memo.firstSeq, false, memo.badLines, false);
  }
}

/** Model-context history of a window's records (see `readHistory`). */
export function historyOf(all: StoredRecord[], firstSeq: number | null, omitted: boolean, badLines: number, torn: boolean): History {
  const cp = lastValidCheckpoint(all);
  const records = all.filter((r) => r.kind !== "checkpoint" && (cp === null || r.seq > cp.cutoff_seq));
  const first = firstSeq ?? Infinity;
  const complete = cp === null ? !omitted : !(omitted && cp.cutoff_seq + 1 < first);
  return { checkpoint: cp, records, complete, badLines, torn };
}

/**
 * The last valid checkpoint: its cutoff precedes it, and it is not a mid-turn checkpoint whose carried records are
 * missing (`carriedMissing`).
 */
export function lastValidCheckpoint(records: StoredRecord[]): (StoredRecord & { kind: "checkpoint" }) | null {
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i] as StoredRecord;
    if (r.kind === "checkpoint" && r.cutoff_seq < r.seq && !carriedMissing(records, i)) return r;
  }
  return null;
}

/**
 * True when `records[i]` is a mid-turn checkpoint (its cutoff is the record right before it, a record of a turn with
 * no terminal yet: runtime/recorder.ts `checkpointMidTurn`; one between turns follows a terminal record) not followed
 * by what that compaction carries over: the turn's user record again, then — when the turn had assistant text before
 * the cutoff — its accepted text again.
 * They are written in one batch with the checkpoint, so only a write cut short (a power loss before its fsync, a
 * partial write) leaves the checkpoint without them. Such a checkpoint is ignored: the turn's
 * records before it are all there, so the history and replay stay the pre-compaction ones (docs/sessions.md,
 * "Crash and resume") rather than a summary followed by a turn without its prompt or its acknowledged text.
 */
function carriedMissing(records: StoredRecord[], i: number): boolean {
  const cp = records[i] as StoredRecord & { kind: "checkpoint" };
  if (cp.cutoff_seq !== cp.seq - 1) return false;
  // The record before it: the cutoff record, or (when the caller left tool records out) the turn's last one shown.
  let cut: StoredRecord | undefined;
  for (let j = i - 1; j >= 0 && cut === undefined; j--) if ((records[j] as StoredRecord).kind !== "checkpoint") cut = records[j];
  if (cut === undefined || cut.kind === "terminal" || cut.kind === "checkpoint") return false;
  const turn = cut.turn_id;
  const user = records[i + 1];
  if (user?.kind !== "user" || user.turn_id !== turn || user.seq !== cp.seq + 1) return true;
  let hadText = false;
  // Back to the turn's start (turns run one after another: its records are contiguous, checkpoints aside).
  for (let j = i - 1; j >= 0 && !hadText; j--) {
    const r = records[j] as StoredRecord;
    if (r.kind === "checkpoint") continue;
    if (r.turn_id !== turn) break;
    if (r.kind === "assistant" && r.text !== "") hadText = true;
  }
  if (!hadText) return false;
  const text = records[i + 2];
  return text?.kind !== "assistant" || text.turn_id !== turn || text.seq !== user.seq + 1;
}
