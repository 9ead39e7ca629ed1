/**
 * Encoding of outbound app-service messages. Every message is validated before it is handed to the transport:
 * its compact payload must fit `max_payload_bytes` and its line (plus LF) `max_record_bytes`. A message that does
 * not fit raises `OutputLimitError`; the server then stops with an I/O diagnostic and writes no replacement.
 */
import { LIMITS } from "./limits.js";
import type { WireError } from "./errors.js";
import { PROTOCOL_VERSION } from "./descriptor.js";

export class OutputLimitError extends Error {
  constructor(what: string) {
    super(`outbound ${what} exceeds the advertised limits`);
    this.name = "OutputLimitError";
  }
}

function checkPayload(json: string): void {
  // A UTF-8 byte count is between the length and three times it: bytes are counted only when they could exceed.
  if (json.length * 3 > LIMITS.max_payload_bytes && Buffer.byteLength(json) > LIMITS.max_payload_bytes)
    throw new OutputLimitError("payload");
}

function checkLine(line: string): string {
  if (line.length + 1 > LIMITS.max_record_bytes / 3 && Buffer.byteLength(line) + 1 > LIMITS.max_record_bytes)
    throw new OutputLimitError("record");
  return line;
}

const q = (v: string | null): string => (v === null ? "null" : JSON.stringify(v));

export function encodeResponse(
  requestId: string | null,
  sessionId: string | null,
  method: string | null,
  body: { payload: Record<string, unknown> } | { error: WireError },
): string {
  let payloadJson = "null";
  let errorJson = "null";
  if ("payload" in body) {
    payloadJson = JSON.stringify(body.payload);
    checkPayload(payloadJson);
  } else errorJson = JSON.stringify(body.error);
  return checkLine(
    `{"protocol_version":${PROTOCOL_VERSION},"kind":"response","request_id":${q(requestId)},"session_id":${q(sessionId)},"method":${q(method)},"payload":${payloadJson},"error":${errorJson}}`,
  );
}

export function encodeEvent(
  eventId: string,
  requestId: string,
  sessionId: string | null,
  event: string,
  payload: Record<string, unknown> | string,
): string {
  const payloadJson = typeof payload === "string" ? payload : JSON.stringify(payload);
  checkPayload(payloadJson);
  return checkLine(
    `{"protocol_version":${PROTOCOL_VERSION},"kind":"event","event_id":${q(eventId)},"request_id":${q(requestId)},"session_id":${q(sessionId)},"event":${q(event)},"payload":${payloadJson}}`,
  );
}

/** `","request_id":…,"payload":` — what follows a numbered `event_id` (`"ev-N`) in `encodeEvent`'s line. */
export function eventTail(requestId: string, sessionId: string | null, event: string): string {
  return `","request_id":${q(requestId)},"session_id":${q(sessionId)},"event":${q(event)},"payload":`;
}

/**
 * The line `encodeEvent("ev-" + n, …)` writes, from the `eventTail` of its request, session and event and the
 * compact payload JSON (checked as `encodeEvent` checks it): no JSON is encoded here.
 */
export function encodeNumberedEvent(n: number, tail: string, payloadJson: string): string {
  checkPayload(payloadJson);
  return checkLine(`{"protocol_version":${PROTOCOL_VERSION},"kind":"event","event_id":"ev-${n}${tail}${payloadJson}}`);
}
