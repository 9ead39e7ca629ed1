/**
 * How the terminal renderer (markdown.ts) shows a markdown link `[text](url)`. Pure; no I/O.
 *
 * Why: the text is the model's, so possibly an attacker's (a prompt-injected model quoting a hostile file), and a
 * link's text can claim to go elsewhere: `[https://bank.example](https://evil.example)`, `[e\u202Egpj.exe](…)`
 * (reads "eexe.jpg"), `[bank\u200b.example](…)`. A terminal shows no link target on hover, so the URL itself is shown.
 * Contract: `shownLink` returns the text and the URL to print, both with bidirectional controls and zero-width
 * characters as `<U+XXXX>`; `url` is null when the text is the URL itself (or a `mailto:` link's address), shown once;
 * `goesTo` is the real host (or mail address) when the text names a place (a URL, a host name, a mail address)
 * other than where the link goes, as the web UI decides (`ui/src/md-inline.tsx`), `www.` ignored; else null.
 */
import { BIDI_CONTROLS } from "../../core/visible-controls.js";

/** Invisible in a link, and able to make it read as something else: bidi controls, zero-width characters. */
const HIDDEN_IN_LINK = new RegExp(`[${BIDI_CONTROLS}\u200b-\u200d\u2060\ufeff]`, "g");
/** The same characters already shown as `<U+XXXX>` (by `terminalSafe`), left out when the text is compared. */
const SHOWN_HIDDEN = /<U\+(?:061C|200[B-F]|202[A-E]|206[6-9]|2060|FEFF)>/g;
/** Link text that names a place: a URL, a host name (`bank.example`, `www.bank.example/login`) or a mail address. */
const NAMES_PLACE = /^\s*(?:[a-z][a-z\d+.-]*:(?:\/\/)?)?(?:[^\s@/]+@)?([^\s/?#:@]+\.[^\s/?#:@.]+)/i;

export interface ShownLink {
  text: string;
  url: string | null;
  goesTo: string | null;
}

const visible = (s: string): string => s.replace(HIDDEN_IN_LINK, (c) => `<U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}>`);

/** Where an `http:`, `https:` or `mailto:` URL leads, as a reader checks it (a host, or a mail address); else null. */
function destination(url: string): string | null {
  if (!/^(https?:|mailto:)/i.test(url)) return null;
  try {
    const u = new URL(url);
    return u.protocol === "mailto:" ? decodeURIComponent(u.pathname).toLowerCase() : u.hostname;
  } catch {
    return null;
  }
}

/** `text` names a place other than `dest`. */
function misleads(text: string, dest: string): boolean {
  const named = NAMES_PLACE.exec(text.replace(HIDDEN_IN_LINK, "").replace(SHOWN_HIDDEN, ""));
  if (!named) return false;
  let host: string;
  try {
    host = new URL(`http://${named[1]}`).hostname;
  } catch {
    return true;
  }
  const bare = (h: string): string => h.replace(/^www\./, "");
  return bare(host) !== bare(dest.includes("@") ? dest.slice(dest.lastIndexOf("@") + 1) : dest);
}

export function shownLink(text: string, url: string): ShownLink {
  const t = text.trim();
  if (t === url || `mailto:${t}` === url) return { text: visible(text), url: null, goesTo: null };
  const dest = destination(url);
  return { text: visible(text), url: visible(url), goesTo: dest !== null && misleads(text, dest) ? visible(dest) : null };
}
