/**
 * Markdown and code syntax shared by the terminal renderer (`cli/chat/markdown.ts`) and the web UI's
 * (`ui/src/markdown.tsx`), written so that no input makes them slow. Pure; no I/O.
 *
 * Why: the text they render is the model's, so an attacker's (a prompt-injected model quoting a hostile file).
 * Regular expressions such as `/\*[\s\S]*?\*\/` or `"(?:[^"\\]|\\.)*"` rescan the rest of the text from every
 * opening delimiter that is never closed, so 120 kB of `/* ` took 2 s to highlight and 160 kB of `[a](` 10 s to
 * render, once per frame in the browser while an answer streams. Here every scan is linear:
 * - `codeTokens` remembers where a failed string scan stopped: a later opening quote before that point was
 *   inside an escape of the failed scan (`\"`), continues exactly as it did, and so fails at the same point. A
 *   block comment with no closing star-slash after it means none after any later opening either.
 * - `LINK` keeps link text free of brackets and URL parentheses balanced one level deep, so the scans that start
 *   at successive `[` cover disjoint text. (This is also what CommonMark renders for `[a [b](u)`: the link is
 *   `[b](u)`; and a URL such as `…/Foo_(bar)` keeps its closing parenthesis.)
 */

/** A Markdown link, `[text](url)`: groups 1 (text) and 2 (url). Linear to match; see the module note. */
export const LINK = String.raw`\[([^\[\]\n]+)\]\(((?:[^()\s]|\([^()\s]*\))+)\)`;

/**
 * The inline spans of the web UI's renderer, in priority order: code (1), link (2, 3), `**bold**` (4),
 * `__bold__` (5), `*em*` (6), `_em_` (7).
 */
export const INLINE_SPANS = String.raw`\x60([^\x60\n]+)\x60|` + LINK + String.raw`|\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\n]+)\*|\b_([^_\n]+)_\b`;

/** What a token of code is. A `word` is an identifier, for the caller to compare with its keywords. */
export type CodeTokenKind = "comment" | "string" | "number" | "word" | "plain";

export interface CodeToken {
  kind: CodeTokenKind;
  start: number;
  /** Exclusive. */
  end: number;
}

/** Which constructs a language has, as the renderers tell them apart. */
export interface CodeDialect {
  /**
   * `#` to the end of the line: a comment; text passed over without a class (`plain`: a hash in a language
   * where it is not a comment, so what follows it on the line is not highlighted either); or an ordinary character.
   */
  hash: "comment" | "plain" | "none";
  /** `// …` line comments and block comments (slash-star to star-slash). */
  slash: boolean;
  /** Backtick strings (template literals); they may span lines. */
  backtick: boolean;
  /** A number: a sticky pattern tried where a digit follows a non-word character (or starts the text). */
  number: RegExp;
  /** An identifier: a sticky pattern tried at every other position. */
  word: RegExp;
}

const isWordChar = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
const NL = 10;
const BACKSLASH = 92;

/**
 * The tokens of `code` (comments, strings, numbers, words), in order, without overlaps; the text between them
 * is plain. At each position the first construct that matches there wins, in the order comment, string, number,
 * word. Strings are `"…"` and `'…'` on one line and backtick strings over lines, with backslash escapes (a
 * backslash before a line break ends a string unclosed); an unclosed string or block comment is no token (its
 * opening character is plain). Time linear in `code.length`.
 */
export function codeTokens(code: string, d: CodeDialect): CodeToken[] {
  const out: CodeToken[] = [];
  const n = code.length;
  // Where the last failed scan of each quote stopped (see the module note), and the next `*/` (or -1: none).
  const deadUntil: Record<string, number> = { '"': -1, "'": -1, "`": -1 };
  let close = -2;
  const lineEnd = (from: number): number => {
    const k = code.indexOf("\n", from);
    return k === -1 ? n : k;
  };
  /** The end of the string opened at `i`, or the negated position where it failed. */
  const scanString = (i: number, quote: number, oneLine: boolean): number => {
    let k = i + 1;
    while (k < n) {
      const c = code.charCodeAt(k);
      if (c === quote) return k + 1;
      if (c === BACKSLASH) {
        if (k + 1 >= n || code.charCodeAt(k + 1) === NL) return -k;
        k += 2;
      } else if (c === NL && oneLine) return -k;
      else k++;
    }
    return -n;
  };
  let i = 0;
  while (i < n) {
    const c = code[i]!;
    let end = -1;
    let kind: CodeTokenKind = "comment";
    if (c === "#" && d.hash !== "none") {
      end = lineEnd(i);
      kind = d.hash === "comment" ? "comment" : "plain";
    } else if (c === "/" && d.slash && code[i + 1] === "/") end = lineEnd(i);
    else if (c === "/" && d.slash && code[i + 1] === "*") {
      if (close !== -1 && close < i + 2) close = code.indexOf("*/", i + 2);
      if (close !== -1) end = close + 2;
    }
    if (end === -1 && (c === '"' || c === "'" || (c === "`" && d.backtick)) && i >= deadUntil[c]!) {
      const r = scanString(i, c.charCodeAt(0), c !== "`");
      if (r > 0) {
        end = r;
        kind = "string";
      } else deadUntil[c] = -r;
    }
    if (end === -1 && c >= "0" && c <= "9" && (i === 0 || !isWordChar(code.charCodeAt(i - 1)))) {
      d.number.lastIndex = i;
      if (d.number.test(code)) {
        end = d.number.lastIndex;
        kind = "number";
      }
    }
    if (end === -1) {
      d.word.lastIndex = i;
      if (d.word.test(code) && d.word.lastIndex > i) {
        end = d.word.lastIndex;
        kind = "word";
      }
    }
    if (end === -1) {
      i++;
      continue;
    }
    out.push({ kind, start: i, end });
    i = end;
  }
  return out;
}

/** A code fence as CommonMark reads it: its character, how many of them, and its info string (trimmed). */
export interface Fence {
  char: "`" | "~";
  length: number;
  info: string;
}

/** How many spaces `line` starts with, if 3 at most (CommonMark's indentation of a fence); -1 for 4 or more. */
function fenceIndent(line: string): number {
  let i = 0;
  while (i < 4 && line.charCodeAt(i) === 32) i++;
  return i === 4 ? -1 : i;
}

/** The run of `line[at]` from `at`: its end. */
function runEnd(line: string, at: number): number {
  const c = line.charCodeAt(at);
  let k = at;
  while (line.charCodeAt(k) === c) k++;
  return k;
}

/**
 * The code fence that `line` (without its line ending) opens, or null: up to 3 spaces of indentation (a tab or a
 * fourth space makes it indented text), 3 or more backticks or tildes, then the info string, in which a backtick
 * fence allows no backtick (`` ``` a`b `` is a paragraph with a code span). Linear in the line.
 */
export function fenceOpening(line: string): Fence | null {
  const at = fenceIndent(line);
  if (at === -1) return null;
  const char = line[at];
  if (char !== "`" && char !== "~") return null;
  const end = runEnd(line, at);
  if (end - at < 3) return null;
  const info = line.slice(end).trim();
  if (char === "`" && info.includes("`")) return null;
  return { char, length: end - at, info };
}

/**
 * Whether `line` closes `fence`: up to 3 spaces of indentation, a run of the fence's character at least as long as
 * the fence's, and nothing after it but spaces and tabs. So ```` ```js ```` (an info string), three backticks in a
 * fence of four, and `~~~` in a backtick fence are code, as in CommonMark.
 */
export function closesFence(line: string, fence: Fence): boolean {
  const at = fenceIndent(line);
  if (at === -1 || line[at] !== fence.char) return false;
  const end = runEnd(line, at);
  return end - at >= fence.length && /^[ \t]*$/.test(line.slice(end));
}
