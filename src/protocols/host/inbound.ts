/**
 * Bounds applied to every decoded inbound JSON message (backend frame, AHP message) before any
 * part of it is validated, reduced, stored or echoed. Contract: `inboundViolation` walks the value
 * iteratively (hostile nesting cannot exhaust the stack) and returns a fixed, input-free message
 * naming the broken bound, or null. The byte size of a message is bounded earlier by its framing
 * (16 MiB); these bounds are what the framing cannot see. `clip` bounds any peer-supplied text
 * an error message quotes.
 */
import { checkJsonBounds } from "../../core/json-bounds.js";
import type { JsonBounds } from "../../core/limits.js";

/** Deepest container nesting accepted in one message (`{}` is depth 1). */
export const MAX_INBOUND_DEPTH = 64;

export const INBOUND_JSON_BOUNDS: JsonBounds = Object.freeze({
  maxDepth: MAX_INBOUND_DEPTH,
  maxArrayItems: 1_000_000,
  maxObjectFields: 100_000,
  maxStringBytes: 16 * 1024 * 1024,
});

export function inboundViolation(value: unknown): string | null {
  const v = checkJsonBounds(value, INBOUND_JSON_BOUNDS);
  if (v === null) return null;
  if (v === "depth") return `message nests deeper than ${MAX_INBOUND_DEPTH} levels`;
  if (v === "array_items") return `message has an array of more than ${INBOUND_JSON_BOUNDS.maxArrayItems} items`;
  if (v === "object_fields") return `message has an object of more than ${INBOUND_JSON_BOUNDS.maxObjectFields} fields`;
  return "message has an oversized string";
}

/** Longest piece of peer input an error message may quote. */
export const MAX_ECHO = 64;

/** `JSON.stringify(v)` cut to MAX_ECHO characters ("undefined" for a value JSON cannot show). */
export function clip(v: unknown): string {
  let s: string | undefined;
  try {
    s = typeof v === "string" ? JSON.stringify(v.slice(0, MAX_ECHO + 1)) : JSON.stringify(v);
  } catch {
    s = undefined;
  }
  if (s === undefined) return "undefined";
  return s.length > MAX_ECHO ? `${s.slice(0, MAX_ECHO)}…` : s;
}
