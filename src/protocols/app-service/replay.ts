/**
 * The replay projection: store window → allowlisted items → bounded pages with restart-proof cursors.
 * Pure (no I/O); sessions.ts feeds it store snapshots.
 *
 * Projection (allowlist): compaction `summary` parts first when the window holds a valid checkpoint, then per turn
 * (in order of first appearance, after the checkpoint cutoff): user `message` parts, one assistant `message`
 * (the terminal's accepted `assistant_text` once settled, else the latest text of each assistant message so far,
 * concatenated), and the `terminal` status. Tool calls/results, thinking, headers and unknown kinds never appear.
 *
 * Cursors: `c1.<session tag>.<prefix length base36>.<64-bit prefix hash>`. The hash chains every projected item
 * (kind, role/status, part, last_part, text) from a seed derived from the session ID, so a cursor is valid exactly
 * when the current projection has the same prefix: it survives restarts and appends, and is stale after compaction,
 * regrouping of in-progress text, corruption or a moved window. Foreign, malformed or stale cursors →
 * `resync_required` with the start position in `next_cursor`.
 *
 * Extension (`extendProjection`): a projection keeps where its window read stopped and the raw state of its last
 * turn, so after appends only the new lines are read and only the last turn and new turns are projected again —
 * with a result identical to projecting the whole window (else it declines and the caller projects fully).
 *
 * Sidecar encoding (`encodeProjection` / `decodeProjection`, stored by the store keyed by file version): the item
 * table, the prefix hashes, the texts as UTF-8 and the extension state, so a projection loaded after a restart
 * needs no JSONL parse, no sanitizing and no hashing, and decodes only the items a page touches. See
 * docs/sessions.md.
 */
import {
  TERMINAL_STATUSES,
  lastValidCheckpoint,
  type RecordKind,
  type ResumePoint,
  type StoredRecord,
  type TerminalStatus,
  type WindowSnapshot,
} from "../../store/sessions/index.js";
import { projectText } from "./replay-text.js";

export const MAX_REPLAY_PAGE_BYTES = 16384;

/** Record kinds the projection never reads: the store validates them but need not return them. */
export const UNPROJECTED_KINDS: ReadonlySet<RecordKind> = new Set<RecordKind>(["tool_call", "tool_result"]);

export type ReplayItem =
  | { kind: "message"; role: "user" | "assistant"; text: string; part: number; last_part: boolean }
  | { kind: "summary"; text: string; part: number; last_part: boolean }
  | { kind: "terminal"; status: TerminalStatus };

/**
 * A projection: `count` items (`item(i)`, 0 ≤ i < count) and the prefix hashes behind their cursors. Immutable.
 * `items` materializes every item (tests, diagnostics); pages use `item(i)`, which a sidecar-backed projection
 * decodes on demand.
 */
export interface Projection {
  readonly sessionId: string;
  readonly count: number;
  item(i: number): ReplayItem;
  readonly items: ReplayItem[];
  /** prefix[2i], prefix[2i+1]: the two hash lanes after the first i items (length 2 * (count + 1)). */
  readonly prefix: Uint32Array;
  readonly gap: boolean;
  /** What `extendProjection` needs; null when the window cannot be continued (torn, record-bounded). */
  readonly state: ProjectionState | null;
}

/** Where the window read stopped, and the turns as far as later records can still change the projection. */
export interface ProjectionState {
  point: ResumePoint;
  /** IDs of the projected turns before `tail` (a later record for one of them needs a full projection). */
  closed: string[];
  /** The last projected turn with its raw texts, or null when no turn is projected. */
  tail: TailTurn | null;
}

interface TailTurn {
  id: string;
  /** Index of the turn's first item. */
  firstItem: number;
  users: string[];
  /** [message_id, text] in first-appearance order. */
  assistant: Array<[string, string]>;
  terminal: { status: TerminalStatus; text: string } | null;
}

class ListProjection implements Projection {
  constructor(
    readonly sessionId: string,
    readonly items: ReplayItem[],
    readonly prefix: Uint32Array,
    readonly gap: boolean,
    readonly state: ProjectionState | null,
  ) {}
  get count(): number {
    return this.items.length;
  }
  item(i: number): ReplayItem {
    return this.items[i] as ReplayItem;
  }
}

/** The first `cut` items of `root`, then `extra`. Built by `compose`, so roots are never composed themselves. */
class ComposedProjection implements Projection {
  private all: ReplayItem[] | null = null;
  constructor(
    readonly sessionId: string,
    readonly root: Projection,
    readonly cut: number,
    readonly extra: ReplayItem[],
    readonly prefix: Uint32Array,
    readonly gap: boolean,
    readonly state: ProjectionState | null,
  ) {}
  get count(): number {
    return this.cut + this.extra.length;
  }
  item(i: number): ReplayItem {
    return i < this.cut ? this.root.item(i) : (this.extra[i - this.cut] as ReplayItem);
  }
  get items(): ReplayItem[] {
    return (this.all ??= Array.from({ length: this.count }, (_, i) => this.item(i)));
  }
}

function compose(base: Projection, cut: number, extra: ReplayItem[], prefix: Uint32Array, gap: boolean, state: ProjectionState | null): Projection {
  if (!(base instanceof ComposedProjection)) return new ComposedProjection(base.sessionId, base, cut, extra, prefix, gap, state);
  const kept = cut >= base.cut ? base.extra.slice(0, cut - base.cut).concat(extra) : extra;
  return new ComposedProjection(base.sessionId, base.root, Math.min(cut, base.cut), kept, prefix, gap, state);
}

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

// ------------------------------------------------------------------ cursors

function hashInto(h1: number, h2: number, s: string): [number, number] {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0x5bd1e995);
    h2 ^= h2 >>> 13;
  }
  // Per-item finalization so item boundaries matter.
  h1 = Math.imul(h1 ^ (h1 >>> 16), 0x85ebca6b);
  h2 = Math.imul(h2 ^ (h2 >>> 15), 0xc2b2ae35);
  return [h1 >>> 0, h2 >>> 0];
}

/**
 * The hashed key of an item is `t␀<status>`, `s␀<part>␀<0|1>␀<text>` or `m␀<role>␀<part>␀<0|1>␀<text>`
 * (␀ = U+0000). `chain` feeds the key's pieces through the same per-character steps as `hashInto` without
 * building the concatenation (which would copy every text once more).
 */
function itemKeyHead(it: ReplayItem): string {
  switch (it.kind) {
    case "terminal":
      return `t\u0000${it.status}`;
    case "summary":
      return `s\u0000${it.part}\u0000${it.last_part ? 1 : 0}\u0000`;
    case "message":
      return `m\u0000${it.role}\u0000${it.part}\u0000${it.last_part ? 1 : 0}\u0000`;
  }
}

function seed(sessionId: string): [number, number] {
  return hashInto(0x811c9dc5, 0x9747b28c, `berth-replay-v1\u0000${sessionId}`);
}

function chain(sessionId: string, items: ReplayItem[]): Uint32Array {
  const out = new Uint32Array(2 * (items.length + 1));
  [out[0], out[1]] = seed(sessionId);
  chainInto(out, 0, items);
  return out;
}

/** Fills `out` after position `at` (whose lanes are set) with the hashes of `items`. */
function chainInto(out: Uint32Array, at: number, items: ReplayItem[]): void {
  let h1 = out[2 * at] as number;
  let h2 = out[2 * at + 1] as number;
  for (let i = 0; i < items.length; i++) {
    const it = items[i] as ReplayItem;
    for (let k = 0; k < 2; k++) {
      const s = k === 0 ? itemKeyHead(it) : it.kind === "terminal" ? "" : it.text;
      for (let j = 0; j < s.length; j++) {
        const c = s.charCodeAt(j);
        h1 = Math.imul(h1 ^ c, 0x01000193);
        h2 = Math.imul(h2 ^ c, 0x5bd1e995);
        h2 ^= h2 >>> 13;
      }
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 0x85ebca6b) >>> 0;
    h2 = Math.imul(h2 ^ (h2 >>> 15), 0xc2b2ae35) >>> 0;
    out[2 * (at + i) + 2] = h1;
    out[2 * (at + i) + 3] = h2;
  }
}

function hex8(n: number): string {
  return n.toString(16).padStart(8, "0");
}

function tag(sessionId: string): string {
  return hex8(seed(sessionId)[0]);
}

/** The cursor after the first `n` items of `p`. */
export function cursorAt(p: Projection, n: number): string {
  return `c1.${tag(p.sessionId)}.${n.toString(36)}.${hex8(p.prefix[2 * n] as number)}${hex8(p.prefix[2 * n + 1] as number)}`;
}

const CURSOR_RE = /^c1\.([0-9a-f]{8})\.([0-9a-z]{1,8})\.([0-9a-f]{16})$/;

/** The prefix length a cursor denotes in `p`, or null when it does not match the current projection. */
export function resolveCursor(p: Projection, cursor: string): number | null {
  const m = CURSOR_RE.exec(cursor);
  if (!m || m[1] !== tag(p.sessionId)) return null;
  const n = parseInt(m[2] as string, 36);
  if (!Number.isSafeInteger(n) || n > p.count) return null;
  return cursorAt(p, n) === cursor ? n : null;
}

// ------------------------------------------------------------------ sidecar codec

/*
 * Payload layout (little-endian): u32 S | S bytes of state JSON (`ProjectionState` or null) | u32 count | u8 gap |
 * 3 zero bytes | u32 prefix[2 * (count + 1)] | count × 12-byte entries {u8 kind (0 user message, 1 assistant
 * message, 2 summary, 3 terminal), u8 last_part, u8 status index (terminal), u8 0, u32 part, u32 end offset of the
 * item's text in the text area} | UTF-8 texts. Texts are well-formed (sanitized), so UTF-8 round-trips them exactly.
 */
const ENTRY_BYTES = 12;

export function encodeProjection(p: Projection): Buffer {
  const n = p.count;
  // Items already held encoded (a sidecar-loaded root, possibly extended) are copied as bytes, not re-encoded.
  const root = p instanceof EncodedProjection ? p : p instanceof ComposedProjection && p.root instanceof EncodedProjection ? p.root : null;
  const copied = root === null ? 0 : p instanceof ComposedProjection ? p.cut : n;
  const copiedText = copied > 0 && root !== null ? root.textEnd(copied - 1) : 0;
  const state = Buffer.from(JSON.stringify(p.state), "utf8");
  const head = 4 + state.length;
  const textStart = head + 8 + 8 * (n + 1) + ENTRY_BYTES * n;
  let textBytes = copiedText;
  for (let i = copied; i < n; i++) {
    const it = p.item(i);
    if (it.kind !== "terminal") textBytes += Buffer.byteLength(it.text, "utf8");
  }
  const buf = Buffer.alloc(textStart + textBytes);
  buf.writeUInt32LE(state.length, 0);
  state.copy(buf, 4);
  buf.writeUInt32LE(n, head);
  buf.writeUInt8(p.gap ? 1 : 0, head + 4);
  putU32le(buf, head + 8, p.prefix);
  let entry = head + 8 + 8 * (n + 1);
  if (root !== null) root.copyInto(buf, entry, textStart, copied);
  entry += ENTRY_BYTES * copied;
  let end = copiedText;
  for (let i = copied; i < n; i++, entry += ENTRY_BYTES) {
    const it = p.item(i);
    if (it.kind === "terminal") {
      buf.writeUInt8(3, entry);
      buf.writeUInt8(TERMINAL_STATUSES.indexOf(it.status), entry + 2);
    } else {
      buf.writeUInt8(it.kind === "summary" ? 2 : it.role === "user" ? 0 : 1, entry);
      buf.writeUInt8(it.last_part ? 1 : 0, entry + 1);
      buf.writeUInt32LE(it.part, entry + 4);
      end += buf.write(it.text, textStart + end, "utf8");
    }
    buf.writeUInt32LE(end, entry + 8);
  }
  return buf;
}

/**
 * The projection encoded in `buf`, or null when the layout is inconsistent. Items decode on demand. The state is
 * trusted as far as the sidecar checksum goes (it was written by `encodeProjection`); its shape is checked.
 */
export function decodeProjection(sessionId: string, whole: Buffer): Projection | null {
  if (whole.length < 4 || 4 + whole.readUInt32LE(0) > whole.length) return null;
  const head = 4 + whole.readUInt32LE(0);
  let state: ProjectionState | null;
  try {
    state = JSON.parse(whole.toString("utf8", 4, head)) as ProjectionState | null;
  } catch {
    return null;
  }
  if (state !== null && (typeof state.point?.end !== "number" || !Array.isArray(state.closed))) return null;
  const buf = whole.subarray(head);
  if (buf.length < 8) return null;
  const n = buf.readUInt32LE(0);
  const gap = buf.readUInt8(4);
  const textStart = 8 + 8 * (n + 1) + ENTRY_BYTES * n;
  if (gap > 1 || textStart > buf.length) return null;
  // Prefix lanes and entries as one aligned copy of u32 words: entry word 0 = kind | last_part << 8 | status << 16.
  const words = u32le(buf.subarray(8, textStart));
  const prefix = words.subarray(0, 2 * (n + 1));
  const table = words.subarray(2 * (n + 1));
  const textBytes = buf.length - textStart;
  let prev = 0;
  for (let i = 0; i < n; i++) {
    const w = table[3 * i] as number;
    const kind = w & 0xff;
    const end = table[3 * i + 2] as number;
    const ok = kind === 3 ? w >>> 16 < TERMINAL_STATUSES.length && (w & 0xff00) === 0 && end === prev : kind < 3 && w >>> 9 === 0 && end >= prev;
    if (!ok || end > textBytes) return null;
    prev = end;
  }
  if (prev !== textBytes) return null;
  return new EncodedProjection(sessionId, n, prefix, gap === 1, state, table, buf.subarray(textStart));
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** Writes `words` little-endian at `at`. */
function putU32le(buf: Buffer, at: number, words: Uint32Array): void {
  if (LITTLE_ENDIAN) buf.set(new Uint8Array(words.buffer, words.byteOffset, words.byteLength), at);
  else for (let i = 0; i < words.length; i++) buf.writeUInt32LE(words[i] as number, at + 4 * i);
}

/** `bytes` (a multiple of 4 long) as little-endian u32 words, in a fresh aligned array. */
function u32le(bytes: Buffer): Uint32Array {
  const out = new Uint32Array(bytes.length >>> 2);
  if (LITTLE_ENDIAN) new Uint8Array(out.buffer).set(bytes);
  else for (let i = 0; i < out.length; i++) out[i] = bytes.readUInt32LE(4 * i);
  return out;
}

class EncodedProjection implements Projection {
  private all: ReplayItem[] | null = null;
  constructor(
    readonly sessionId: string,
    readonly count: number,
    readonly prefix: Uint32Array,
    readonly gap: boolean,
    readonly state: ProjectionState | null,
    /** Three words per item: kind | last_part << 8 | status << 16, part, end offset of its text. */
    private readonly table: Uint32Array,
    private readonly texts: Buffer,
  ) {}

  item(i: number): ReplayItem {
    const w = this.table[3 * i] as number;
    const kind = w & 0xff;
    if (kind === 3) return { kind: "terminal", status: TERMINAL_STATUSES[w >>> 16] as TerminalStatus };
    const start = i === 0 ? 0 : (this.table[3 * i - 1] as number);
    const text = this.texts.toString("utf8", start, this.table[3 * i + 2]);
    const part = this.table[3 * i + 1] as number;
    const last_part = (w & 0xff00) !== 0;
    return kind === 2 ? { kind: "summary", text, part, last_part } : { kind: "message", role: kind === 0 ? "user" : "assistant", text, part, last_part };
  }

  get items(): ReplayItem[] {
    return (this.all ??= Array.from({ length: this.count }, (_, i) => this.item(i)));
  }

  /** End offset of item i's text in the text area (cumulative from item 0). */
  textEnd(i: number): number {
    return this.table[3 * i + 2] as number;
  }

  /** Writes the entries and texts of the first `n` items at `entryAt` / `textAt` (the encoded layout). */
  copyInto(buf: Buffer, entryAt: number, textAt: number, n: number): void {
    putU32le(buf, entryAt, this.table.subarray(0, 3 * n));
    if (n > 0) this.texts.copy(buf, textAt, 0, this.textEnd(n - 1));
  }
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
