/**
 * Bounds applied to every decoded inbound JSON message (backend frame, AHP message) before any
 * part of it is validated, reduced, stored or echoed. Contract: `inboundViolation` walks the value
 * iteratively (hostile nesting cannot exhaust the stack) and returns a fixed, input-free message
 * naming the broken bound, or null. `clip` bounds any peer-supplied text an error message quotes.
 */
/** Deepest container nesting accepted in one message (`{}` is depth 1). */
export const MAX_INBOUND_DEPTH = 64;

/**
 * Null, or why the message is refused. Only nesting is checked here: the message's byte size is
 * already bounded by its framing (16 MiB), which bounds items, fields and strings too, while
 * nesting is what makes recursive serializers and reducers overflow the stack. The walk visits
 * containers only, with an explicit stack, so the hot path (small flat frames) stays cheap.
 */
export function inboundViolation(value: unknown): string | null {
  if (value === null || typeof value !== "object") return null;
  const stack: object[] = [value];
  const depths: number[] = [1];
  while (stack.length > 0) {
    const v = stack.pop()!;
    const d = depths.pop()!;
    if (d > MAX_INBOUND_DEPTH) return `message nests deeper than ${MAX_INBOUND_DEPTH} levels`;
    if (Array.isArray(v)) {
      for (const e of v)
        if (e !== null && typeof e === "object") {
          stack.push(e as object);
          depths.push(d + 1);
        }
    } else {
      for (const k in v) {
        const e = (v as Record<string, unknown>)[k];
        if (e !== null && typeof e === "object") {
          stack.push(e);
          depths.push(d + 1);
        }
      }
    }
  }
  return null;
}

/**
 * The same bound checked on JSON text before it is parsed: brackets outside strings are the
 * containers of the value it would parse to. Null when the text nests no deeper than
 * MAX_INBOUND_DEPTH (malformed text is left for the parser to refuse).
 */
export function textNestingViolation(text: string): string | null {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_INBOUND_DEPTH) return `message nests deeper than ${MAX_INBOUND_DEPTH} levels`;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return null;
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
