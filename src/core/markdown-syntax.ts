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
  /** The spaces it is indented by (after a quote's `>`): as many are removed from each line of its code. */
  indent: number;
}

/** A fence that is open, and where it opened (`FenceFinder`). */
export interface OpenFence extends Fence {
  /** In a list item: the item's content column (a closing fence may be indented 3 more); 0 outside any item. */
  nest: number;
  /** In a block quote: its lines are quoted lines (`>`), and a line that is not one ends the block. */
  quoted: boolean;
}

/** How many spaces `line` starts with, up to `max + 1` (more than `max`: too many). Tabs are not indentation. */
function spaces(line: string, max: number): number {
  let i = 0;
  while (i <= max && line.charCodeAt(i) === 32) i++;
  return i;
}

/** The run of `line[at]` from `at`: its end. */
function runEnd(line: string, at: number): number {
  const c = line.charCodeAt(at);
  let k = at;
  while (line.charCodeAt(k) === c) k++;
  return k;
}

/**
 * The code fence that `line` (without its line ending) opens, or null: up to `maxIndent` spaces of indentation (3
 * at the top level: a tab or a fourth space makes it indented text), 3 or more backticks or tildes, then the info
 * string, in which a backtick fence allows no backtick (`` ``` a`b `` is a paragraph with a code span). Linear in
 * the line.
 */
export function fenceOpening(line: string, maxIndent = 3): Fence | null {
  const at = spaces(line, maxIndent);
  if (at > maxIndent) return null;
  const char = line[at];
  if (char !== "`" && char !== "~") return null;
  const end = runEnd(line, at);
  if (end - at < 3) return null;
  const info = line.slice(end).trim();
  if (char === "`" && info.includes("`")) return null;
  return { char, length: end - at, info, indent: at };
}

/** Where a quoted line's text starts (after its `>` and one space), or -1 for a line that is not quoted. */
export function quoteStart(line: string): number {
  const m = QUOTE_PREFIX.exec(line);
  return m === null ? -1 : m[0].length;
}
const QUOTE_PREFIX = /^\s*> ?/;

/**
 * Whether `line` closes `fence`: a run of the fence's character at least as long as the fence's, indented 3 spaces
 * at most (in a list item: the item's content column and 3 more, at most; in a quote: after its `>`), and nothing
 * after it but spaces and tabs. So ```` ```js ```` (an info string), three backticks in a fence of four, and `~~~`
 * in a backtick fence are code, as in CommonMark. A quoted fence's line that is not quoted ends the block too:
 * `FenceFinder` callers test that first (`quoteStart`), since that line is then read again outside the block.
 */
export function closesFence(line: string, fence: Fence & Partial<OpenFence>): boolean {
  if (fence.quoted) {
    const q = quoteStart(line);
    if (q === -1) return false;
    line = line.slice(q);
  }
  const max = (fence.nest ?? 0) + 3;
  const at = spaces(line, max);
  if (at > max || line[at] !== fence.char) return false;
  const end = runEnd(line, at);
  return end - at >= fence.length && /^[ \t]*$/.test(line.slice(end));
}

/** A line of `fence`'s code: without its quote's `>` and up to as many leading spaces as the opening fence had. */
export function fenceCode(line: string, fence: OpenFence): string {
  if (fence.quoted) {
    const q = quoteStart(line);
    if (q !== -1) line = line.slice(q);
  }
  return fence.indent === 0 ? line : line.slice(Math.min(fence.indent, spaces(line, fence.indent)));
}

/** `fenceCode` of each line of `text` (lines ending in LF), as one text. */
export function fenceCodeText(text: string, fence: OpenFence): string {
  if (fence.indent === 0 && !fence.quoted) return text;
  return text
    .split("\n")
    .map((l) => fenceCode(l, fence))
    .join("\n");
}

/** The content columns of the list items a line may still be in, innermost first; never changed, so shared by copies. */
interface Items {
  col: number;
  outer: Items | null;
}
const ITEM = /^(\s*)([-*+]|\d+[.)])(\s+)/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;

/**
 * Finds the fences that open outside a fenced block, fed every such line in order (never the lines of a block), as
 * both renderers read them: a pragmatic subset of CommonMark's containers.
 * - A list item (`-`, `*`, `+`, `1.`, `1)` and 1 to 4 spaces) has a content column: where its text starts (with 5 or
 *   more spaces, one column after its marker). Items are kept as a stack by column: a later item closes the items
 *   its marker is not inside; any other line that is not blank closes the items it is indented less than (a blank
 *   line closes none). A fence indented from the innermost open item's content column up to 3 spaces more opens
 *   in that item (more is indented text); with no item open, up to 3 spaces.
 * - A quoted line (`>` after any indentation, then one optional space) whose rest opens a fence (by the top-level
 *   rule) opens a quoted fence. One level of quote: `> > ` holds no fence.
 * Each line costs its length (its indentation is counted once), and each item is pushed and popped once: linear in
 * the text whatever its shape. The state is one pointer, so `copy` is free (the web UI copies it every frame).
 */
export class FenceFinder {
  private items: Items | null = null;

  copy(): FenceFinder {
    const f = new FenceFinder();
    f.items = this.items;
    return f;
  }

  /** The fence `line` opens, or null; notes the list items it opens or closes. */
  opens(line: string): OpenFence | null {
    const q = quoteStart(line);
    if (/^\s*$/.test(line)) return null;
    const ind = spaces(line, Infinity);
    const item = q === -1 ? ITEM.exec(line) : null;
    if (item && !RULE.test(line)) {
      this.close(item[1]!.length);
      const gap = item[3]!;
      const rest = line.length > item[0].length;
      const col = item[1]!.length + item[2]!.length + (rest && gap.length <= 4 && /^ +$/.test(gap) ? gap.length : 1);
      this.items = { col, outer: this.items };
      return null;
    }
    this.close(ind);
    if (q !== -1) {
      const f = fenceOpening(line.slice(q));
      return f && { ...f, nest: 0, quoted: true };
    }
    const nest = this.items?.col ?? 0;
    const f = fenceOpening(line, nest + 3);
    return f && { ...f, nest, quoted: false };
  }

  /** Closes the items whose content is indented more than `indent`. */
  private close(indent: number): void {
    while (this.items !== null && this.items.col > indent) this.items = this.items.outer;
  }
}
