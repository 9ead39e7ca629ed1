/**
 * Session JSONL record formats (format 1). Strict on write (`validateNewRecord`: exact field sets, types and
 * bounds, well-formed strings only; no schema library, so the store loads fast and appends stay cheap), tolerant on
 * read (`decodeLine` classifies, never throws).
 *
 * Line 1 is the header; every later line is one record with a strictly increasing `seq` (not necessarily dense)
 * and an ISO `at` time. Records never repeat the session ID; the header binds the file to its session.
 */

import { wellFormed } from "../../core/text-policy.js";

export const FORMAT_VERSION = 1;

/** A single record line (JSON + LF) may not exceed this; larger appends are rejected before any write. */
export const MAX_RECORD_BYTES = 4 * 1024 * 1024;

/** The seq of a new session's first record (the writer of a created session starts there). */
export const FIRST_SEQ = 1;

export interface HeaderRecord {
  kind: "header";
  format: typeof FORMAT_VERSION;
  /** 1..128 characters. */
  session_id: string;
  created_at: string;
  cwd: string;
}

/** A file attached to a prompt, as recorded (at most 16 per record). */
export interface UserAttachment {
  kind: "image" | "audio" | "video" | "file" | "sticker";
  /** Absolute path on the host that ran the turn. */
  path: string;
  name?: string;
  mime?: string;
  size?: number;
  /** The platform's transcript of a voice message (sent to the model with the prompt, kept in history). */
  transcript?: string;
}
export const ATTACHMENT_KINDS = ["image", "audio", "video", "file", "sticker"] as const;

export const TERMINAL_STATUSES = ["completed", "cancelled", "failed", "compaction_required"] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

/** What a caller appends (the writer adds `seq` and `at`). IDs are 1..256 characters; all strings well-formed. */
export type NewRecord =
  /** A prompt (or a steering message of the turn). `attachments` describe files sent with it: paths, never bytes. */
  | { kind: "user"; turn_id: string; text: string; attachments?: UserAttachment[] }
  | {
      kind: "assistant";
      turn_id: string;
      /** One provider response. A later record with the same turn_id + message_id replaces an earlier partial one. */
      message_id: string;
      text: string;
      /** true: accepted text so far of a message still streaming (or stopped); false: the message is complete. */
      partial: boolean;
      /** Provider continuity data (e.g. signed thinking blocks). Never projected to clients. */
      thinking?: Array<{ text: string; signature?: string }>;
    }
  | { kind: "tool_call"; turn_id: string; message_id: string; call_id: string; name: string; arguments: Record<string, unknown> }
  | { kind: "tool_result"; turn_id: string; call_id: string; name: string; content: string; is_error: boolean }
  | {
      kind: "terminal";
      turn_id: string;
      status: TerminalStatus;
      /** The authoritative accepted assistant text of the turn (partial for cancelled/failed). */
      assistant_text: string;
    }
  | {
      kind: "checkpoint";
      /** Compaction summary of every record with seq ≤ cutoff_seq. */
      summary: string;
      cutoff_seq: number;
    };
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

// ------------------------------------------------------------------ strict write-side validation

type FieldCheck = (v: unknown) => boolean;
const text: FieldCheck = (v) => typeof v === "string" && wellFormed(v);
const shortId: FieldCheck = (v) => typeof v === "string" && v.length >= 1 && v.length <= 256 && wellFormed(v);
const bool: FieldCheck = (v) => typeof v === "boolean";
const plainObject: FieldCheck = (v) => isObj(v);
const seqNumber: FieldCheck = (v) => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
const status: FieldCheck = (v) => (TERMINAL_STATUSES as readonly unknown[]).includes(v);
const thinking: FieldCheck = (v) =>
  Array.isArray(v) &&
  v.every((b) => isObj(b) && hasExactly(b as Record<string, unknown>, { text }, { signature: text }));

const attachments: FieldCheck = (v) =>
  Array.isArray(v) &&
  v.length <= 16 &&
  v.every(
    (a) =>
      isObj(a) &&
      hasExactly(
        a as Record<string, unknown>,
        { kind: (k) => (ATTACHMENT_KINDS as readonly unknown[]).includes(k), path: text },
        { name: text, mime: text, size: (n) => typeof n === "number" && Number.isSafeInteger(n) && n >= 0, transcript: text },
      ),
  );

/** Required and optional fields of each record kind (besides `kind`). */
const RECORD_FIELDS: Record<RecordKind, [required: Record<string, FieldCheck>, optional: Record<string, FieldCheck>]> = {
  user: [{ turn_id: shortId, text }, { attachments }],
  assistant: [{ turn_id: shortId, message_id: shortId, text, partial: bool }, { thinking }],
  tool_call: [{ turn_id: shortId, message_id: shortId, call_id: shortId, name: shortId, arguments: plainObject }, {}],
  tool_result: [{ turn_id: shortId, call_id: shortId, name: shortId, content: text, is_error: bool }, {}],
  terminal: [{ turn_id: shortId, status, assistant_text: text }, {}],
  checkpoint: [{ summary: text, cutoff_seq: seqNumber }, {}],
};

function hasExactly(o: Record<string, unknown>, required: Record<string, FieldCheck>, optional: Record<string, FieldCheck>): boolean {
  for (const [k, check] of Object.entries(required)) if (!check(o[k])) return false;
  for (const [k, v] of Object.entries(o)) {
    if (k in required) continue;
    const check = optional[k];
    if (check === undefined || (v !== undefined && !check(v))) return false;
  }
  return true;
}

/** Strict check of a record about to be appended: known kind, exact fields, types and bounds. */
export function validateNewRecord(rec: unknown): rec is NewRecord {
  if (!isObj(rec)) return false;
  const r = rec as Record<string, unknown>;
  const spec = typeof r.kind === "string" && Object.hasOwn(RECORD_FIELDS, r.kind) ? RECORD_FIELDS[r.kind as RecordKind] : undefined;
  if (spec === undefined) return false;
  return hasExactly(r, { kind: () => true, ...spec[0] }, spec[1]);
}

/** Strict check of a header about to be written. */
export function validateHeader(h: unknown): h is HeaderRecord {
  return isObj(h) && isHeader(h as Record<string, unknown>, true);
}

function isHeader(h: Record<string, unknown>, strict: boolean): boolean {
  const required: Record<string, FieldCheck> = {
    kind: (v) => v === "header",
    format: (v) => v === FORMAT_VERSION,
    session_id: (v) => typeof v === "string" && v.length >= 1 && v.length <= 128,
    created_at: (v) => typeof v === "string",
    cwd: text,
  };
  if (strict) return hasExactly(h, required, {});
  for (const [k, check] of Object.entries(required)) if (!check(h[k])) return false;
  return true;
}

/** Tolerant header decode (known fields strict, unknown newer fields ignored): the header must be intact for a session to be usable. */
export function decodeHeader(line: string): HeaderRecord | null {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return null;
  }
  if (!isObj(v) || !isHeader(v as Record<string, unknown>, false)) return null;
  const h = v as Record<string, unknown>;
  return { kind: "header", format: FORMAT_VERSION, session_id: h.session_id as string, created_at: h.created_at as string, cwd: h.cwd as string };
}

/** Strict encode of a new record: throws on a violation; returns the line without the LF. Undefined optional fields are dropped. */
export function encodeRecord(rec: NewRecord, seq: number, at: string): string {
  if (!validateNewRecord(rec)) throw new TypeError("invalid session record");
  return JSON.stringify({ seq, at, ...rec });
}
