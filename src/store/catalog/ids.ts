/**
 * Selection-ID and display-label sanitizing for catalogs and configuration.
 * Contracts:
 * - `isSafeId`: nonempty, ≤ 256 ASCII bytes, only `[A-Za-z0-9-._/:]`, and not secret-looking.
 *   Unsafe IDs are omitted from catalogs and rejected in selections.
 * - `sanitizeLabel`: control/format/bidi characters removed, whitespace collapsed, ≤ 128 UTF-8
 *   bytes (cut on a character boundary); an empty or secret-looking label falls back to the ID
 *   bounded to 128 bytes.
 */

import { SECRET_SHAPES } from "../../core/text-policy.js";

export const MAX_ID_BYTES = 256;
export const MAX_LABEL_BYTES = 128;

const ID_CHARSET = /^[A-Za-z0-9._/:-]+$/;

/**
 * Well-known credential shapes (the core table's prefixes): vendor key prefixes, JWTs. One alternation per flag set
 * (matching any of them is matching one of the prefixes): a process's first check compiles two regexes, not nine
 * (~0.1 ms of a first turn's provider list, docs/runtime.md).
 */
const SECRET_PREFIXES: readonly RegExp[] = (() => {
  const byFlags = new Map<string, string[]>();
  for (const { prefix } of SECRET_SHAPES) {
    if (prefix === null) continue;
    const flags = prefix.flags.replace(/[gy]/g, "");
    byFlags.set(flags, [...(byFlags.get(flags) ?? []), `(?:${prefix.source})`]);
  }
  return [...byFlags].map(([flags, sources]) => new RegExp(sources.join("|"), flags));
})();
const SECRET_WORDS = /(secret|passw|api[-_.]?key|bearer|token|credential|private[-_.]?key)/i;

/**
 * Heuristic: a value looks like a secret when it has a credential prefix or keyword, or contains
 * a long (≥ 32 characters) unbroken run mixing letters and digits — the shape of keys and tokens.
 * Segments are split on `/ : . -` (not `_`), so names like `q4_K_M` or dates survive.
 */
export function looksSecret(value: string): boolean {
  if (SECRET_WORDS.test(value)) return true;
  for (const seg of value.split(/[/:.\s-]+/)) {
    if (SECRET_PREFIXES.some((re) => re.test(seg))) return true;
    if (seg.length >= 32 && /[A-Za-z]/.test(seg) && /[0-9]/.test(seg)) return true;
  }
  return SECRET_PREFIXES.some((re) => re.test(value));
}

export function isSafeId(id: unknown): id is string {
  return (
    typeof id === "string" &&
    id.length > 0 &&
    id.length <= MAX_ID_BYTES && // charset is ASCII, so length == bytes once the charset holds
    ID_CHARSET.test(id) &&
    !looksSecret(id)
  );
}

/** Cuts `s` to at most `max` UTF-8 bytes without splitting a code point. */
export function truncateUtf8(s: string, max: number): string {
  if (Buffer.byteLength(s, "utf8") <= max) return s;
  let out = "";
  let bytes = 0;
  for (const ch of s) {
    const n = Buffer.byteLength(ch, "utf8");
    if (bytes + n > max) break;
    out += ch;
    bytes += n;
  }
  return out;
}

// C0/C1 controls, DEL, zero-width and bidi controls, line/paragraph separators, BOM.
const UNSAFE_DISPLAY = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]/g;

export function sanitizeLabel(label: unknown, fallbackId: string): string {
  if (typeof label === "string") {
    const cleaned = label.normalize("NFC").replace(UNSAFE_DISPLAY, " ").replace(/\s+/g, " ").trim();
    if (cleaned.length > 0 && !looksSecret(cleaned)) return truncateUtf8(cleaned, MAX_LABEL_BYTES);
  }
  return truncateUtf8(fallbackId, MAX_LABEL_BYTES);
}
