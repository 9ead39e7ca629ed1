/**
 * Text projection for session replay: the text policy itself (sanitize, redact, title) is `core/text-policy.ts`,
 * re-exported here; `projectText` splits the policed text into wire parts.
 */
export { REDACTED, MAX_TITLE_BYTES, sanitizeText, redactSecrets, titleFrom } from "../../core/text-policy.js";
import { redactSecrets, sanitizeText } from "../../core/text-policy.js";

export const MAX_PART_BYTES = 2048;

/** Sanitized, redacted text split at UTF-8 boundaries into parts of at most 2,048 bytes (at least one part). */
export function projectText(s: string): string[] {
  return splitParts(redactSecrets(sanitizeText(s)), MAX_PART_BYTES);
}

/**
 * Splits well-formed `s` into pieces of at most `maxBytes` UTF-8 bytes, never inside a character (same result as
 * core `splitUtf8` for well-formed input, without a per-character loop). The empty string yields one empty piece.
 */
export function splitParts(s: string, maxBytes: number): string[] {
  if (s.length * 3 <= maxBytes) return [s];
  const buf = Buffer.from(s, "utf8");
  if (buf.length <= maxBytes) return [s];
  const out: string[] = [];
  let pos = 0;
  while (pos < buf.length) {
    let end = Math.min(pos + maxBytes, buf.length);
    while (end < buf.length && ((buf[end] as number) & 0xc0) === 0x80) end--;
    out.push(buf.toString("utf8", pos, end));
    pos = end;
  }
  return out;
}
