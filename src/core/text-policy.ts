/**
 * The one text policy for anything a person may see of stored text (replay items, list titles, approval
 * summaries, host titles). Pure and deterministic.
 *
 * - `sanitizeText`: removes C0/C1 control characters except LF and TAB (CRLF/CR become LF), replaces lone
 *   surrogates with U+FFFD.
 * - `redactSecrets`: replaces credential-shaped substrings (API keys, bearer tokens, JWTs, private-key blocks,
 *   `password=`-style assignments) with `[REDACTED]`. Best effort: not a guarantee that arbitrary user-written
 *   secrets or paths cannot appear. The secret-shape table lives only here.
 * - `titleFrom`: the title policy — one line, whitespace collapsed, sanitized, redacted, at most 128 UTF-8 bytes;
 *   empty → null.
 */
import { truncateUtf8 } from "./utf8.js";

export const REDACTED = "[REDACTED]";
export const MAX_TITLE_BYTES = 128;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const CR_OR_CONTROL = /\r\n?|[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;
const nativeWellFormed = (String.prototype as { isWellFormed?: () => boolean }).isWellFormed;

/** True when `s` holds no lone surrogate (so it round-trips through UTF-8 and a strict JSON parser). */
export function wellFormed(s: string): boolean {
  if (nativeWellFormed) return nativeWellFormed.call(s);
  LONE_SURROGATE.lastIndex = 0;
  return !LONE_SURROGATE.test(s);
}

/**
 * `s` with every lone surrogate replaced by U+FFFD (`s` itself when it has none). Text a session keeps or sends on
 * must be Unicode text: the session store refuses anything else, and a strict JSON reader cannot parse a lone
 * surrogate escape. The runtime applies it where text enters a turn (prompts, model output, tool results).
 */
export function wellFormedText(s: string): string {
  return wellFormed(s) ? s : s.replace(LONE_SURROGATE, "\uFFFD");
}

/**
 * A JSON value whose strings (member names included) are all Unicode text: `v` itself when they are, else a copy
 * with each lone surrogate U+FFFD (`wellFormedText`). For decoded JSON (plain objects, arrays, primitives); iterative,
 * so deep nesting cannot exhaust the stack.
 */
export function wellFormedJson<T>(v: T): T {
  if (isWellFormedJson(v)) return v;
  const copy = (x: unknown): unknown => (typeof x === "string" ? wellFormedText(x) : typeof x !== "object" || x === null ? x : Array.isArray(x) ? new Array<unknown>(x.length) : {});
  const root = copy(v);
  const stack: Array<[from: unknown, to: unknown]> = [[v, root]];
  while (stack.length > 0) {
    const [from, to] = stack.pop()!;
    if (typeof from !== "object" || from === null) continue;
    for (const [k, e] of Object.entries(from)) {
      const c = copy(e);
      if (Array.isArray(to)) to[Number(k)] = c;
      else Object.defineProperty(to, wellFormedText(k), { value: c, enumerable: true, writable: true, configurable: true });
      stack.push([e, c]);
    }
  }
  return root as T;
}

/** True when every string of the JSON value `v`, member names included, is Unicode text (iterative walk). */
export function isWellFormedJson(v: unknown): boolean {
  const stack: unknown[] = [v];
  while (stack.length > 0) {
    const x = stack.pop();
    if (typeof x === "string") {
      if (!wellFormed(x)) return false;
    } else if (typeof x === "object" && x !== null) {
      for (const [k, e] of Object.entries(x)) {
        if (!wellFormed(k)) return false;
        stack.push(e);
      }
    }
  }
  return true;
}

export function sanitizeText(s: string): string {
  CR_OR_CONTROL.lastIndex = 0;
  const out = CR_OR_CONTROL.test(s) ? s.replace(CR_OR_CONTROL, (m) => (m.charCodeAt(0) === 13 ? "\n" : "")) : s;
  return wellFormed(out) ? out : out.replace(LONE_SURROGATE, "\uFFFD");
}

/**
 * The table of credential shapes, the one place they are listed. `token`: the whole token as it appears in text
 * (redacted by `redactSecrets`); `prefix`: how an identifier that starts like one looks (refused as an ID by
 * `looksSecret` consumers, e.g. catalog IDs). A null side does not apply.
 */
export const SECRET_SHAPES: ReadonlyArray<{ token: string | null; prefix: RegExp | null }> = [
  { token: String.raw`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`, prefix: null },
  { token: String.raw`\b(?:sk|pk|rk)-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}`, prefix: /^(?:sk|pk|rk)[-_]/i },
  { token: String.raw`\bgh[pousr]_[A-Za-z0-9]{20,}\b`, prefix: /^gh[pousr]_/i },
  { token: String.raw`\bgithub_pat_[A-Za-z0-9_]{20,}\b`, prefix: /^github_pat_/i },
  { token: String.raw`\bxox[abposr]-[A-Za-z0-9-]{10,}\b`, prefix: /^xox[abprs]-/i },
  { token: String.raw`\bA(?:KIA|SIA)[0-9A-Z]{16}\b`, prefix: /^AKIA[0-9A-Z]{8}/ },
  { token: String.raw`\bAIza[0-9A-Za-z_-]{35}\b`, prefix: /^AIza[0-9A-Za-z_-]{10}/ },
  { token: String.raw`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`, prefix: /^eyJ[A-Za-z0-9_-]{8}/ },
  { token: null, prefix: /^glpat-/i },
];

/**
 * Whether `name`, given where a variable's name belongs (a provider's `api_key_env`), looks like a key pasted there
 * instead: a credential's prefix, or a run of 24+ letters and digits mixing both. Such a "name" is never shown.
 */
export function looksLikeKey(name: string): boolean {
  if (SECRET_SHAPES.some((s) => s.prefix !== null && s.prefix.test(name))) return true;
  return name.split(/[^A-Za-z0-9]+/).some((seg) => seg.length >= 24 && /[A-Za-z]/.test(seg) && /[0-9]/.test(seg));
}

/** One pass for the token shapes that are replaced whole. */
const SECRET_TOKENS = new RegExp(
  SECRET_SHAPES.flatMap((s) => (s.token !== null ? [s.token] : [])).join("|"),
  "g",
);
/** Keeps the scheme/key name, redacts the value. */
const BEARER = /\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{12,}/gi;
const ASSIGNMENT =
  /\b((?:api[_-]?key|access[_-]?token|refresh[_-]?token|auth[_-]?token|client[_-]?secret|secret|password|passwd|token)["']?\s*[:=]\s*["']?)[^\s"',;]{8,}/gi;

/**
 * Literals every `SECRET_TOKENS` match contains (one of them), and every `BEARER` match (ASCII case-insensitive:
 * without the `u` flag, `i` folds no non-ASCII character onto an ASCII letter). Text with none of them cannot match,
 * so those passes are skipped: the large alternation is then never compiled, which on a process's first turn cost
 * more than the rest of the title (issue 19). Keep them in step with `SECRET_SHAPES` and `BEARER`.
 */
const TOKEN_HINT = /-----BEGIN|k-|_|xox|[KS]IA|AIza|eyJ/;
const BEARER_HINT = /b(?:earer|asic)|token/i;

export function redactSecrets(s: string): string {
  let out = TOKEN_HINT.test(s) ? s.replace(SECRET_TOKENS, REDACTED) : s;
  if (BEARER_HINT.test(out)) out = out.replace(BEARER, (_m, scheme: string) => `${scheme} ${REDACTED}`);
  // Every ASSIGNMENT match contains ":" or "=": a native substring search skips the regex pass on most text.
  if (out.includes(":") || out.includes("=")) out = out.replace(ASSIGNMENT, (_m, key: string) => `${key}${REDACTED}`);
  return out;
}

export function titleFrom(source: string | null): string | null {
  if (source === null) return null;
  // Bound the work before the regex passes: a title needs only the beginning.
  const head = source.length > 4096 ? source.slice(0, 4096) : source;
  const line = redactSecrets(sanitizeText(head).replace(/\s+/g, " ").trim());
  const t = truncateUtf8(line, MAX_TITLE_BYTES).trim();
  return t === "" ? null : t;
}

/**
 * A URL as it may be shown to the user or logged: a user name or password in it (`http://user:pass@host`, or a key
 * given as the user name) becomes `…@`, and a query string `?…`, since either can carry a credential. A string that
 * does not parse as a URL is shown with `redactSecrets` applied.
 */
export function urlForDisplay(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return redactSecrets(url);
  }
  const auth = u.username !== "" || u.password !== "" ? "…@" : "";
  return `${u.protocol}//${auth}${u.host}${u.pathname}${u.search !== "" ? "?…" : ""}`;
}
