/**
 * Lossless JSON for iLink: integer literals longer than 15 digits (uint64 message IDs can exceed 2^53) are turned
 * into strings before `JSON.parse`, so `7448678501208393000` stays exactly that. Strings are left untouched.
 */
export function parseLossless(text: string): unknown {
  let out = "";
  let last = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // skip a string literal
      i++;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i += 2;
        else if (d === 0x22) {
          i++;
          break;
        } else i++;
      }
      continue;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const start = i;
      i++;
      while (i < n && text.charCodeAt(i) >= 0x30 && text.charCodeAt(i) <= 0x39) i++;
      const next = text[i];
      const isInteger = next !== "." && next !== "e" && next !== "E";
      const digits = i - start - (c === 0x2d ? 1 : 0);
      if (isInteger && digits > 15) {
        out += text.slice(last, start) + '"' + text.slice(start, i) + '"';
        last = i;
      }
      continue;
    }
    i++;
  }
  return JSON.parse(last === 0 ? text : out + text.slice(last)) as unknown;
}

/**
 * A platform ID as an exact string: strings as they are, safe non-negative integers as decimals. Length is the
 * bridge's and the delivery state's business (common/ids.ts): an over-long ID is logged and remembered by digest.
 */
export function exactId(v: unknown): string | null {
  if (typeof v === "string") return v !== "" ? v : null;
  if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) return String(v);
  return null;
}
