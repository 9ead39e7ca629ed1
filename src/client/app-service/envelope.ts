/**
 * Output record decoding (§Envelope, §Evolution and consumer decoding). One function per step, in order:
 *   1. bytes: the record (with its LF) fits the decoding bound — checked by the framing before any parse;
 *   2. strict UTF-8 and JSON;
 *   3. a bounded walk over the whole record (depth, array items, object fields, string and key bytes), so an
 *      over-limit *unknown* member rejects the whole record;
 *   4. envelope: `protocol_version` 1, `kind` response|event (anything else rejected), every shown field present
 *      with its type (nullable fields as null, never absent), identities safe and within `max_id_bytes`;
 *      responses carry exactly one of payload/error; events name one of the six v1 events;
 *   5. compact payload bytes within `max_payload_bytes`.
 * Unknown envelope members are ignored. Correlation (against pending requests, turns, logins) is the client's job.
 */
import { checkJsonBounds } from "../../core/json-bounds.js";
import { isSafeId } from "../../core/ids.js";
import { utf8Length } from "../../core/utf8.js";
import { EVENTS, PROTOCOL_VERSION, type EventName } from "./preflight.js";
import { DecodeError, fail, has, obj, str, type Obj } from "./validate.js";

/** The bounds a record is decoded against (the local ones before initialization, the accepted advertised ones after). */
export interface DecodeBounds {
  maxRecordBytes: number;
  maxPayloadBytes: number;
  maxStringBytes: number;
  maxJsonDepth: number;
  maxArrayItems: number;
  maxObjectFields: number;
  maxIdBytes: number;
  maxNameBytes: number;
  maxErrorMessageBytes: number;
}

export interface ResponseMessage {
  kind: "response";
  requestId: string | null;
  sessionId: string | null;
  method: string | null;
  payload: Obj | null;
  error: { code: string; message: string } | null;
}

export interface EventMessage {
  kind: "event";
  eventId: string;
  requestId: string;
  sessionId: string | null;
  event: EventName;
  payload: Obj;
}

export type Message = ResponseMessage | EventMessage;

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function required(o: Obj, k: string): unknown {
  if (!has(o, k)) fail(`envelope.${k} is required`);
  return o[k];
}

function nullableId(o: Obj, k: string, max: number): string | null {
  const v = required(o, k);
  if (v === null) return null;
  if (!isSafeId(v, max)) fail(`envelope.${k} is not a safe identity`);
  return v;
}

function payloadBytesOk(p: Obj, b: DecodeBounds): void {
  if (utf8Length(JSON.stringify(p)) > b.maxPayloadBytes) fail("payload exceeds max_payload_bytes");
}

/** Decodes one record's bytes (without its LF; a trailing CR already stripped). Throws DecodeError. */
export function decodeRecord(bytes: Uint8Array, b: DecodeBounds): Message {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new DecodeError("record is not valid UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new DecodeError("record is not valid JSON");
  }
  const violation = checkJsonBounds(value, {
    maxDepth: b.maxJsonDepth,
    maxArrayItems: b.maxArrayItems,
    maxObjectFields: b.maxObjectFields,
    maxStringBytes: b.maxStringBytes,
  });
  if (violation !== null) fail(`record exceeds the ${violation} bound`);
  return decodeEnvelope(obj(value, "record"), b);
}

export function decodeEnvelope(o: Obj, b: DecodeBounds): Message {
  if (required(o, "protocol_version") !== PROTOCOL_VERSION) fail("envelope.protocol_version is not 1");
  const kind = required(o, "kind");
  if (kind === "response") {
    const requestId = nullableId(o, "request_id", b.maxIdBytes);
    const sessionId = nullableId(o, "session_id", b.maxIdBytes);
    const method = nullableId(o, "method", b.maxNameBytes);
    const p = required(o, "payload");
    const e = required(o, "error");
    if ((p === null) === (e === null)) fail("response must carry exactly one of payload and error");
    if (p !== null) {
      const payload = obj(p, "response.payload");
      payloadBytesOk(payload, b);
      return { kind, requestId, sessionId, method, payload, error: null };
    }
    const eo = obj(e, "response.error");
    const code = str(eo, "code", "error", { maxBytes: b.maxNameBytes });
    const message = str(eo, "message", "error", { maxBytes: b.maxErrorMessageBytes, empty: true });
    return { kind, requestId, sessionId, method, payload: null, error: { code, message } };
  }
  if (kind === "event") {
    const eventId = nullableId(o, "event_id", b.maxIdBytes);
    const requestId = nullableId(o, "request_id", b.maxIdBytes);
    const sessionId = nullableId(o, "session_id", b.maxIdBytes);
    const ev = required(o, "event");
    if (eventId === null || requestId === null) fail("event identities must not be null");
    if (typeof ev !== "string" || !(EVENTS as readonly string[]).includes(ev)) fail("unknown event");
    const payload = obj(required(o, "payload"), "event.payload");
    payloadBytesOk(payload, b);
    return { kind, eventId, requestId, sessionId, event: ev as EventName, payload };
  }
  return fail("unknown message kind");
}
