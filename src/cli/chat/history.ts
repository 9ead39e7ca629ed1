/**
 * Persistent input history for the interactive chat: `$MC_HOME/chat-history.jsonl`, one JSON string per line,
 * newest first (as readline keeps it), at most 500 entries, owner-only, replaced atomically. A damaged line is
 * skipped; a failed save never interrupts the chat.
 */
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../../store/atomic-file.js";

export const HISTORY_MAX = 500;
const historyPath = (home: string): string => join(home, "chat-history.jsonl");

/** Input history (newest first, as readline keeps it): one JSON string per line, owner-only. */
export async function loadHistory(home: string): Promise<string[]> {
  try {
    const lines = (await readFile(historyPath(home), "utf8")).split("\n").filter((l) => l !== "");
    const out: string[] = [];
    for (const l of lines) {
      try {
        const v: unknown = JSON.parse(l);
        if (typeof v === "string") out.push(v);
      } catch {
        /* a damaged line is skipped; the rest of the history stays */
      }
    }
    return out.slice(0, HISTORY_MAX);
  } catch {
    return [];
  }
}

let saving: Promise<void> = Promise.resolve();
export function saveHistory(home: string, h: string[]): Promise<void> {
  const text = h.slice(0, HISTORY_MAX).map((l) => JSON.stringify(l)).join("\n") + "\n";
  saving = saving.then(async () => {
    try {
      await mkdir(home, { recursive: true, mode: 0o700 });
      await writeFileAtomic(historyPath(home), text);
    } catch {
      /* history is a convenience: a failed save never interrupts the chat */
    }
  });
  return saving;
}

