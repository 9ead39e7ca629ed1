/**
 * What `JSON.parse` lets through that a strict decoder (serde_json, I-JSON / RFC 7493) refuses, found in one pass
 * over a text `JSON.parse` already accepted:
 * - a string or member name holding an unpaired surrogate escape (`"\ud800"`): not Unicode text, so it cannot be
 *   stored as UTF-8 or echoed to a strict reader;
 * - a member name repeated within one object (compared after unescaping): `JSON.parse` keeps the last value, another
 *   reader may keep the first.
 * Pure and iterative (hostile nesting cannot exhaust the stack); linear in the text.
 */
export interface JsonStrictness {
  /** Some string or member name holds an unpaired surrogate. */
  loneSurrogate: boolean;
  /** Member names repeated in the top-level object (empty when none). */
  topRepeated: ReadonlySet<string>;
  /** A member name is repeated in some nested object. */
  nestedRepeated: boolean;
}

const NONE: ReadonlySet<string> = new Set();
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const QUOTE = 0x22;

/** `text` must be a JSON text `JSON.parse` accepted (the scan trusts its structure). */
export function checkJsonStrictness(text: string): JsonStrictness {
  // Per open container: its member names (objects) or null (arrays), and whether the next string is a name.
  const names: Array<Set<string> | null> = [];
  let expectName = false;
  let loneSurrogate = false;
  let topRepeated: Set<string> | null = null;
  let nestedRepeated = false;
  let backslash = text.indexOf("\\");
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // The string runs to the first quote not escaped; escapes are jumped over whole.
      // Both searches only move forward (a backslash position is kept across strings), so the scan stays linear.
      let j = i + 1;
      let escaped = false;
      let q = text.indexOf('"', j);
      for (;;) {
        if (backslash !== -1 && backslash < j) backslash = text.indexOf("\\", j);
        if (backslash === -1 || backslash > q) {
          j = q;
          break;
        }
        escaped = true;
        j = backslash + 2;
        if (q < j) q = text.indexOf('"', j);
      }
      const body = text.slice(i + 1, j);
      const value = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : body;
      if (escaped && SURROGATE_ESCAPE.test(body) && LONE_SURROGATE.test(value)) loneSurrogate = true;
      const own = names[names.length - 1];
      if (expectName && own !== undefined && own !== null) {
        if (own.has(value)) {
          if (names.length === 1) (topRepeated ??= new Set()).add(value);
          else nestedRepeated = true;
        } else own.add(value);
        expectName = false;
      }
      i = j;
    } else if (c === 0x7b /* { */) {
      names.push(new Set());
      expectName = true;
    } else if (c === 0x5b /* [ */) {
      names.push(null);
      expectName = false;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      names.pop();
      expectName = false;
    } else if (c === 0x2c /* , */) expectName = names[names.length - 1] !== null;
  }
  return { loneSurrogate, topRepeated: topRepeated ?? NONE, nestedRepeated };
}
