/**
 * A turn whose writer died before its terminal record (a process killed mid-turn, a power loss): found by the next
 * lease holder when it opens the session (`SessionStore.acquire`), which closes it with a `failed` terminal record.
 *
 * Contracts:
 * - `openTurnOf(records)` looks at the window's last record that is not a checkpoint: a terminal (or none) means no
 *   turn is open; any other record names the open turn (turns of one session run one after another, so only the
 *   last one can be open).
 * - Its text is what replay shows of it before it settled: the latest text of each of its `message_id`s after the
 *   last valid checkpoint's cutoff, in order of first appearance, concatenated (replay.ts `projectTurn`). Settling
 *   the turn with that text as `assistant_text` therefore changes no replay item before the new terminal item, and
 *   cursors a client accepted from the open turn stay valid.
 */
import { lastValidCheckpoint } from "./kept-history.js";
import type { NewRecord, StoredRecord } from "./records.js";

export function openTurnOf(records: StoredRecord[]): { turnId: string; text: string } | null {
  let turnId: string | null = null;
  for (let i = records.length - 1; i >= 0 && turnId === null; i--) {
    const r = records[i] as StoredRecord;
    if (r.kind === "terminal") return null;
    if (r.kind !== "checkpoint") turnId = r.turn_id;
  }
  if (turnId === null) return null;
  const cp = lastValidCheckpoint(records);
  const texts = new Map<string, string>();
  for (const r of records) if (r.kind === "assistant" && r.turn_id === turnId && (cp === null || r.seq > cp.cutoff_seq)) texts.set(r.message_id, r.text);
  return { turnId, text: [...texts.values()].join("") };
}

/** The terminal record that closes `open` (see the module contract). */
export function interruptedTerminal(open: { turnId: string; text: string }): NewRecord {
  return { kind: "terminal", turn_id: open.turnId, status: "failed", assistant_text: open.text };
}
