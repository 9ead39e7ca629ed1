/**
 * A small markdown renderer written for safety: it builds Preact elements, never HTML strings,
 * so raw HTML in a message is shown as text and no markup can be injected. Supported: headings,
 * paragraphs, fenced code blocks (highlighted; also in list items and quotes: `FenceFinder`), inline code, bold,
 * italic, links (http, https and mailto only; opened in a new tab with no referrer), bullet and numbered lists,
 * quotes and horizontal rules. Anything else is plain text. In code (spans and blocks) bidirectional and other invisible
 * controls are shown as `<U+XXXX>`: a command in an answer cannot look like another (spans: ./md-inline.tsx).
 *
 * Streaming: an answer grows by appending, and is rendered once per frame. The blocks are parsed line by line as a
 * push parser over complete lines (those followed by a newline); a block the parser has closed can never change as
 * text is appended, so its element is built once and returned again, the same object, in every later frame (Preact
 * skips an element it was given before). Each frame parses only the lines completed since the last one, then lays out
 * the still-open block and the unfinished last line on a copy of the parser. The runs of a long paragraph, quote, item
 * or heading, and a long code block's highlighted sections, are kept the same way. A `src` that does not extend the
 * last one starts again from nothing. See docs/ui.md, "Long answers".
 */
import { Component, type ComponentChildren, type JSX } from "preact";
import { highlight, inline } from "./md-inline.js";
import { closesFence, fenceCodeText, FenceFinder, quoteStart, type OpenFence } from "../../src/core/markdown-syntax.js";

const RUN = 4096;
const CR = 13;
const LF = 10;
/** A fence's language: its info string's first word, as far as these characters go. */
const LANG = /^[\w+#.-]*/;
/** `s`, as ITEM: a U+2028 or a lone CR in a heading is text, not the end of what may be a heading. */
const HEADING = /^(#{1,6})\s+(.*)$/s;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^\s*([-*+]|\d+[.)])\s+/;
/** An item's text: `s`, so that every line BULLET matches is an item (a U+2028 in it is text). */
const ITEM = /^\s*([-*+]|\d+[.)])\s+(.*)$/s;
const QUOTE = /^\s*>/;

/**
 * A long paragraph is laid out in runs: cut at the first whitespace at or after each multiple of RUN from its start, so
 * the cuts never move as text is appended and each frame re-lays out only the last run. One cache per component: the
 * runs built for the paragraph starting at `start` (with its first key), each with the parser state after its cut.
 */
interface RunCache {
  start: number;
  key: number;
  done: { end: number; target: number; el: ComponentChildren }[];
}
/** The same for a fence's code, cut into sections at line breaks: its highlighted sections. */
interface CodeCache extends RunCache {
  lang: string;
}

/** An open list: its items' elements, and what the last one holds (its text, then any code blocks in it). */
interface List {
  kind: "list";
  ordered: boolean;
  /** An ordered list's first number (CommonMark: up to 9 digits; a longer one starts at 1). */
  start: number;
  items: ComponentChildren[];
  last: ComponentChildren[];
}
type Open =
  /** A fenced block; in `list`, its last item's (and the list goes on after it). */
  | { kind: "fence"; fence: OpenFence; lang: string; bodyStart: number; bodyEnd: number; list: List | null }
  | List
  | { kind: "none" }
  | { kind: "quote"; lines: string[] };
const copyList = (l: List): List => ({ ...l, items: [...l.items], last: [...l.last] });
const NONE: Open = { kind: "none" };

/** The block parser: fed whole lines of `src` by offsets; `out` holds the blocks it closed, in order. */
class Blocks {
  key = 0;
  open: Open = NONE;
  fences = new FenceFinder();
  /** The open paragraph: from `paraStart` to `paraEnd` in `src` (-1: none). */
  paraStart = -1;
  paraEnd = -1;
  constructor(
    public src: string,
    public out: ComponentChildren[],
    private readonly cache: { runs?: RunCache; code?: CodeCache; line?: RunCache; quote?: { key: number; done: { end: number; el: ComponentChildren }[] } },
  ) {}

  /** A copy that writes its blocks to `out`: this parser's state is left as it was. */
  fork(out: ComponentChildren[]): Blocks {
    const b = new Blocks(this.src, out, this.cache);
    b.key = this.key;
    b.paraStart = this.paraStart;
    b.paraEnd = this.paraEnd;
    b.fences = this.fences.copy();
    const o = this.open;
    b.open = o.kind === "list" ? copyList(o) : o.kind === "quote" ? { ...o, lines: [...o.lines] } : o.kind === "fence" ? { ...o, list: o.list && copyList(o.list) } : o;
    return b;
  }

  /** The line `src[start, end)`, its line ending (`\n`, `\r\n` or a `\r` the text ends with) not included. */
  line(start: number, end: number): void {
    if (end > start && this.src.charCodeAt(end - 1) === CR) end--;
    const line = this.src.slice(start, end);
    const o = this.open;
    if (o.kind === "fence") {
      // A quoted block ends at a line that is not quoted; that line is then read as any other.
      const ended = o.fence.quoted && quoteStart(line) === -1;
      if (ended || closesFence(line, o.fence)) this.closeOpen();
      else {
        if (o.bodyStart === -1) o.bodyStart = start;
        o.bodyEnd = end;
      }
      if (!ended) return;
    }
    this.block(start, end, line, this.fences.opens(line));
  }

  /** A line outside any fenced block, and the fence it opens (`FenceFinder`, which reads each such line once). */
  private block(start: number, end: number, line: string, fence: OpenFence | null): void {
    const o = this.open;
    if (o.kind === "list") {
      const b = ITEM.exec(line);
      if (b && /\d/.test(b[1]!) === o.ordered) {
        o.last = [this.lineText(end - b[2]!.length, end)];
        o.items.push(<li key={o.items.length}>{o.last}</li>);
        return;
      }
      // A blank line ends no list (its items are one list, as CommonMark's loose lists); a fence in an item is in it.
      if (line.trim() === "") return;
      if (fence && fence.nest > 0) {
        this.open = { kind: "fence", fence, lang: LANG.exec(fence.info)![0], bodyStart: -1, bodyEnd: -1, list: o };
        return;
      }
      this.closeOpen();
    } else if (o.kind === "quote") {
      if (QUOTE.test(line) && !fence) {
        o.lines.push(line.replace(/^\s*>\s?/, ""));
        return;
      }
      this.closeOpen();
    }
    if (fence) {
      this.flush();
      this.open = { kind: "fence", fence, lang: LANG.exec(fence.info)![0], bodyStart: -1, bodyEnd: -1, list: null };
      return;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      this.flush();
      const H = `h${Math.min(heading[1]!.length + 2, 6)}` as "h3";
      this.out.push(<H key={this.key++}>{this.lineText(end - heading[2]!.length, end)}</H>);
      return;
    }
    if (RULE.test(line)) {
      this.flush();
      this.out.push(<hr key={this.key++} />);
      return;
    }
    const bullet = BULLET.exec(line);
    if (bullet) {
      this.flush();
      const digits = /^\d{1,9}(?=[.)])/.exec(bullet[1]!)?.[0];
      this.open = { kind: "list", ordered: /\d/.test(bullet[1]!), start: digits === undefined ? 1 : Number(digits), items: [], last: [] };
      this.block(start, end, line, null);
      return;
    }
    if (QUOTE.test(line)) {
      this.flush();
      this.open = { kind: "quote", lines: [] };
      this.block(start, end, line, null);
      return;
    }
    if (line.trim() === "") this.flush();
    else {
      if (this.paraStart === -1) this.paraStart = start;
      this.paraEnd = end;
    }
  }

  /** The end of the text: what is open is closed. */
  end(): void {
    while (this.open.kind !== "none") this.closeOpen();
    this.flush();
  }

  private closeOpen(): void {
    const o = this.open;
    this.open = NONE;
    if (o.kind === "fence") {
      const pre = (
        <pre key={o.list ? `code${o.list.last.length}` : this.key} class="code" data-lang={o.lang || undefined}>
          <code>{o.bodyStart === -1 ? null : this.code(o.bodyStart, o.bodyEnd, o.lang, o.fence)}</code>
        </pre>
      );
      if (o.list) {
        // In the list's last item, after what it holds; the list goes on.
        const l = o.list;
        l.last = [...l.last, pre];
        l.items[l.items.length - 1] = <li key={l.items.length - 1}>{l.last}</li>;
        this.open = l;
      } else this.out.push(o.fence.quoted ? <blockquote key={this.key}>{pre}</blockquote> : pre);
      this.key++;
    } else if (o.kind === "list")
      this.out.push(o.ordered ? <ol key={this.key++} start={o.start !== 1 ? o.start : undefined}>{o.items}</ol> : <ul key={this.key++}>{o.items}</ul>);
    else if (o.kind === "quote") {
      this.out.push(<blockquote key={this.key}>{this.quote(o.lines)}</blockquote>);
      this.key++;
    }
  }

  private flush(): void {
    if (this.paraStart === -1) return;
    const [start, end] = [this.paraStart, this.paraEnd];
    this.paraStart = this.paraEnd = -1;
    if (end - start <= RUN) this.out.push(<p key={this.key++}>{inline(this.text(start, end))}</p>);
    else this.runs(start, end);
  }

  /** Prose `src[start, end)`, its CRLF line breaks as LF. */
  private text(start: number, end: number): string {
    const s = this.src.slice(start, end);
    return s.includes("\r") ? s.replace(/\r\n/g, "\n") : s;
  }

  /**
   * Where the section that reaches `target` ends in `src[.., end)`: just after the first `sep` at or after `target`;
   * with `hard`, if there is none in `[target, target + RUN]` (a run of more than RUN characters without one: a 1 MB
   * line with no space), at `target + RUN`. Or -1 while the text to `end` does not decide it yet. Never moves as text
   * is appended; never splits a CRLF or a surrogate pair.
   */
  private cut(target: number, end: number, sep: RegExp, hard: boolean): number {
    const limit = hard ? Math.min(end, target + RUN + 1) : end;
    const at = this.src.slice(target, limit).search(sep);
    let cut: number;
    if (at !== -1) cut = target + at + 1;
    else if (hard && limit === target + RUN + 1) cut = target + RUN;
    else return -1;
    const prev = this.src.charCodeAt(cut - 1);
    if (cut < end && ((prev === CR && this.src.charCodeAt(cut) === LF) || (prev >= 0xd800 && prev <= 0xdbff))) cut++;
    return cut;
  }

  /**
   * A fence's code `src[start, end)`, highlighted in sections cut as `cut` says at line breaks (each section on its
   * own: a comment or template string is highlighted within its section), reusing the sections already built for it.
   * Each section is a block (style.css) ending in its line break: the browser lays out only the section that changed
   * (one inline run of 1 MB took it ~0.6 s per frame), and the text shown, `innerText` and a copy are unchanged.
   * A line is never cut: a 1 MB line without a break is one line for the browser to lay out anyway.
   */
  private code(start: number, end: number, lang: string, fence: OpenFence): ComponentChildren[] {
    let c = this.cache.code;
    if (!c || c.start !== start || c.key !== this.key || c.lang !== lang) c = this.cache.code = { start, key: this.key, lang, done: [] };
    // A section past the end of code that got shorter (a long line of spaces turned out to be the closing fence).
    while (c.done.length && c.done[c.done.length - 1]!.end > end) c.done.pop();
    let from = c.done.length ? c.done[c.done.length - 1]!.end : start;
    let target = c.done.length ? c.done[c.done.length - 1]!.target : start + RUN;
    for (let cut; target < end && (cut = this.cut(target, end, /\n/, false)) !== -1; ) {
      c.done.push({ end: cut, target: Math.max(cut, target + RUN), el: <span key={c.done.length}>{highlight(fenceCodeText(this.src.slice(from, cut), fence), lang)}</span> });
      from = cut;
      target = Math.max(cut, target + RUN);
    }
    const out = c.done.map((r) => r.el);
    if (from < end) out.push(<span key={out.length}>{highlight(fenceCodeText(this.src.slice(from, end), fence), lang)}</span>);
    return out;
  }

  /**
   * A quote's `lines`: of more than RUN characters, in runs of whole lines, each closed by the first line that takes
   * it to RUN characters, and each a block (style.css), reusing the runs already built for it. A run is kept once a
   * later line exists (its own last line is then complete); the last line may still be growing.
   */
  private quote(lines: string[]): ComponentChildren {
    let total = 0;
    for (let i = 0; i < lines.length && total <= RUN; i++) total += lines[i]!.length + 1;
    if (total <= RUN) return inline(lines.join("\n"));
    let c = this.cache.quote;
    if (!c || c.key !== this.key) c = this.cache.quote = { key: this.key, done: [] };
    // Runs past the lines there are (a fork's quote that ended earlier than the one the runs were built for).
    while (c.done.length && c.done[c.done.length - 1]!.end >= lines.length) c.done.pop();
    const out = c.done.map((r) => r.el);
    let from = c.done.length ? c.done[c.done.length - 1]!.end : 0;
    for (let i = from, size = 0; i < lines.length; i++) {
      size += lines[i]!.length + 1;
      if (size < RUN && i < lines.length - 1) continue;
      const el = <span key={out.length} class="run">{inline(lines.slice(from, i + 1).join("\n"))}</span>;
      if (size >= RUN && i < lines.length - 1) c.done.push({ end: i + 1, el });
      out.push(el);
      from = i + 1;
      size = 0;
    }
    return out;
  }

  /**
   * A list item's or a heading's text, `src[start, end)` on one line: of more than RUN characters, in runs cut as a
   * paragraph's are, each a block (style.css), reusing the runs built for the line that starts at `start`. A 1 MB item
   * streamed was laid out whole in every frame.
   */
  private lineText(start: number, end: number): ComponentChildren {
    if (end - start <= RUN) return inline(this.src.slice(start, end));
    let c = this.cache.line;
    if (!c || c.start !== start) c = this.cache.line = { start, key: 0, done: [] };
    while (c.done.length && c.done[c.done.length - 1]!.end > end) c.done.pop();
    let from = c.done.length ? c.done[c.done.length - 1]!.end : start;
    let target = c.done.length ? c.done[c.done.length - 1]!.target : start + RUN;
    for (let cut; target < end && (cut = this.cut(target, end, /\s/, true)) !== -1; ) {
      c.done.push({ end: cut, target: Math.max(cut, target + RUN), el: <span key={c.done.length} class="run">{inline(this.src.slice(from, cut))}</span> });
      from = cut;
      target = Math.max(cut, target + RUN);
    }
    return [...c.done.map((r) => r.el), <span key={c.done.length} class="run">{inline(this.src.slice(from, end))}</span>];
  }

  /** The paragraph `src[start, end)` in runs, reusing the runs already built for it. */
  private runs(start: number, end: number): void {
    let c = this.cache.runs;
    if (!c || c.start !== start || c.key !== this.key) c = this.cache.runs = { start, key: this.key, done: [] };
    // A cut past the end of a paragraph that got shorter (its last line turned out to start a list) is dropped.
    while (c.done.length && c.done[c.done.length - 1]!.end > end) c.done.pop();
    let from = c.done.length ? c.done[c.done.length - 1]!.end : start;
    let target = c.done.length ? c.done[c.done.length - 1]!.target : start + RUN;
    for (let cut; target < end && (cut = this.cut(target, end, /\s/, true)) !== -1; ) {
      c.done.push({ end: cut, target: Math.max(cut, target + RUN), el: <p key={this.key + c.done.length} class="run">{inline(this.text(from, cut))}</p> });
      from = cut;
      target = Math.max(cut, target + RUN);
    }
    for (const r of c.done) this.out.push(r.el);
    this.key += c.done.length;
    this.out.push(<p key={this.key++} class="run">{inline(this.text(from, end))}</p>);
  }
}

/** What a Markdown component keeps between renders. */
interface Memo {
  src: string;
  /** Offset after the last complete line fed to `blocks`. */
  fed: number;
  blocks: Blocks;
}

function render(memo: Memo | undefined, src: string): { memo: Memo; el: JSX.Element } {
  if (!memo || !src.startsWith(memo.src)) memo = { src, fed: 0, blocks: new Blocks(src, [], {}) };
  const b = memo.blocks;
  memo.src = b.src = src;
  const lastNl = src.lastIndexOf("\n");
  for (let nl = src.indexOf("\n", memo.fed); nl !== -1 && nl <= lastNl; nl = src.indexOf("\n", memo.fed)) {
    b.line(memo.fed, nl);
    memo.fed = nl + 1;
  }
  const tail = b.fork([]);
  tail.line(memo.fed, src.length);
  tail.end();
  return { memo, el: <div class="md">{b.out.concat(tail.out)}</div> };
}

/**
 * Render markdown `src` to elements. Safe for untrusted input (no HTML is ever interpreted). Rendered again only when
 * `src` changed: a running turn renders with every frame, and of its answer's parts only the last one grows (a long
 * agentic turn, 150 parts of prose between tool calls, re-parsed them all per streamed word); and then only what
 * the appended text can change (the module comment).
 */
export class Markdown extends Component<{ src: string }> {
  private memo: Memo | undefined;
  override shouldComponentUpdate(next: { src: string }): boolean {
    return next.src !== this.props.src;
  }
  override render(): JSX.Element {
    const r = render(this.memo, this.props.src);
    this.memo = r.memo;
    return r.el;
  }
}
