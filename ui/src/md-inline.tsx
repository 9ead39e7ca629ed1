/**
 * The markdown renderer's spans (ui/src/markdown.tsx lays out the blocks): inline code, links, bold and italic, and
 * code highlighting. Preact elements only, never HTML strings; code shows its controls as `<U+XXXX>`.
 */
import type { ComponentChildren } from "preact";
import { codeTokens, INLINE_SPANS } from "../../src/core/markdown-syntax.js";
import { linkDestination, linkMisleads, showHidden } from "../../src/core/link-check.js";
import { visibleControls } from "../../src/core/visible-controls.js";

export function inline(text: string, key = 0): ComponentChildren[] {
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
      const dest = linkDestination(m[3]!);
      out.push(
        dest === null ? (
          m[0]
        ) : (
          <a key={k++} href={m[3]} target="_blank" rel="noopener noreferrer">
            {showHidden(m[2]!)}
            {linkMisleads(m[2]!, dest) ? <span class="link-dest"> ({dest})</span> : null}
          </a>
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
