/**
 * Request decoding for app-service v1: the one place that fixes the order of checks.
 *
 * Order (each step returns the first failure):
 *   1. framing        record_too_large (splitter), invalid_json (not UTF-8, blank, not JSON, an unpaired
 *                     surrogate escape in any string or member name)
 *   2. identities     request_id / session_id / method extracted when safely extractable, else null (a repeated
 *                     identity member is ambiguous: null)
 *   3. duplicate ID   a safe request_id that is currently reserved -> duplicate_request_id
 *                     (takes precedence over every decoder error below for a parseable record)
 *   4. shape bounds   depth, array items, object fields, string/key bytes over the whole record -> limit_exceeded
 *   5. envelope       top-level object, known fields only, no repeated member, required fields and types -> invalid_request;
 *                     request/session IDs over max_id_bytes and method over max_name_bytes -> limit_exceeded;
 *                     protocol_version other than 1 -> unsupported_version
 *   6. payload size   compact payload bytes over max_payload_bytes -> payload_too_large
 *   7..  method (unsupported_operation), session_id rule, payload (a member repeated inside it: invalid_payload),
 *        initialized state: see server.ts
 */
import { checkJsonBounds, isPlainObject } from "../../core/json-bounds.js";
import { checkJsonStrictness } from "../../core/json-strict.js";
import { isSafeId } from "../../core/ids.js";
import { LIMITS, REQUEST_JSON_BOUNDS } from "./limits.js";
import type { ErrorCode } from "./errors.js";
import { utf8Length } from "../../core/utf8.js";

export interface Identities {
  requestId: string | null;
  sessionId: string | null;
  method: string | null;
}

export interface DecodedRequest {
  requestId: string;
  sessionId: string | null;
  method: string;
  payload: Record<string, unknown>;
  /** A member name is repeated somewhere inside the payload (the method answers invalid_payload). */
  payloadRepeated: boolean;
}

export type DecodeResult =
  | { ok: true; request: DecodedRequest }
  | { ok: false; error: ErrorCode; ids: Identities };

const ENVELOPE_FIELDS = new Set(["protocol_version", "kind", "request_id", "session_id", "method", "payload"]);
const NO_IDS: Identities = { requestId: null, sessionId: null, method: null };

export interface ParsedRecord {
  ok: true;
  value: unknown;
  ids: Identities;
  /** Member names repeated in the top-level object. */
  topRepeated: ReadonlySet<string>;
  payloadRepeated: boolean;
}

/** Steps 1–2: JSON text to a value plus its safely extractable identities. */
export function parseRecord(text: string): ParsedRecord | { ok: false } {
  if (text.trim().length === 0) return { ok: false };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false };
  }
  const strict = checkJsonStrictness(text);
  if (strict.loneSurrogate) return { ok: false };
  return {
    ok: true,
    value,
    ids: extractIdentities(value, strict.topRepeated),
    topRepeated: strict.topRepeated,
    payloadRepeated: strict.nestedRepeated,
  };
}

export function extractIdentities(value: unknown, repeated: ReadonlySet<string> = new Set()): Identities {
  if (!isPlainObject(value)) return NO_IDS;
  const rid = repeated.has("request_id") ? null : value.request_id;
  const sid = repeated.has("session_id") ? null : value.session_id;
  const m = repeated.has("method") ? null : value.method;
  return {
    requestId: isSafeId(rid, LIMITS.max_id_bytes) ? rid : null,
    sessionId: isSafeId(sid, LIMITS.max_id_bytes) ? sid : null,
    method: isSafeId(m, LIMITS.max_name_bytes) ? m : null,
  };
}

/** Steps 4–6 on a parsed record whose duplicate check (step 3) already passed. */
export function validateEnvelope(record: ParsedRecord): DecodeResult {
  const { value, ids } = record;
  const fail = (error: ErrorCode): DecodeResult => ({ ok: false, error, ids });
  if (checkJsonBounds(value, REQUEST_JSON_BOUNDS) !== null) return fail("limit_exceeded");
  if (!isPlainObject(value) || record.topRepeated.size > 0) return fail("invalid_request");
  for (const k of Object.keys(value)) if (!ENVELOPE_FIELDS.has(k)) return fail("invalid_request");
  const { protocol_version: pv, kind, request_id: rid, session_id: sid, method, payload } = value;
  if (typeof pv !== "number" || !Number.isInteger(pv) || pv < 0 || pv > 0xffff) return fail("invalid_request");
  if (kind !== "request") return fail("invalid_request");
  if (typeof rid !== "string" || rid.length === 0) return fail("invalid_request");
  if (sid !== undefined && sid !== null && (typeof sid !== "string" || sid.length === 0)) return fail("invalid_request");
  if (typeof method !== "string" || method.length === 0) return fail("invalid_request");
  if (!isPlainObject(payload)) return fail("invalid_request");
  if (utf8Length(rid) > LIMITS.max_id_bytes) return fail("limit_exceeded");
  if (typeof sid === "string" && utf8Length(sid) > LIMITS.max_id_bytes) return fail("limit_exceeded");
  if (utf8Length(method) > LIMITS.max_name_bytes) return fail("limit_exceeded");
  // IDs within bounds but carrying control characters are not safe to echo or store.
  if (ids.requestId === null || (typeof sid === "string" && ids.sessionId === null) || ids.method === null)
    return fail("invalid_request");
  if (pv !== 1) return fail("unsupported_version");
  if (utf8Length(JSON.stringify(payload)) > LIMITS.max_payload_bytes) return fail("payload_too_large");
  return {
    ok: true,
    request: { requestId: rid, sessionId: typeof sid === "string" ? sid : null, method, payload, payloadRepeated: record.payloadRepeated },
  };
}
