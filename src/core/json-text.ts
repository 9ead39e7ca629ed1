/**
 * Text out of untyped JSON members (wire frames, JSONL records): a string as it is, a number or
 * boolean in its JSON spelling, anything else (absent, null, an object) as `fallback` — never
 * `[object Object]`.
 */
export function textOf(v: unknown, fallback = ""): string {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  return fallback;
}
