/**
 * Sidecar encoding of a projection (`encodeProjection` / `decodeProjection`; the store keeps the bytes keyed by file
 * version): the item table, the prefix hashes, the texts as UTF-8 and the extension state, so a projection loaded
 * after a restart needs no JSONL parse, no sanitizing and no hashing, and decodes only the items a page touches.
 * `decodeProjection(encodeProjection(p))` has the same items, prefix, gap and state as `p`. See docs/sessions.md.
 */
import { TERMINAL_STATUSES, type TerminalStatus } from "../../store/sessions/index.js";
import { ComposedProjection, type Projection, type ProjectionState, type ReplayItem } from "./replay-model.js";

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
