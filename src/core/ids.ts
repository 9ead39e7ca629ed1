/** Correlation-ID safety checks. Pure; random IDs come from store/random.ts. */
import { utf8Length } from "./utf8.js";

/**
 * A correlation ID is "safe" to echo when it is a nonempty string within `maxBytes` UTF-8 bytes
 * that contains no control characters. Safe IDs are echoed in error responses; others become null.
 */
export function isSafeId(v: unknown, maxBytes: number): v is string {
  if (typeof v !== "string" || v.length === 0 || v.length > maxBytes) return false;
  if (utf8Length(v) > maxBytes) return false;
  return !/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(v);
}
