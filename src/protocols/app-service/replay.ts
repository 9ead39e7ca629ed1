/**
 * The replay projection: store window → allowlisted items → bounded pages with restart-proof cursors.
 * Pure (no I/O); sessions.ts feeds it store snapshots.
 *
 * Projection (allowlist): compaction `summary` parts first when the window holds a valid checkpoint, then per turn
 * (in order of first appearance, after the checkpoint cutoff): user `message` parts, one assistant `message`
 * (the terminal's accepted `assistant_text` once settled, else the latest text of each assistant message so far,
 * concatenated), and the `terminal` status. Tool calls/results, thinking, headers and unknown kinds never appear.
 *
 * Cursors (replay-cursor.ts): `c1.<session tag>.<prefix length base36>.<64-bit prefix hash>`, valid exactly when
 * the current projection has the same prefix: they survive restarts and appends, and are stale after compaction,
 * regrouping of in-progress text, corruption or a moved window. Foreign, malformed or stale cursors →
 * `resync_required` with the start position in `next_cursor`.
 *
 * Extension (`extendProjection`): a projection keeps where its window read stopped and the raw state of its last
 * turn, so after appends only the new lines are read and only the last turn and new turns are projected again —
 * with a result identical to projecting the whole window (else it declines and the caller projects fully).
 *
 * Modules: this one builds projections and pages and is the family's entry point (it re-exports the rest);
 * replay-model.ts holds the item/projection types, replay-cursor.ts the prefix hashes and cursors,
 * replay-codec.ts the sidecar encoding, replay-text.ts the text policy. See docs/sessions.md.
 */
import { lastValidCheckpoint, type RecordKind, type StoredRecord, type TerminalStatus, type WindowSnapshot } from "../../store/sessions/index.js";
import { chain, chainInto, cursorAt, resolveCursor } from "./replay-cursor.js";
import { ListProjection, compose, type Projection, type ProjectionState, type ReplayItem, type TailTurn } from "./replay-model.js";
import { projectText } from "./replay-text.js";

export { cursorAt, resolveCursor } from "./replay-cursor.js";
export { decodeProjection, encodeProjection } from "./replay-codec.js";
export type { Projection, ProjectionState, ReplayItem } from "./replay-model.js";

export const MAX_REPLAY_PAGE_BYTES = 16384;

/** Record kinds the projection never reads: the store validates them but need not return them. */
export const UNPROJECTED_KINDS: ReadonlySet<RecordKind> = new Set<RecordKind>(["tool_call", "tool_result"]);

export interface ReplayPayload {
  events: Array<Record<string, unknown>>;
  next_cursor: string;
  snapshot_cursor: string;
  truncated: boolean;
  gap: boolean;
  resync_required: boolean;
}

interface TurnAcc {
  users: string[];
  assistant: Map<string, string>;
  terminal: { status: TerminalStatus; text: string } | null;
}

export function projectSnapshot(sessionId: string, snap: WindowSnapshot): Projection {
  if (snap.since !== null) throw new Error("projectSnapshot needs a complete window");
  const recs = snap.records;
  const cp = lastValidCheckpoint(recs);
  let gap = snap.badLines > 0 || snap.torn;
  const firstSeq = snap.firstSeq ?? Infinity;
  if (snap.omitted && (cp === null || firstSeq > cp.cutoff_seq + 1)) gap = true;
  const items: ReplayItem[] = [];
  if (cp !== null) pushParts(items, cp.summary, (text, part, last_part) => ({ kind: "summary", text, part, last_part }));
  const turns = new Map<string, TurnAcc>();
  for (const r of recs) {
    if (r.kind === "checkpoint") {
      if (r.cutoff_seq >= r.seq) gap = true; // checkpoint diagnostics: an invalid checkpoint is ignored
      continue;
    }
    if (cp !== null && r.seq <= cp.cutoff_seq) continue;
    if (r.kind !== "user" && r.kind !== "assistant" && r.kind !== "terminal") continue;
    let t = turns.get(r.turn_id);
    if (!t) turns.set(r.turn_id, (t = { users: [], assistant: new Map(), terminal: null }));
    accumulate(t, r);
  }
  let tail: TailTurn | null = null;
  for (const [id, t] of turns) {
    tail = { id, firstItem: items.length, users: t.users, assistant: [...t.assistant], terminal: t.terminal };
    projectTurn(items, t);
  }
  const state = snap.resume === null ? null : { point: snap.resume, closed: [...turns.keys()].slice(0, -1), tail };
  return new ListProjection(sessionId, items, chain(sessionId, items), gap, state);
}

/**
 * `base` extended by `delta` — a window snapshot that continues `base.state.point` — or null when only a full
 * projection gives the right result: a new checkpoint, a record for a settled or earlier turn, or a torn tail.
 * Otherwise the result equals `projectSnapshot` of the whole window (the property tests check this).
 */
export function extendProjection(base: Projection, delta: WindowSnapshot): Projection | null {
  const st = base.state;
  const since = delta.since;
  if (st === null || since === null || delta.torn || delta.resume === null) return null;
  if (since.end !== st.point.end || since.lastSeq !== st.point.lastSeq || since.tailHash !== st.point.tailHash) return null;
  const closed = new Set(st.closed);
  let tail: TurnAcc | null = null;
  const fresh = new Map<string, TurnAcc>();
  for (const r of delta.records) {
    if (r.kind === "checkpoint") return null;
    if (r.kind !== "user" && r.kind !== "assistant" && r.kind !== "terminal") continue;
    let t: TurnAcc | undefined;
    if (st.tail !== null && r.turn_id === st.tail.id) {
      if (st.tail.terminal !== null) return null;
      tail ??= { users: [...st.tail.users], assistant: new Map(st.tail.assistant), terminal: null };
      t = tail;
    } else if (closed.has(r.turn_id)) return null;
    else if (!(t = fresh.get(r.turn_id))) fresh.set(r.turn_id, (t = { users: [], assistant: new Map(), terminal: null }));
    accumulate(t, r);
  }
  const cut = tail !== null && st.tail !== null ? st.tail.firstItem : base.count;
  const extra: ReplayItem[] = [];
  let newTail = st.tail;
  const newClosed = fresh.size > 0 ? [...st.closed] : st.closed;
  if (tail !== null && st.tail !== null) {
    newTail = { id: st.tail.id, firstItem: cut, users: tail.users, assistant: [...tail.assistant], terminal: tail.terminal };
    projectTurn(extra, tail);
  }
  for (const [id, t] of fresh) {
    if (newTail !== null) newClosed.push(newTail.id);
    newTail = { id, firstItem: cut + extra.length, users: t.users, assistant: [...t.assistant], terminal: t.terminal };
    projectTurn(extra, t);
  }
  const prefix = new Uint32Array(2 * (cut + extra.length + 1));
  prefix.set(base.prefix.subarray(0, 2 * (cut + 1)));
  chainInto(prefix, cut, extra);
  const state: ProjectionState = { point: delta.resume, closed: newClosed, tail: newTail };
  return compose(base, cut, extra, prefix, base.gap || delta.badLines > 0, state);
}

/** A turn's items: user messages, one assistant message (terminal text once settled), the terminal. */
function projectTurn(items: ReplayItem[], t: TurnAcc): void {
  for (const u of t.users) pushParts(items, u, (text, part, last_part) => ({ kind: "message", role: "user", text, part, last_part }));
  const a = t.terminal ? t.terminal.text : [...t.assistant.values()].join("");
  if (a !== "") pushParts(items, a, (text, part, last_part) => ({ kind: "message", role: "assistant", text, part, last_part }));
  if (t.terminal) items.push({ kind: "terminal", status: t.terminal.status });
}

function accumulate(t: TurnAcc, r: StoredRecord): void {
  if (r.kind === "user") t.users.push(r.text);
  else if (r.kind === "assistant") {
    // Re-inserting keeps first-appearance order (Map.set on an existing key keeps its position).
    t.assistant.set(r.message_id, r.text);
  } else if (r.kind === "terminal") t.terminal = { status: r.status, text: r.assistant_text };
}

function pushParts(items: ReplayItem[], text: string, make: (text: string, part: number, last: boolean) => ReplayItem): void {
  const parts = projectText(text);
  parts.forEach((p, i) => items.push(make(p, i, i === parts.length - 1)));
}
// ------------------------------------------------------------------ pages

function eventOf(p: Projection, i: number): Record<string, unknown> {
  return { cursor: cursorAt(p, i + 1), ...p.item(i) };
}

function frame(next: string, snapshot: string, truncated: boolean, gap: boolean, resync: boolean): string {
  return JSON.stringify({ events: [], next_cursor: next, snapshot_cursor: snapshot, truncated, gap, resync_required: resync });
}

/**
 * One replay page: at most `limit` items and at most 16 KiB of compact UTF-8 JSON for the whole payload.
 * Every single item fits (text parts are ≤ 2,048 bytes, so ≤ ~4 KiB escaped).
 */
export function replayPage(p: Projection, after: string | null, limit: number, maxBytes = MAX_REPLAY_PAGE_BYTES): ReplayPayload {
  const total = p.count;
  const snapshot = cursorAt(p, total);
  let start = 0;
  if (after !== null) {
    const n = resolveCursor(p, after);
    if (n === null) {
      return { events: [], next_cursor: cursorAt(p, 0), snapshot_cursor: snapshot, truncated: total > 0, gap: p.gap, resync_required: true };
    }
    start = n;
  }
  const events: Array<Record<string, unknown>> = [];
  let bodyBytes = 0; // bytes of the events joined with commas
  for (let i = start; i < total && events.length < limit; i++) {
    const ev = eventOf(p, i);
    const evBytes = Buffer.byteLength(JSON.stringify(ev));
    const nextBody = bodyBytes + evBytes + (events.length > 0 ? 1 : 0);
    const k = i + 1;
    const size = Buffer.byteLength(frame(cursorAt(p, k), snapshot, k < total, p.gap, false)) + nextBody;
    if (size > maxBytes) {
      if (events.length === 0) throw new Error("replay item exceeds the page bound"); // impossible by construction
      break;
    }
    events.push(ev);
    bodyBytes = nextBody;
  }
  const end = start + events.length;
  return { events, next_cursor: cursorAt(p, end), snapshot_cursor: snapshot, truncated: end < total, gap: p.gap, resync_required: false };
}
