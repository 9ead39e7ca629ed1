/**
 * A stored session read as turns (for paged history), and forking a session at a turn.
 * Contracts:
 * - `readTurns` groups the records of the session's bounded window (`TRANSCRIPT_WINDOW` unless given) by `turn_id`,
 *   oldest first: the first user record is the prompt, the terminal's `assistant_text` the response. A turn without
 *   a terminal (still running, or cut by a crash) reports the text recorded so far: each message's latest text,
 *   concatenated in order, as replay shows it and as the terminal that closes it carries, so the text does not change
 *   when it ends. Steering messages (later user records of a turn) are not separate turns. Turns before the window
 *   are not returned.
 * - `pageTurns` pages them newest-first with an opaque cursor `before:<turn id>`: a page is the `limit` turns
 *   right before the cursor's turn (oldest first), and `next` names the oldest of them when older turns remain.
 *   A cursor whose turn is no longer in the window is refused (`null`).
 * - `pageHistory` pages the whole file, older than any window: cursors `before:<turn id>@<byte offset>` name where
 *   the cursor turn's prompt record starts, and a page reads at most `TRANSCRIPT_WINDOW.maxBytes` before it, so
 *   every page costs one bounded read however long the session is. `next` is given while older records exist
 *   (in the range or before it). A cursor without an offset (`before:<turn id>`) still names a turn of the newest
 *   window; a cursor whose offset is not a line start of the file is refused (`null`).
 * - `sideChatSession` creates the session of a side chat at `turnId`: a fork at the newest completed turn at or
 *   before it (the side chat sees the conversation the user is asking about; a running turn's unfinished output is
 *   not part of it), or an empty session when no turn before it completed.
 * - `forkSession` creates a new session (same working directory) whose records are a copy of the source's up to
 *   and including the terminal record of `turnId` (checkpoints keep covering the same copied records; the copy's
 *   seqs run from 1 without gaps). The copy is all or nothing (store `createWith`): no process ever sees the new
 *   session holding part of it, and a process killed while forking leaves no session (its temporary file is removed
 *   by the next list); it is durable (fsynced) before it resolves. The source is only read. A source whose window
 *   (`TRANSCRIPT_WINDOW`) starts mid-file is forked only when a checkpoint at or before the fork turn's terminal
 *   keeps the copy's model context whole; otherwise, and for a turn that did not complete, it refuses with the
 *   reason and creates nothing.
 */
import { FIRST_SEQ, type SessionManager, type StoredRecord, type NewRecord } from "../../store/sessions/index.js";

/** How much of a session is read for history and forks: the newest 64 MiB / 1,000,000 records. */
export const TRANSCRIPT_WINDOW = { maxBytes: 64 * 1024 * 1024, maxRecords: 1_000_000, quantumBytes: 1 };

export interface TranscriptTurn {
  id: string;
  startedAt: string;
  userText: string;
  responseText: string;
  cancelled: boolean;
  /** A terminal record ended it. */
  ended: boolean;
  /** A terminal record ended it `completed` (not cancelled, failed, interrupted by a crash, …). */
  completed: boolean;
  /** Where its prompt record starts in the file (set by `pageHistory`). */
  offset?: number;
}

/** The newest 1 MiB: enough for a first page of recent turns, cheap to read for every session at startup. */
export const RECENT_WINDOW = { maxBytes: 1024 * 1024, maxRecords: 100_000, quantumBytes: 1 };

export async function readTurns(manager: SessionManager, sessionId: string, window = TRANSCRIPT_WINDOW): Promise<TranscriptTurn[]> {
  const w = await manager.store.readWindow(sessionId, window);
  if (w === "unchanged") return [];
  return groupTurns(w.records);
}

/** Records grouped by turn (see the module contract); `offsets[i]` is where `records[i]` starts, when known. */
function groupTurns(records: StoredRecord[], offsets?: number[]): TranscriptTurn[] {
  type Building = TranscriptTurn & { partial: Map<string, string> };
  const turns: Building[] = [];
  const byId = new Map<string, Building>();
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    if (r.kind === "checkpoint") continue;
    let t = byId.get(r.turn_id);
    if (t === undefined) {
      if (r.kind !== "user") continue; // a turn whose prompt is before the window
      t = { id: r.turn_id, startedAt: r.at, userText: r.text, responseText: "", cancelled: false, ended: false, completed: false, partial: new Map() };
      if (offsets !== undefined) t.offset = offsets[i]!;
      byId.set(r.turn_id, t);
      turns.push(t);
      continue;
    }
    if (r.kind === "assistant" && !t.ended) {
      t.partial.set(r.message_id, r.text);
      t.responseText = [...t.partial.values()].join("");
    } else if (r.kind === "terminal") {
      t.ended = true;
      t.responseText = r.assistant_text;
      t.cancelled = r.status === "cancelled";
      t.completed = r.status === "completed";
    }
  }
  return turns.map(({ partial: _p, ...t }) => t);
}

export const CURSOR_PREFIX = "before:";

/** One page of turns before `cursor` (null: the newest page); null when the cursor names no turn in the window. */
export function pageTurns(turns: TranscriptTurn[], cursor: string | null, limit: number): { turns: TranscriptTurn[]; next: string | null } | null {
  let end = turns.length;
  if (cursor !== null) {
    if (!cursor.startsWith(CURSOR_PREFIX)) return null;
    const id = cursor.slice(CURSOR_PREFIX.length);
    end = turns.findIndex((t) => t.id === id);
    if (end === -1) return null;
  }
  const start = Math.max(0, end - limit);
  const page = turns.slice(start, end);
  return { turns: page, next: start > 0 && page.length > 0 ? `${CURSOR_PREFIX}${page[0]!.id}` : null };
}

const deepCursor = (t: TranscriptTurn): string => `${CURSOR_PREFIX}${t.id}@${t.offset ?? 0}`;

/**
 * One page of a session's history (see the module contract): the `limit` turns before `cursor` (null: the newest),
 * oldest first, and the cursor of the next older page; null when the cursor is not one of this session's.
 */
export async function pageHistory(
  manager: SessionManager,
  sessionId: string,
  cursor: string | null,
  limit: number,
  maxBytes = TRANSCRIPT_WINDOW.maxBytes,
): Promise<{ turns: TranscriptTurn[]; next: string | null } | null> {
  let end: number | null = null;
  let before: string | null = null;
  if (cursor !== null) {
    if (!cursor.startsWith(CURSOR_PREFIX)) return null;
    const m = /^(.*)@(0|[1-9][0-9]{0,15})$/s.exec(cursor.slice(CURSOR_PREFIX.length));
    if (m) end = Number(m[2]);
    else before = cursor.slice(CURSOR_PREFIX.length);
  }
  const range = await manager.store.readRecordsBefore(sessionId, end, maxBytes);
  if (range === null) return null;
  let turns = groupTurns(range.records, range.offsets);
  if (before !== null) {
    const i = turns.findIndex((t) => t.id === before);
    if (i === -1) return null;
    turns = turns.slice(0, i);
  }
  const start = Math.max(0, turns.length - limit);
  const page = turns.slice(start, turns.length);
  const older = start > 0 || range.from > range.headerEnd;
  return { turns: page, next: older && page.length > 0 ? deepCursor(page[0]!) : null };
}

function strip(r: StoredRecord): NewRecord {
  const { seq: _s, at: _a, ...rest } = r;
  return rest;
}

/**
 * Forks `sourceId` after turn `turnId`; resolves with the new session's ID, or an error naming why not. `window`:
 * how much of the source is read (tests pass a small one).
 */
export async function forkSession(
  manager: SessionManager,
  sourceId: string,
  turnId: string,
  cwd: string,
  window = TRANSCRIPT_WINDOW,
): Promise<{ ok: true; sessionId: string } | { ok: false; error: string }> {
  const w = await manager.store.readWindow(sourceId, window);
  if (w === "unchanged") return { ok: false, error: "the source chat cannot be read" };
  const end = w.records.findIndex((r) => r.kind === "terminal" && r.turn_id === turnId);
  if (end === -1) return { ok: false, error: "the fork turn is not a completed turn of the source chat" };
  const first = w.records.find((r) => r.kind !== "checkpoint");
  if (w.omitted && first !== undefined) {
    // The window starts mid-file: only a copy that starts at a checkpoint keeps the model context whole.
    const cp = w.records.findIndex((r) => r.kind === "checkpoint");
    if (cp === -1 || cp > end) return { ok: false, error: "the source chat is too long to fork" };
  }
  // The copy's records get seqs FIRST_SEQ, FIRST_SEQ + 1, … (store `createWith`); the source's seqs increase.
  const copy: NewRecord[] = [];
  const sourceSeqs: number[] = [];
  for (const r of w.records.slice(0, end + 1)) {
    let rec = strip(r);
    if (rec.kind === "checkpoint") {
      // Covers the copied records up to the same source seq: the copy seq of the last of them (0: none).
      let covered = 0;
      while (covered < sourceSeqs.length && sourceSeqs[covered]! <= rec.cutoff_seq) covered++;
      rec = { ...rec, cutoff_seq: covered === 0 ? 0 : FIRST_SEQ + covered - 1 };
    }
    copy.push(rec);
    sourceSeqs.push(r.seq);
  }
  return { ok: true, sessionId: await manager.store.createWith(cwd, copy) };
}

/** The session of a side chat of `sourceId` at `turnId` (see the module contract). */
export async function sideChatSession(manager: SessionManager, sourceId: string, turnId: string, cwd: string): Promise<{ ok: true; sessionId: string } | { ok: false; error: string }> {
  const turns = await readTurns(manager, sourceId);
  const i = turns.findIndex((t) => t.id === turnId);
  if (i === -1) return { ok: false, error: "the side-chat turn is not a turn of the source chat" };
  for (let j = i; j >= 0; j--) if (turns[j]!.ended) return forkSession(manager, sourceId, turns[j]!.id, cwd);
  const handle = await manager.store.create(cwd);
  await handle.release();
  return { ok: true, sessionId: handle.id };
}
