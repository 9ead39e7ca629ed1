/**
 * A small markdown renderer for the terminal (pure; no I/O). Line-oriented so it can render a stream:
 * `MarkdownStream.push(line)` returns the rendered lines that are final (a table is held until its last row).
 * Handles ATX headings, emphasis (`**bold**`, `*em*`/`_em_`), `inline code`, links, bullet and numbered lists,
 * block quotes, horizontal rules, fenced code blocks with keyword/string/comment/number highlighting (also in list
 * items and quotes: `FenceFinder`), and pipe tables (aligned columns). With `color` false the structure stays (bullets, aligned tables, indented code) and
 * the markers go.
 * The text is the model's, so possibly hostile: a CRLF, and a lone CR, end a line (a CR written raw would move the
 * cursor back over what the line showed), and every other terminal control in a line is shown (`terminalSafe`)
 * before the line is parsed, so the only controls written are the renderer's own styling (SGR).
 */
import { shownLink } from "./md-link.js";
import { terminalSafe } from "../terminal-safe.js";
import { closesFence, codeTokens, fenceCode, FenceFinder, LINK, quoteStart, type CodeDialect, type OpenFence } from "../../core/markdown-syntax.js";

const ESC = "\x1b[";
const LINK_G = new RegExp(LINK, "g");
/** A bare URL: no controls (the styling's ESC, a placeholder), not ending in punctuation or an emphasis marker. */
const BARE_URL = /https?:\/\/[^\s<>\x00-\x1f]*[^\s<>\x00-\x1f*_~.,:;!?'")\]]/g;
const NUMBER = /\d+(?:\.\d+)?\b/y;
const WORD = /[A-Za-z_]\w*/y;
/** Languages with `#` comments, and the others (slash comments, backtick strings). */
const HASH_DIALECT: CodeDialect = { hash: "comment", slash: false, backtick: false, number: NUMBER, word: WORD };
const C_DIALECT: CodeDialect = { hash: "none", slash: true, backtick: true, number: NUMBER, word: WORD };
/** Bounds of an aligned table (see `renderTable`). */
export const MAX_TABLE_COLUMNS = 64;
export const MAX_TABLE_CELLS = 100_000;
/** The most columns a table's column is padded to (see `renderTable`). */
export const MAX_COLUMN_WIDTH = 120;
/** The most columns a fenced block in a list item is indented by (its item's content column, as far as this). */
export const MAX_CODE_INDENT = 24;
const sgr = (on: boolean, a: string, b: string) => (s: string) => (on ? `${ESC}${a}m${s}${ESC}${b}m` : s);

const KEYWORDS = new Set(
  (
    "if else for while do return function const let var class new import export from async await try catch finally throw " +
    "switch case break continue default def elif lambda pass yield with as in not and or is None True False null true false " +
    "fn pub struct enum impl trait match mut use mod type interface extends implements static void int string bool package func go defer chan select"
  ).split(" "),
);

/** East Asian wide and fullwidth blocks of the BMP (CJK, Hangul, Kana, fullwidth forms), and what has an emoji presentation. */
const WIDE = /[\u1100-\u115f\u2e80-\ua4cf\ua960-\ua97f\uac00-\ud7a3\uf900-\ufaff\ufe10-\ufe19\ufe30-\ufe6f\uff00-\uff60\uffe0-\uffe6]|\p{Emoji_Presentation}/u;

/**
 * Columns a code point takes, never fewer than a terminal gives it: two for East Asian wide and fullwidth characters,
 * emoji and the planes past U+16FE0 (Tangut, Kana supplements, symbols, CJK extensions); one for the rest (box
 * drawing, punctuation such as `…` and `–`, and combining marks, which terminals show in 0 or 1). A terminal that
 * shows one of the two-column characters in one gets a shorter row, never a wrapped one.
 */
export function cellWidth(ch: string): number {
  const cp = ch.codePointAt(0)!;
  if (cp < 0x1100) return 1;
  return cp >= 0x16fe0 || WIDE.test(ch) ? 2 : 1;
}

/** Visible width of a string without ANSI sequences (`cellWidth` per code point). */
export function visibleWidth(s: string): number {
  let w = 0;
  for (const ch of s.replace(/\x1b\[[0-9;]*m/g, "")) w += cellWidth(ch);
  return w;
}

/** `s` with each tab as the spaces to the next multiple of 8 columns from its start (by `cellWidth`). */
function expandTabs(s: string): string {
  if (!s.includes("\t")) return s;
  let col = 0;
  let out = "";
  for (const ch of s) {
    const w = ch === "\t" ? 8 - (col % 8) : cellWidth(ch);
    out += ch === "\t" ? " ".repeat(w) : ch;
    col += w;
  }
  return out;
}

export class MarkdownStream {
  private inFence: (OpenFence & { lang: string; margin: string }) | null = null;
  private readonly fences = new FenceFinder();
  private table: string[] = [];
  private readonly bold;
  private readonly italic;
  private readonly dim;
  private readonly code;
  private readonly heading;
  private readonly kw;
  private readonly str;
  private readonly com;
  private readonly num;
  private readonly link;

  constructor(private readonly color: boolean) {
    this.bold = sgr(color, "1", "22");
    this.italic = sgr(color, "3", "23");
    this.dim = sgr(color, "2", "22");
    this.code = sgr(color, "36", "39");
    this.heading = sgr(color, "1;4", "22;24");
    this.kw = sgr(color, "35", "39");
    this.str = sgr(color, "32", "39");
    this.com = sgr(color, "2;3", "22;23");
    this.num = sgr(color, "33", "39");
    this.link = sgr(color, "4", "24");
  }

  inline(s: string): string {
    const parts: string[] = [];
    // Code spans first: their content is literal.
    const re = /`([^`]+)`/g;
    let last = 0;
    for (let m = re.exec(s); m !== null; m = re.exec(s)) {
      parts.push(this.emphasis(s.slice(last, m.index)), this.code(this.color ? m[1]! : `\`${m[1]!}\``));
      last = m.index + m[0].length;
    }
    parts.push(this.emphasis(s.slice(last)));
    return parts.join("");
  }

  /**
   * Links, then bold and italic. A link's URL, and a bare `http(s)://` URL in the text (as GFM's autolinks), are
   * shown as written (`md-link.ts`): each stands in the text as a placeholder (NUL, its index, SOH: `push` has shown
   * every raw control, so none is in the text) while emphasis is applied, so `__init__` or `*x*` in a URL is never
   * taken for emphasis, nor can an emphasis marker in a URL pair with one in the text after it.
   */
  private emphasis(s: string): string {
    const urls: string[] = [];
    const hold = (shown: string): string => `\u0000${urls.push(shown) - 1}\u0001`;
    const text = s
      .replace(LINK_G, (_m, t: string, u: string) => {
        const l = shownLink(t, u);
        if (l.url === null) return this.link(l.text);
        return this.link(l.text) + hold(this.dim(` (${l.url}${l.goesTo !== null ? `, goes to ${l.goesTo}` : ""})`));
      })
      .replace(BARE_URL, hold);
    const out = text
      .replace(/\*\*([^*]+)\*\*|__([^_]+)__/g, (_m, a?: string, b?: string) => this.bold(a ?? b ?? ""))
      .replace(/(^|[^\w*])\*([^*\s][^*]*?)\*(?!\w)|(^|[^\w_])_([^_\s][^_]*?)_(?!\w)/g, (_m, p1?: string, a?: string, p2?: string, b?: string) => `${p1 ?? p2 ?? ""}${this.italic(a ?? b ?? "")}`);
    return urls.length === 0 ? out : out.replace(/\u0000(\d+)\u0001/g, (_m, i: string) => urls[Number(i)]!);
  }

  /** One line of a fenced block, highlighted (`codeTokens`: linear for any line). */
  highlight(line: string, lang: string): string {
    if (!this.color) return line;
    const hash = /^(py|python|sh|bash|shell|zsh|rb|ruby|yaml|yml|toml)$/.test(lang);
    const out: string[] = [];
    let last = 0;
    for (const t of codeTokens(line, hash ? HASH_DIALECT : C_DIALECT)) {
      const text = line.slice(t.start, t.end);
      out.push(line.slice(last, t.start));
      if (t.kind === "comment") out.push(this.com(text));
      else if (t.kind === "string") out.push(this.str(text));
      else if (t.kind === "number") out.push(this.num(text));
      else out.push(KEYWORDS.has(text) ? this.kw(text) : text);
      last = t.end;
    }
    out.push(line.slice(last));
    return out.join("");
  }

  /**
   * A pipe table with aligned columns; one wider than `MAX_TABLE_COLUMNS` or with more than `MAX_TABLE_CELLS` cells is
   * shown as its rows, unaligned (aligning pads every row to every column: a model's 1 MiB table of one long row and
   * many short ones would take rows × columns). A column is padded to its widest cell but to `MAX_COLUMN_WIDTH` at
   * most: a wider cell is written whole and the rest of its row moves right, so padding adds at most that much per
   * cell (one 100 kB cell above 5,000 short rows was 500 MB of padding, a 1 MB one above 10,000 more than a string holds).
   */
  private renderTable(rows: string[]): string[] {
    // A tab in a cell is spaces: the terminal would take it to its own tab stop, past the column's padding.
    const cells = rows.map((r) => r.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => expandTabs(c.trim())));
    const isSep = (r: string[]): boolean => r.every((c) => /^:?-{1,}:?$/.test(c));
    const body = cells.filter((r) => !isSep(r));
    let n = 0;
    for (const r of body) n = Math.max(n, r.length);
    if (n > MAX_TABLE_COLUMNS || n * body.length > MAX_TABLE_CELLS) return rows.map((r) => this.inline(r));
    const shown = body.map((r) => r.map((c) => this.inline(c)));
    const w = new Array<number>(n).fill(0);
    for (const r of shown) r.forEach((c, i) => (w[i] = Math.min(MAX_COLUMN_WIDTH, Math.max(w[i]!, visibleWidth(c)))));
    const line = (r: string[], head: boolean): string => r.concat(Array(n - r.length).fill("")).map((c, i) => (head ? this.bold(c) : c) + " ".repeat(Math.max(0, w[i]! - visibleWidth(c)))).join(" │ ");
    const out = [line(shown[0] ?? [], cells.length > 1 && isSep(cells[1]!))];
    if (cells.length > 1 && isSep(cells[1]!)) out.push(w.map((x) => "─".repeat(x)).join("─┼─"));
    for (const r of shown.slice(1)) out.push(line(r, false));
    return out;
  }

  /**
   * Renders one complete source line; returns the lines that are final now (zero while a table grows). A CR that ends
   * it is its line ending (CRLF), and a CR within it ends a line too.
   */
  push(line: string): string[] {
    if (!line.includes("\r")) return this.pushLine(terminalSafe(line, false));
    const out: string[] = [];
    for (const l of line.replace(/\r$/, "").split("\r")) for (const r of this.pushLine(terminalSafe(l, false))) out.push(r);
    return out;
  }

  /** One line, CR-free and terminal-safe; `s` patterns: a U+2028 or U+2029 in it is no line end (`.` skips them). */
  private pushLine(line: string): string[] {
    const out: string[] = [];
    const isRow = /^\s*\|.*\|\s*$/s.test(line);
    if (this.inFence === null && this.table.length > 0 && !isRow) for (const l of this.flush()) out.push(l);
    const f = this.inFence;
    if (f !== null) {
      // A quoted block ends at a line that is not quoted; that line is then read as any other.
      const ended = f.quoted && quoteStart(line) === -1;
      if (ended || closesFence(line, f)) {
        this.inFence = null;
        out.push(this.fenceEdge(f, "└─"));
        if (!ended) return out;
      } else {
        out.push(`${f.margin}${this.dim("│")} ${this.highlight(fenceCode(line, f), f.lang)}`);
        return out;
      }
    }
    const fence = this.fences.opens(line);
    if (fence) {
      // The language: the info string's first word (its leading letters, digits, `_`, `+` and `-`).
      const lang = /^[\w+-]*/.exec(fence.info)![0];
      // In a quote, its bar; in a list item, the item's indentation (bounded: a hostile one is megabytes of spaces).
      const margin = fence.quoted ? `${this.dim("▌")} ` : " ".repeat(Math.min(fence.nest, MAX_CODE_INDENT) + 2);
      this.inFence = { ...fence, lang: lang.toLowerCase(), margin };
      out.push(this.fenceEdge(this.inFence, `┌─${lang ? ` ${lang}` : ""}`));
      return out;
    }
    if (isRow) {
      this.table.push(line);
      return out;
    }
    const h = /^(#{1,6})\s+(.*)$/s.exec(line);
    if (h) out.push(h[1]!.length <= 2 ? this.heading(this.inline(h[2]!)) : this.bold(this.inline(h[2]!)));
    else if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) out.push(this.dim("─".repeat(40)));
    else if (/^\s*>\s?/.test(line)) out.push(`${this.dim("▌")} ${this.italic(this.inline(line.replace(/^\s*>\s?/, "")))}`);
    else {
      const li = /^(\s*)([-*+])\s+(.*)$/s.exec(line);
      const ol = /^(\s*)(\d+)[.)]\s+(.*)$/s.exec(line);
      if (li) out.push(`${li[1]!}• ${this.inline(li[3]!.replace(/^\[( |x)\]\s/, (_m, x: string) => (x === "x" ? "☑ " : "☐ ")))}`);
      else if (ol) out.push(`${ol[1]!}${ol[2]!}. ${this.inline(ol[3]!)}`);
      else out.push(this.inline(line));
    }
    return out;
  }

  /** A fenced block's first or last line: `edge` after the block's margin (a quote's bar, or spaces). */
  private fenceEdge(f: { quoted: boolean; margin: string }, edge: string): string {
    return f.quoted ? `${f.margin}${this.dim(edge)}` : this.dim(`${f.margin}${edge}`);
  }

  /** Ends the message: a pending table is rendered (an unclosed fence simply ends). */
  flush(): string[] {
    const t = this.table;
    this.table = [];
    return t.length > 0 ? this.renderTable(t) : [];
  }
}

/** Renders a whole markdown text (LF, CRLF and a lone CR end a line; one at the end of the text ends its last line). */
export function renderMarkdown(text: string, color: boolean): string {
  const md = new MarkdownStream(color);
  const out: string[] = [];
  // No spread of a table's lines into push: more than ~120,000 overflow the call stack.
  for (const l of text.replace(/\r?\n$|\r$/, "").split("\n")) for (const r of md.push(l)) out.push(r);
  for (const r of md.flush()) out.push(r);
  return out.join("\n") + "\n";
}
