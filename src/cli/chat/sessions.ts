/**
 * Saved sessions as `berth chat` shows them, read straight from the session store of this Berth home (read-only:
 * no lease, never a write). Newest first (by last write), with each session's cwd and title.
 * Contract: `listRecent` scans at most `MAX_SCAN` sessions; `findSession` resolves a full ID, a unique prefix, or a
 * 1-based index into the last listing; `history` returns the stored conversation for display.
 */
import { titleFrom } from "../../core/text-policy.js";
import { SessionStore, type StoredRecord } from "../../store/sessions/index.js";
import { shortArgs } from "./approval.js";
import { terminalSafe } from "../terminal-safe.js";
import type { Style } from "./render.js";

const MAX_SCAN = 5000;

export interface SessionRow {
  id: string;
  updatedAtMs: number;
  title: string | null;
  cwd: string | null;
}

export class SessionsView {
  private readonly store: SessionStore;

  constructor(home: string) {
    this.store = new SessionStore({ home });
  }

  private async all(): Promise<Array<{ id: string; updatedAtMs: number; titleSource: string | null }>> {
    const out: Array<{ id: string; updatedAtMs: number; titleSource: string | null }> = [];
    let after: string | null = null;
    for (;;) {
      const page = await this.store.list(after, 500);
      for (const e of page.entries) out.push({ id: e.id, updatedAtMs: e.updatedAtMs, titleSource: e.titleSource });
      if (!page.truncated || page.nextAfter === null || out.length >= MAX_SCAN) return out;
      after = page.nextAfter;
    }
  }

  async cwdOf(id: string): Promise<string | null> {
    try {
      const snap = await this.store.readWindow(id, { maxBytes: 4096, maxRecords: 1, quantumBytes: 4096 });
      return snap === "unchanged" ? null : snap.header.cwd;
    } catch {
      return null;
    }
  }

  /** The `limit` most recently written sessions, newest first (skipping sessions with no prompt yet). */
  async listRecent(limit: number): Promise<SessionRow[]> {
    const all = (await this.all()).filter((e) => e.titleSource !== null);
    all.sort((a, b) => b.updatedAtMs - a.updatedAtMs || (a.id < b.id ? 1 : -1));
    const top = all.slice(0, limit);
    return Promise.all(top.map(async (e) => ({ id: e.id, updatedAtMs: e.updatedAtMs, title: titleFrom(e.titleSource), cwd: await this.cwdOf(e.id) })));
  }

  /** The newest session whose cwd is `cwd`, or null. */
  async latestIn(cwd: string): Promise<string | null> {
    const all = (await this.all()).filter((e) => e.titleSource !== null).sort((a, b) => b.updatedAtMs - a.updatedAtMs);
    for (const e of all.slice(0, 200)) if ((await this.cwdOf(e.id)) === cwd) return e.id;
    return null;
  }

  /** A full ID, or a prefix naming exactly one session: the ID, or why not. */
  async resolve(ref: string): Promise<{ id: string } | { error: string }> {
    const all = await this.all();
    if (all.some((e) => e.id === ref)) return { id: ref };
    const hits = all.filter((e) => e.id.startsWith(ref));
    if (hits.length === 1) return { id: hits[0]!.id };
    if (hits.length === 0) return { error: `no saved session starts with "${ref.slice(0, 40)}" (/sessions lists them)` };
    return { error: `"${ref.slice(0, 40)}" matches ${hits.length} sessions; type more of the ID` };
  }

  /** The stored records of a session (for showing its history), or null when it cannot be read. */
  async history(id: string): Promise<{ records: StoredRecord[]; omitted: boolean } | null> {
    try {
      const snap = await this.store.readWindow(id);
      return snap === "unchanged" ? null : { records: snap.records, omitted: snap.omitted };
    } catch {
      return null;
    }
  }
}

/**
 * A stored conversation as display lines: prompts, the final text of each assistant message (a later partial
 * record of the same message replaces an earlier one), tool calls and unfinished turns as status lines.
 */
export function historyLines(records: readonly StoredRecord[], s: Style): Array<["line" | "status", string]> {
  const last = new Map<string, number>();
  records.forEach((r, i) => {
    if (r.kind === "assistant") last.set(`${r.turn_id}/${r.message_id}`, i);
  });
  const out: Array<["line" | "status", string]> = [];
  records.forEach((r, i) => {
    if (r.kind === "user") out.push(["line", `${s.bold("you:")}\n${terminalSafe(r.text)}`]);
    else if (r.kind === "assistant" && last.get(`${r.turn_id}/${r.message_id}`) === i && r.text !== "") out.push(["line", `${s.bold("assistant:")}\n${terminalSafe(r.text)}`]);
    else if (r.kind === "tool_call") out.push(["status", terminalSafe(shortArgs(r.name, r.arguments), false)]);
    else if (r.kind === "terminal" && r.status !== "completed") out.push(["status", `turn ${r.status}`]);
    else if (r.kind === "checkpoint") out.push(["line", `${s.bold("summary:")}\n${terminalSafe(r.summary)}`]);
  });
  return out;
}

/**
 * What a resumed session whose recorded directory can no longer be used (deleted, replaced by a file, unreadable)
 * must say: the server continues it in the chat's directory, where its tools now run.
 */
export function movedWorkspaceNote(recorded: string, now: string): string {
  return `the session's directory ${recorded} can no longer be used (it was removed or is not a directory); it continues in ${now}, where its tools now run`;
}
