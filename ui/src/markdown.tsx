/**
 * A small markdown renderer written for safety: it builds Preact elements, never HTML strings,
 * so raw HTML in a message is shown as text and no markup can be injected. Supported: headings,
 * paragraphs, fenced code blocks (highlighted), inline code, bold, italic, links (http, https
 * and mailto only; opened in a new tab with no referrer), bullet and numbered lists, quotes and
 * horizontal rules. Anything else is plain text. In code (spans and blocks) bidirectional and other invisible
 * controls are shown as `<U+XXXX>`: a command in an answer cannot look like another.
 */
import { Component, type ComponentChildren, type JSX } from "preact";
import { codeTokens, INLINE_SPANS } from "../../src/core/markdown-syntax.js";
import { visibleControls } from "../../src/core/visible-controls.js";

const SAFE_LINK = /^(https?:|mailto:)/i;

function inline(text: string, key = 0): ComponentChildren[] {
  const out: ComponentChildren[] = [];
  // Order matters: code spans first (their content is literal), then links, bold, italic.
  const re = new RegExp(INLINE_SPANS, "g");
  let last = 0;
  let m: RegExpExecArray | null;
  let k = key;
  while ((m = re.exec(text)) !== null) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1] !== undefined) out.push(<code key={k++}>{visibleControls(m[1])}</code>);
    else if (m[2] !== undefined) {
      const href = m[3]!;
      out.push(
        SAFE_LINK.test(href) ? (
          <a key={k++} href={href} target="_blank" rel="noopener noreferrer">
            {m[2]}
          </a>
        ) : (
          m[0]
        ),
      );
    } else if (m[4] !== undefined || m[5] !== undefined) out.push(<strong key={k++}>{inline((m[4] ?? m[5])!, k * 100)}</strong>);
    else out.push(<em key={k++}>{(m[6] ?? m[7])!}</em>);
    last = re.lastIndex;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

// ── Code highlighting: a tokenizer for the common shapes (strings, comments, numbers, keywords).
const KEYWORDS = new Set(
  (
    "as async await break case catch class const continue def default del do elif else enum export extends false finally fn for from func function go " +
    "if impl import in interface let match mut new nil none not null or package pass pub raise return self static struct super switch " +
    "this throw true try type typeof undefined use var void while with yield echo fi then esac done local"
  ).split(" "),
);
const HASH_LANGS = /^(py|python|sh|bash|shell|zsh|rb|ruby|yaml|yml|toml|r|perl|make|dockerfile)$/i;
const NUMBER = /\d[\d_.xXa-fA-F]*\b/y;
const WORD = /[A-Za-z_$][\w$]*/y;
const CLASS = { comment: "tok-comment", string: "tok-string", number: "tok-number" } as const;

/**
 * Highlighted `code`: comments, strings, numbers and keywords (`codeTokens`: linear for any input). Code is what a
 * reader copies and runs, so its controls are shown, not obeyed (core/visible-controls.ts).
 */
export function highlight(source: string, lang: string): ComponentChildren[] {
  const code = visibleControls(source);
  const tokens = codeTokens(code, { hash: HASH_LANGS.test(lang) ? "comment" : "plain", slash: true, backtick: true, number: NUMBER, word: WORD });
  const out: ComponentChildren[] = [];
  let last = 0;
  let k = 0;
  for (const t of tokens) {
    const cls = t.kind === "word" ? (KEYWORDS.has(code.slice(t.start, t.end)) ? "tok-keyword" : null) : t.kind === "plain" ? null : CLASS[t.kind];
    if (cls === null) continue;
    if (t.start > last) out.push(code.slice(last, t.start));
    out.push(
      <span key={k++} class={cls}>
        {code.slice(t.start, t.end)}
      </span>,
    );
    last = t.end;
  }
  if (last < code.length) out.push(code.slice(last));
  return out;
}

const RUN = 4096;
/** Split at the first whitespace at or after each multiple of RUN (stable under appending). */
function runs(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  let target = RUN;
  while (target < text.length) {
    const ws = text.slice(target).search(/\s/);
    if (ws === -1) break;
    const cut = target + ws + 1;
    out.push(text.slice(start, cut));
    start = cut;
    target = Math.max(cut, target + RUN);
  }
  out.push(text.slice(start));
  return out;
}

/**
 * Render markdown `src` to elements. Safe for untrusted input (no HTML is ever interpreted). Rendered again only when
 * `src` changed: a running turn renders with every frame, and of its answer's parts only the last one grows (a long
 * agentic turn, 150 parts of prose between tool calls, re-parsed them all per streamed word).
 */
export class Markdown extends Component<{ src: string }> {
  override shouldComponentUpdate(next: { src: string }): boolean {
    return next.src !== this.props.src;
  }
  override render(): JSX.Element {
    return renderMarkdown(this.props.src);
  }
}

function renderMarkdown(src: string): JSX.Element {
  const blocks: ComponentChildren[] = [];
  const lines = src.split("\n");
  let i = 0;
  let key = 0;
  let para: string[] = [];
  const flush = () => {
    if (para.length) {
      const text = para.join("\n");
      if (text.length <= RUN) blocks.push(<p key={key++}>{inline(text)}</p>);
      // A very long paragraph (a streaming answer) is laid out in runs whose boundaries never
      // move as text is appended, so each frame re-lays out only the last run.
      else for (const run of runs(text)) blocks.push(<p key={key++} class="run">{inline(run)}</p>);
    }
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = /^\s*(```|~~~)\s*([\w+#.-]*)/.exec(line);
    if (fence) {
      flush();
      const lang = fence[2] ?? "";
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i]!.trimStart().startsWith(fence[1]!)) body.push(lines[i++]!);
      i++; // closing fence (or end of a still-streaming block)
      const code = body.join("\n");
      blocks.push(
        <pre key={key++} class="code" data-lang={lang || undefined}>
          <code>{highlight(code, lang)}</code>
        </pre>,
      );
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      const level = Math.min(heading[1]!.length + 2, 6);
      const H = `h${level}` as "h3";
      blocks.push(<H key={key++}>{inline(heading[2]!)}</H>);
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      blocks.push(<hr key={key++} />);
      i++;
      continue;
    }
    const bullet = /^\s*([-*+]|\d+[.)])\s+/.exec(line);
    if (bullet) {
      flush();
      const ordered = /\d/.test(bullet[1]!);
      const items: ComponentChildren[] = [];
      while (i < lines.length) {
        // `s`: every line the bullet test matched is an item, a `\r` before the newline (CRLF text) included. Without
        // it such a line made an empty list and was read again, forever: the page hung.
        const b = /^\s*([-*+]|\d+[.)])\s+(.*)$/s.exec(lines[i]!);
        if (!b || /\d/.test(b[1]!) !== ordered) break;
        items.push(<li key={items.length}>{inline(b[2]!)}</li>);
        i++;
      }
      blocks.push(ordered ? <ol key={key++}>{items}</ol> : <ul key={key++}>{items}</ul>);
      continue;
    }
    if (/^\s*>/.test(line)) {
      flush();
      const q: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i]!)) q.push(lines[i++]!.replace(/^\s*>\s?/, ""));
      blocks.push(<blockquote key={key++}>{inline(q.join("\n"))}</blockquote>);
      continue;
    }
    if (line.trim() === "") flush();
    else para.push(line);
    i++;
  }
  flush();
  return <div class="md">{blocks}</div>;
}
