/**
 * HTML → readable text for `web_fetch`. Contract: one linear pass over the markup (no DOM, no script execution);
 * script/style/template/noscript/svg/iframe/head content dropped (the `<title>` kept as a first line);
 * block elements start new lines, headings get `#` marks, list items `- `, `<pre>` keeps its whitespace;
 * each `<a href>` to an http(s) URL becomes `text [n]` with a numbered `Links:` list at the end (URLs resolved
 * against the page, at most `MAX_LINKS`, duplicates share a number); character references decoded.
 */
import { trimEndChars } from "../../core/text-scan.js";

export const MAX_LINKS = 200;

const DROP = new Set(["script", "style", "template", "noscript", "svg", "iframe", "head", "object", "canvas", "math", "select"]);
const BLOCK = new Set([
  "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "ul", "ol", "li", "table", "tr",
  "blockquote", "pre", "form", "fieldset", "figure", "figcaption", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6",
  "hr", "address", "details", "summary", "body", "html", "br", "caption", "tbody", "thead", "tfoot",
]);
const NAMED: Record<string, string> = {
  amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " ", copy: "©", reg: "®", trade: "™", hellip: "…",
  mdash: "—", ndash: "–", lsquo: "‘", rsquo: "’", ldquo: "“", rdquo: "”", laquo: "«", raquo: "»", middot: "·",
  bull: "•", deg: "°", times: "×", euro: "€", pound: "£", yen: "¥", cent: "¢", sect: "§", para: "¶", shy: "",
};

export function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z][a-z0-9]{1,31});?/gi, (m, body: string) => {
    if (body[0] === "#") {
      const cp = body[1] === "x" || body[1] === "X" ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      return Number.isFinite(cp) && cp > 0 && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) ? String.fromCodePoint(cp) : "\uFFFD";
    }
    return NAMED[body.toLowerCase()] ?? m;
  });
}

function attr(tag: string, name: string): string | null {
  const re = new RegExp(`\\s${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)'|([^\\s>]+))`, "i");
  const m = re.exec(tag);
  return m === null ? null : decodeEntities(m[1] ?? m[2] ?? m[3] ?? "");
}

export function htmlToText(html: string, baseUrl: string): string {
  const out: string[] = [];
  const links: string[] = [];
  const linkIndex = new Map<string, number>();
  let title = "";
  let inTitle = false;
  let drop: string | null = null;
  let pre = 0;
  let pendingLink: number | null = null;
  const newline = (n = 1): void => {
    // Collapse to at most `n` trailing newlines (1 = line break, 2 = paragraph).
    let have = 0;
    for (let i = out.length - 1; i >= 0 && have < 2; i--) {
      const s = out[i] ?? "";
      if (s === "") continue;
      const trailing = s.length - trimEndChars(s, "\n").length;
      have += trailing;
      if (trailing < s.length) break;
    }
    if (out.length === 0) return;
    if (have < n) out.push("\n".repeat(n - have));
  };
  // Every markup alternative ends at its closing `>` or at the end of the page, as an HTML parser reads a tag or
  // declaration still open at the end (it is not text): one that had to find `>` was retried from each later `<` of a
  // page without one, rescanning the rest (2 MiB of `<style` would have held the event loop for most of an hour).
  const re = /<!--[\s\S]*?(?:-->|$)|<!\[CDATA\[[\s\S]*?(?:\]\]>|$)|<![^>]*(?:>|$)|<\?[^>]*(?:>|$)|<\/?([a-zA-Z][a-zA-Z0-9-]*)([^>]*)(?:>|$)|([^<]+)|</g;
  for (let m = re.exec(html); m !== null; m = re.exec(html)) {
    const [whole, rawName, , text] = m;
    if (text !== undefined || whole === "<") {
      if (inTitle) {
        if (title.length < 1024) title += decodeEntities(text ?? "<");
        continue;
      }
      if (drop !== null) continue;
      const t = decodeEntities(text ?? "<");
      out.push(pre > 0 ? t : t.replace(/\s+/g, " "));
      continue;
    }
    if (rawName === undefined) continue; // comment, doctype, processing instruction
    const name = rawName.toLowerCase();
    const closing = whole.startsWith("</");
    if (drop !== null) {
      if (closing && name === drop) drop = null;
      else if (name === "title" && drop === "head") inTitle = !closing;
      continue;
    }
    if (name === "title") {
      inTitle = !closing;
      continue;
    }
    if (DROP.has(name) && !closing && !whole.endsWith("/>")) {
      drop = name;
      continue;
    }
    if (name === "a") {
      if (!closing) {
        const href = attr(whole, "href");
        pendingLink = null;
        if (href !== null) {
          try {
            const u = new URL(href, baseUrl);
            if (u.protocol === "http:" || u.protocol === "https:") {
              u.hash = "";
              const key = u.href;
              let n = linkIndex.get(key);
              if (n === undefined && links.length < MAX_LINKS) {
                links.push(key);
                n = links.length;
                linkIndex.set(key, n);
              }
              pendingLink = n ?? null;
            }
          } catch {
            // not a URL: plain text
          }
        }
      } else if (pendingLink !== null) {
        out.push(` [${pendingLink}]`);
        pendingLink = null;
      }
      continue;
    }
    if (name === "img" && !closing) {
      const alt = attr(whole, "alt");
      if (alt !== null && alt.trim() !== "") out.push(`[image: ${alt.trim().replace(/\s+/g, " ")}]`);
      continue;
    }
    if (name === "pre") pre = Math.max(0, pre + (closing ? -1 : 1));
    if (name === "td" || name === "th") {
      if (!closing) out.push(" | ");
      continue;
    }
    if (!BLOCK.has(name)) continue;
    if (name === "br") {
      out.push("\n");
      continue;
    }
    const heading = /^h([1-6])$/.exec(name);
    newline(heading !== null || name === "p" || name === "pre" || name === "blockquote" ? 2 : 1);
    if (closing) continue;
    if (heading !== null) out.push(`${"#".repeat(Number(heading[1]))} `);
    else if (name === "li") out.push("- ");
    else if (name === "hr") out.push("---\n");
  }
  const body = out
    .join("")
    .split("\n")
    .map((l) => trimEndChars(l, " \t").replace(/^ (?=\S)/, ""))
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
  const parts: string[] = [];
  const t = title.replace(/\s+/g, " ").trim();
  if (t !== "") parts.push(`Title: ${t}`);
  if (body !== "") parts.push(body);
  if (links.length > 0) parts.push(`Links:\n${links.map((l, i) => `[${i + 1}] ${l}`).join("\n")}`);
  return parts.join("\n\n");
}
