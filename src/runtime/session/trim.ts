/**
 * History trimming: what a session does when its durable history passes its bounds (the admission window,
 * `HistoryBounds`: bytes and records read back for the model context) and no checkpoint covers what falls
 * outside them. Without it such a session could never run another turn (`history_limit` for ever).
 *
 * Contracts (`trimHistory`, called at admission with the writer lease held, before the turn's user record):
 * - The oldest whole turns are taken out of the model context by appending a checkpoint record (fsynced); the
 *   session file keeps every record (replay and listing are unchanged).
 * - The cut is at the start of a turn (its first user record; steering messages stay with their turn): the oldest
 *   turn start whose records from there on fit half of each bound (`TRIM_TARGET_RATIO`), so the next trims are a
 *   half-window of growth apart. When even the newest turn alone does not fit, every earlier record is cut.
 * - The checkpoint's summary keeps the previous checkpoint's summary (a compaction's) when it was in the window,
 *   followed by a note saying how much was trimmed and the last words of each removed record it could read
 *   (≤ `NOTE_MAX_CHARS`); the model sees it as the summary of the earlier conversation.
 * - `removedMessages` counts the records taken out of the context: those read in the window, plus those before
 *   the window counted by sequence number. `historyBytes` is the size of what stays (the checkpoint plus the kept
 *   records, as stored).
 * Rejects when the checkpoint cannot be written (the caller refuses the turn).
 */
import { truncateUtf8 } from "../../core/utf8.js";
import type { History, HistoryBounds, SessionWriter, StoredRecord } from "../../store/sessions/index.js";
import { MAX_SUMMARY_BYTES } from "../context.js";

/** After a trim, the kept history is at most this fraction of each bound. */
export const TRIM_TARGET_RATIO = 0.5;
/** Bound of the trim note (characters). */
export const NOTE_MAX_CHARS = 4000;
/** Characters kept of each removed record in the note (its end). */
const TAIL_CHARS = 160;

export interface Trimmed {
  history: History;
  removedMessages: number;
  historyBytes: number;
}

const lineBytes = (r: StoredRecord): number => Buffer.byteLength(JSON.stringify(r)) + 1;

function tail(s: string): string {
  const chars = [...s];
  return chars.slice(Math.max(0, chars.length - TAIL_CHARS)).join("").replace(/\s+/g, " ").trim();
}

function describe(r: StoredRecord): string | null {
  switch (r.kind) {
    case "user":
      return `user: ${tail(r.text)}`;
    case "assistant":
      return r.partial || r.text === "" ? null : `assistant: ${tail(r.text)}`;
    case "tool_call":
      return `tool call ${r.name}`;
    case "tool_result":
      return `tool ${r.name} (${r.is_error ? "failed" : "ok"}): ${tail(r.content)}`;
    case "terminal":
    case "checkpoint":
      return null;
  }
}

/** The note put in place of the removed records. */
export function trimNote(removed: readonly StoredRecord[], count: number, bounds: HistoryBounds): string {
  let note = `[Berth trimmed ${count} earlier history records to keep this session within its history bounds (${bounds.maxBytes} bytes, ${bounds.maxRecords} records); what follows is all that remains of them.]\n`;
  for (const r of removed) {
    const line = describe(r);
    if (line === null) continue;
    if (note.length + line.length + 1 > NOTE_MAX_CHARS) break;
    note += `${line}\n`;
  }
  return note.slice(0, NOTE_MAX_CHARS).trimEnd();
}

export async function trimHistory(h: History, bounds: HistoryBounds, writer: SessionWriter): Promise<Trimmed> {
  const recs = h.records;
  const targetBytes = Math.floor(bounds.maxBytes * TRIM_TARGET_RATIO);
  const targetRecords = Math.floor(bounds.maxRecords * TRIM_TARGET_RATIO);
  const sizes = recs.map(lineBytes);
  const seenTurns = new Set<string>();
  const starts: number[] = [];
  recs.forEach((r, i) => {
    if (r.kind !== "user" || seenTurns.has(r.turn_id)) return;
    seenTurns.add(r.turn_id);
    starts.push(i);
  });
  let cut = recs.length;
  let bytes = 0;
  let next = recs.length;
  // Walk turn starts from the newest: the oldest one whose suffix still fits the target wins.
  for (let k = starts.length - 1; k >= 0; k--) {
    const i = starts[k] as number;
    for (let j = i; j < next; j++) bytes += sizes[j] as number;
    next = i;
    if (bytes > targetBytes || recs.length - i > targetRecords) break;
    cut = i;
  }
  const kept = recs.slice(cut);
  const removed = recs.slice(0, cut);
  const cutoff = cut < recs.length ? (recs[cut] as StoredRecord).seq - 1 : writer.peekNextSeq - 1;
  const before = h.checkpoint?.cutoff_seq ?? 0;
  const firstRead = recs[0]?.seq ?? cutoff + 1;
  const removedMessages = removed.length + Math.max(0, Math.min(firstRead, cutoff + 1) - before - 1);
  const note = trimNote(removed, removedMessages, bounds);
  // The earlier summary gives way to the note (≤ 4 bytes a character) within the summary bound.
  const room = MAX_SUMMARY_BYTES - Buffer.byteLength(note) - 2;
  const summary = h.checkpoint !== null && h.checkpoint.summary !== "" ? `${truncateUtf8(h.checkpoint.summary, room)}\n\n${note}` : note;
  const cp = await writer.append({ kind: "checkpoint", summary, cutoff_seq: cutoff }, { sync: true });
  if (cp.kind !== "checkpoint") throw new Error("the session writer returned another record kind");
  const historyBytes = lineBytes(cp) + kept.reduce((n, r) => n + lineBytes(r), 0);
  return { history: { ...h, checkpoint: cp, records: kept, complete: true }, removedMessages, historyBytes };
}
