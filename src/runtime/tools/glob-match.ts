/**
 * A small glob matcher (Node 20 has no `fs.glob`). Compiles a pattern to a RegExp matched
 * against a whole `/`-separated relative path. Supported: `*` (any run within one segment),
 * `?` (one character within a segment), `**` as a whole segment (zero or more segments),
 * `{a,b}` alternatives (nestable), `[abc]` / `[!abc]` / `[a-z]` classes, `\x` escapes.
 * `*` also matches names starting with a dot. No negation patterns.
 */

/** Longest accepted pattern; longer ones throw (callers report `invalid_arguments`). */
export const MAX_GLOB_PATTERN_CHARS = 1024;
const MAX_BRACE_DEPTH = 8;

export class GlobSyntaxError extends Error {}

export function compileGlob(pattern: string): RegExp {
  if (pattern.length > MAX_GLOB_PATTERN_CHARS) throw new GlobSyntaxError(`glob pattern longer than ${MAX_GLOB_PATTERN_CHARS} characters`);
  return new RegExp(`^${toSource(pattern, 0)}$`, "s");
}

/** True when `path` (relative, `/`-separated) matches `pattern`. */
export function globMatch(pattern: string, path: string): boolean {
  return compileGlob(pattern).test(path);
}

function escapeRe(c: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(c) ? `\\${c}` : c;
}

/** Index of the `}` closing the `{` at `open`, or -1. */
function matchingBrace(p: string, open: number): number {
  let depth = 0;
  for (let i = open; i < p.length; i++) {
    const c = p[i];
    if (c === "\\") i++;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return i;
  }
  return -1;
}

/** Splits a brace body on its top-level commas. */
function splitAlternatives(body: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === "\\") i++;
    else if (c === "{") depth++;
    else if (c === "}") depth--;
    else if (c === "," && depth === 0) {
      out.push(body.slice(start, i));
      start = i + 1;
    }
  }
  out.push(body.slice(start));
  return out;
}

function toSource(p: string, depth: number): string {
  if (depth > MAX_BRACE_DEPTH) throw new GlobSyntaxError("glob braces nested too deeply");
  let re = "";
  for (let i = 0; i < p.length; i++) {
    const c = p[i] as string;
    if (c === "*") {
      const segStart = i === 0 || p[i - 1] === "/";
      if (p[i + 1] === "*" && segStart && (i + 2 === p.length || p[i + 2] === "/")) {
        if (i + 2 === p.length) {
          re += ".*";
          i += 1;
        } else {
          re += "(?:[^/]*/)*";
          i += 2; // also consumes the following '/'
        }
      } else {
        while (p[i + 1] === "*") i++; // a non-segment `**` acts like `*`
        re += "[^/]*";
      }
    } else if (c === "?") {
      re += "[^/]";
    } else if (c === "\\") {
      const next = p[i + 1];
      if (next !== undefined) {
        re += escapeRe(next);
        i++;
      } else re += "\\\\";
    } else if (c === "[") {
      const close = p.indexOf("]", i + 2);
      if (close === -1) {
        re += "\\[";
      } else {
        let body = p.slice(i + 1, close);
        const negate = body.startsWith("!") || body.startsWith("^");
        if (negate) body = body.slice(1);
        const cls = body.replace(/[\\\]^]/g, (m) => `\\${m}`);
        re += negate ? `(?!/)[^${cls}]` : `[${cls}]`;
        i = close;
      }
    } else if (c === "{") {
      const close = matchingBrace(p, i);
      const alts = close === -1 ? [] : splitAlternatives(p.slice(i + 1, close));
      if (alts.length < 2) {
        re += "\\{";
      } else {
        re += `(?:${alts.map((a) => toSource(a, depth + 1)).join("|")})`;
        i = close;
      }
    } else {
      re += escapeRe(c);
    }
  }
  return re;
}
