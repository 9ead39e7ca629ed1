/**
 * Session JSONL record formats (format 1). Strict on write (zod schemas, unknown fields rejected,
 * well-formed strings only), tolerant on read (`decodeLine` classifies, never throws).
 *
 * Line 1 is the header; every later line is one record with a strictly increasing `seq` (not necessarily dense)
 * and an ISO `at` time. Records never repeat the session ID; the header binds the file to its session.
 */
import { z } from "zod/v3";

export const FORMAT_VERSION = 1;

/** A single record line (JSON + LF) may not exceed this; larger appends are rejected before any write. */
export const MAX_RECORD_BYTES = 4 * 1024 * 1024;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** True when `s` has no lone surrogate (so it round-trips through UTF-8). */
export function isWellFormed(s: string): boolean {
  LONE_SURROGATE.lastIndex = 0;
  return !LONE_SURROGATE.test(s);
}

/** Replaces lone surrogates with U+FFFD. */
export function toWellFormed(s: string): string {
  return s.replace(LONE_SURROGATE, "\uFFFD");
}

const wellFormed = z.string().refine(isWellFormed, "ill-formed string");
const shortId = z.string().min(1).max(256).refine(isWellFormed, "ill-formed string");

export const HeaderSchema = z.strictObject({
  kind: z.literal("header"),
  format: z.literal(FORMAT_VERSION),
  session_id: z.string().min(1).max(128),
  created_at: z.string(),
  cwd: wellFormed,
});
export type HeaderRecord = z.infer<typeof HeaderSchema>;

export const TERMINAL_STATUSES = ["completed", "cancelled", "failed", "compaction_required"] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

/** What a caller appends (the writer adds `seq` and `at`). */
export const NewRecordSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("user"), turn_id: shortId, text: wellFormed }),
  z.strictObject({
    kind: z.literal("assistant"),
    turn_id: shortId,
    /** One provider response. A later record with the same turn_id + message_id replaces an earlier partial one. */
    message_id: shortId,
    text: wellFormed,
    /** true: accepted text so far of a message still streaming (or stopped); false: the message is complete. */
    partial: z.boolean(),
    /** Provider continuity data (e.g. signed thinking blocks). Never projected to clients. */
    thinking: z.array(z.strictObject({ text: wellFormed, signature: wellFormed.optional() })).optional(),
  }),
  z.strictObject({
    kind: z.literal("tool_call"),
    turn_id: shortId,
    message_id: shortId,
    call_id: shortId,
    name: shortId,
    arguments: z.record(z.string(), z.unknown()),
  }),
  z.strictObject({
    kind: z.literal("tool_result"),
    turn_id: shortId,
    call_id: shortId,
    name: shortId,
    content: wellFormed,
    is_error: z.boolean(),
  }),
  z.strictObject({
    kind: z.literal("terminal"),
    turn_id: shortId,
    status: z.enum(TERMINAL_STATUSES),
    /** The authoritative accepted assistant text of the turn (partial for cancelled/failed). */
    assistant_text: wellFormed,
  }),
  z.strictObject({
    kind: z.literal("checkpoint"),
    /** Compaction summary of every record with seq ≤ cutoff_seq. */
    summary: wellFormed,
    cutoff_seq: z.number().int().nonnegative(),
  }),
]);
export type NewRecord = z.infer<typeof NewRecordSchema>;
export type RecordKind = NewRecord["kind"];

/** A record as stored: the appended fields plus its position and time. */
export type StoredRecord = NewRecord & { seq: number; at: string };

export type DecodedLine =
  | { type: "record"; record: StoredRecord }
  /** Well-formed JSON object with a `seq` but a kind this version does not know (a newer writer): not an error. */
  | { type: "unknown" }
  | { type: "malformed" };

/**
 * Tolerant read of one body line (not the header). Checks exactly the fields readers rely on, cheaply
 * (replay decodes up to 100,000 lines per window), and never throws.
 */
export function decodeLine(line: string): DecodedLine {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return { type: "malformed" };
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return { type: "malformed" };
  const r = v as Record<string, unknown>;
  if (typeof r.seq !== "number" || !Number.isSafeInteger(r.seq) || r.seq < 1 || typeof r.at !== "string") return { type: "malformed" };
  const str = (k: string) => typeof r[k] === "string";
  switch (r.kind) {
    case "user":
      return str("turn_id") && str("text") ? ok(r) : bad();
    case "assistant":
      return str("turn_id") && str("message_id") && str("text") && typeof r.partial === "boolean" ? ok(r) : bad();
    case "tool_call":
      return str("turn_id") && str("message_id") && str("call_id") && str("name") && isObj(r.arguments) ? ok(r) : bad();
    case "tool_result":
      return str("turn_id") && str("call_id") && str("name") && str("content") && typeof r.is_error === "boolean" ? ok(r) : bad();
    case "terminal":
      return str("turn_id") && str("assistant_text") && (TERMINAL_STATUSES as readonly unknown[]).includes(r.status) ? ok(r) : bad();
    case "checkpoint":
      return str("summary") && typeof r.cutoff_seq === "number" && Number.isSafeInteger(r.cutoff_seq) && r.cutoff_seq >= 0 ? ok(r) : bad();
    default:
      return typeof r.kind === "string" ? { type: "unknown" } : bad();
  }
}

function ok(r: Record<string, unknown>): DecodedLine {
  return { type: "record", record: r as unknown as StoredRecord };
}
function bad(): DecodedLine {
  return { type: "malformed" };
}
function isObj(v: unknown): boolean {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Read side of the header: known fields strict, unknown (newer) fields ignored. */
const HeaderReadSchema = z.object(HeaderSchema.shape);

/** Tolerant header decode: the header must be intact for a session to be usable. */
export function decodeHeader(line: string): HeaderRecord | null {
  try {
    const r = HeaderReadSchema.safeParse(JSON.parse(line));
    return r.success ? r.data : null;
  } catch {
    return null;
  }
}

/** Strict encode of a new record: throws on schema violation; returns the line without the LF. */
export function encodeRecord(rec: NewRecord, seq: number, at: string): string {
  const parsed = NewRecordSchema.parse(rec);
  return JSON.stringify({ seq, at, ...parsed });
}
