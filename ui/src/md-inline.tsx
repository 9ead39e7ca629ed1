/**
 * The markdown renderer's spans (ui/src/markdown.tsx lays out the blocks): inline code, links, bold and italic, and
 * code highlighting. Preact elements only, never HTML strings; code shows its controls as `<U+XXXX>`.
 */
import type { ComponentChildren } from "preact";
import { codeTokens, INLINE_SPANS } from "../../src/core/markdown-syntax.js";
import { BIDI_CONTROLS, visibleControls } from "../../src/core/visible-controls.js";

const SAFE_LINK = /^(https?:|mailto:)/i;
/** Invisible in link text, and able to make it read as something else: bidi controls, zero-width characters. */
const HIDDEN_IN_LINK = new RegExp(`[${BIDI_CONTROLS}\u200b-\u200d\u2060\ufeff]`, "g");
/** Link text that names a place: a URL, a host name (`bank.example`, `www.bank.example/login`) or a mail address. */
const NAMES_PLACE = /^\s*(?:[a-z][a-z\d+.-]*:(?:\/\/)?)?(?:[^\s@/]+@)?([^\s/?#:@]+\.[^\s/?#:@.]+)/i;

/** Where a safe link's `href` leads, as a reader checks it (a host, or a mail address); null: not a valid URL. */
function destination(href: string): string | null {
  try {
    const u = new URL(href);
    return u.protocol === "mailto:" ? decodeURIComponent(u.pathname).toLowerCase() : u.hostname;
  } catch {
    return null;
  }
}

/** `text` names a place (`NAMES_PLACE`) other than `dest`: `[https://bank.example](https://evil.example)`. */
function misleads(text: string, dest: string): boolean {
  const named = NAMES_PLACE.exec(text.replace(HIDDEN_IN_LINK, ""));
  if (!named) return false;
  let host: string;
  try {
    host = new URL(`http://${named[1]}`).hostname;
  } catch {
    return true;
  }
  const bare = (h: string) => h.replace(/^www\./, "");
  return bare(host) !== bare(dest.includes("@") ? dest.slice(dest.lastIndexOf("@") + 1) : dest);
}

/** Link text with its bidi controls and zero-width characters shown as `<U+XXXX>`: `[e\u202Egpj.exe](…)`. */
function linkText(text: string): string {
  return text.replace(HIDDEN_IN_LINK, (c) => `<U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}>`);
}

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
      const dest = SAFE_LINK.test(m[3]!) ? destination(m[3]!) : null;
      out.push(
        dest === null ? (
          m[0]
        ) : (
          <a key={k++} href={m[3]} target="_blank" rel="noopener noreferrer">
            {linkText(m[2]!)}
            {misleads(m[2]!, dest) ? <span class="link-dest"> ({dest})</span> : null}
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
