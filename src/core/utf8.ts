/** UTF-8 byte helpers. Pure; no I/O. */
import { isUtf8 } from "node:buffer";

/** UTF-8 byte length of a JS string without allocating a Buffer (lone surrogates count as U+FFFD, 3 bytes). */
export function utf8Length(s: string): number {
  let n = s.length;
  // Fast path: ASCII strings are the common case.
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 2; // 2 UTF-16 units -> 4 bytes
        i++;
      } else n += 2;
    } else n += 2;
  }
  return n;
}

/**
 * Splits `s` into consecutive pieces of at most `maxBytes` UTF-8 bytes each, never inside a character.
 * The empty string yields one empty piece.
 */
export function splitUtf8(s: string, maxBytes: number): string[] {
  if (maxBytes < 4) throw new RangeError("maxBytes must be at least 4");
  const out: string[] = [];
  let start = 0;
  let bytes = 0;
  let i = 0;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    let units = 1;
    let b: number;
    if (c < 0x80) b = 1;
    else if (c < 0x800) b = 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      b = 4;
      units = 2;
    } else b = 3;
    if (bytes + b > maxBytes) {
      out.push(s.slice(start, i));
      start = i;
      bytes = 0;
    }
    bytes += b;
    i += units;
  }
  out.push(s.slice(start));
  return out;
}

/** Truncates to at most `maxBytes` UTF-8 bytes without splitting a character. */
export function truncateUtf8(s: string, maxBytes: number): string {
  if (utf8Length(s) <= maxBytes) return s;
  return splitUtf8(s, Math.max(4, maxBytes))[0] ?? "";
}

/**
 * The offset of the first byte of `b` that does not start a valid UTF-8 character (an overlong form, a surrogate, a
 * bad or missing continuation byte), or -1 when all of `b` is UTF-8.
 */
export function firstInvalidUtf8(b: Uint8Array): number {
  if (isUtf8(b)) return -1;
  for (let i = 0; i < b.length; ) {
    const c = b[i]!;
    const n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    // isUtf8 of the one character refuses overlong forms, surrogates and bad continuation bytes.
    if (n === 0 || i + n > b.length || !isUtf8(b.subarray(i, i + n))) return i;
    i += n;
  }
  return -1;
}

/**
 * The largest `e ≤ n` such that `b[0, e)` does not end inside a multi-byte character (a lead byte whose continuation
 * bytes are not all there yet). Invalid bytes are not judged: they end where they are.
 */
export function completeUtf8End(b: Uint8Array, n: number = b.length): number {
  for (let i = n - 1; i >= 0 && i >= n - 3; i--) {
    const c = b[i]!;
    if ((c & 0xc0) === 0x80) continue;
    const len = c >= 0xf8 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return i + len > n ? i : n;
  }
  return n;
}
