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

/** Brace-expanded forms of a pattern at most (more: `couldContainMatch` answers yes for every directory). */
const MAX_EXPANSIONS = 256;

/** `p` with its braces expanded, or null past `MAX_EXPANSIONS` forms. */
function expandBraces(p: string, depth = 0): string[] | null {
  if (depth > MAX_BRACE_DEPTH) return null;
  for (let i = 0; i < p.length; i++) {
    if (p[i] === "\\") i++;
    else if (p[i] === "{") {
      const close = matchingBrace(p, i);
      const alts = close === -1 ? [] : splitAlternatives(p.slice(i + 1, close));
      if (alts.length < 2) continue;
      const out: string[] = [];
      for (const a of alts) {
        const forms = expandBraces(p.slice(0, i) + a + p.slice(close + 1), depth + 1);
        if (forms === null || out.length + forms.length > MAX_EXPANSIONS) return null;
        out.push(...forms);
      }
      return out;
    }
  }
  return [p];
}

/**
 * A test of whether a match of `pattern` could lie under the directory `dir` (relative, `/`-separated): whether
 * `dir` starts the pattern's literal prefix (or the prefix starts it) and `dir`'s segments can be the first segments of
 * a matching path, with at least one more after them. It never says
 * no to a directory a match could be under; a pattern it cannot judge by segments (a `/` inside a class or escaped,
 * too many brace forms) gets yes for every directory.
 */
export function couldContainMatch(pattern: string): (dir: string) => boolean {
  const yes = (): boolean => true;
  if (/\\\//.test(pattern) || /\[[^\]]*\//.test(pattern)) return yes;
  const forms = expandBraces(pattern);
  if (forms === null) return yes;
  // A segment with `**` in it spans any number of directories here (null): inside braces an alternative starting
  // or ending with `**` can do so (`x{**,y}/z` matches `xa/b/z`).
  const segmented = forms.map((f) => f.split("/").map((s) => (s.includes("**") ? null : compileGlob(s))));
  // Every match starts with the pattern's literal prefix (up to its first special character).
  const literal = /^[^*?[{\\]*/.exec(pattern)![0];
  return (dir) => {
    const under = `${dir}/`;
    if (!(under.startsWith(literal) || literal.startsWith(under))) return false;
    const parts = dir.split("/");
    return segmented.some((segs) => {
      // Positions in `segs` reachable after the parts so far; `**` (null) may match no part.
      const close = (ps: Set<number>): Set<number> => {
        for (const p of ps) if (p < segs.length && segs[p] === null) ps.add(p + 1);
        return ps;
      };
      let at = close(new Set([0]));
      for (const part of parts) {
        const next = new Set<number>();
        for (const p of at) {
          const s = segs[p];
          if (s === null) next.add(p);
          else if (s !== undefined && s.test(part)) next.add(p + 1);
        }
        at = close(next);
        if (at.size === 0) return false;
      }
      return [...at].some((p) => p < segs.length);
    });
  };
}
