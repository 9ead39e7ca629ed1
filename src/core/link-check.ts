/**
 * What a markdown link `[text](url)` really does, for both renderers (the terminal's `cli/chat/md-link.ts` and the
 * web UI's `ui/src/md-inline.tsx`). Pure; no I/O.
 *
 * Why: the text is the model's, so possibly an attacker's (a prompt-injected model quoting a hostile file), and a
 * link's text can claim to go elsewhere: `[https://bank.example](https://evil.example)`, `[e\u202Egpj.exe](…)`
 * (reads "eexe.jpg"), `[bank\u200b.example](…)`.
 * Contract:
 * - `showHidden(s)`: bidi controls and zero-width characters as `<U+XXXX>`.
 * - `linkDestination(url)`: the host (or, for `mailto:`, the address) an `http:`, `https:` or `mailto:` URL leads to,
 *   as a reader checks it; null for any other URL or one that does not parse.
 * - `linkMisleads(text, dest)`: the text names a place (a URL, a host name, a mail address) other than `dest`,
 *   `www.` ignored; hidden characters, raw or already shown as `<U+XXXX>`, are left out of the comparison.
 */
import { BIDI_CONTROLS } from "./visible-controls.js";

/** Invisible in a link, and able to make it read as something else: bidi controls, zero-width characters. */
const HIDDEN_IN_LINK = new RegExp(`[${BIDI_CONTROLS}\u200b-\u200d\u2060\ufeff]`, "g");
/** The same characters already shown as `<U+XXXX>` (the terminal's `terminalSafe` does so). */
const SHOWN_HIDDEN = /<U\+(?:061C|200[B-F]|202[A-E]|206[6-9]|2060|FEFF)>/g;
/** Link text that names a place: a URL, a host name (`bank.example`, `www.bank.example/login`) or a mail address. */
const NAMES_PLACE = /^\s*(?:[a-z][a-z\d+.-]*:(?:\/\/)?)?(?:[^\s@/]+@)?([^\s/?#:@]+\.[^\s/?#:@.]+)/i;

export function showHidden(s: string): string {
  return s.replace(HIDDEN_IN_LINK, (c) => `<U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}>`);
}

export function linkDestination(url: string): string | null {
  if (!/^(https?:|mailto:)/i.test(url)) return null;
  try {
    const u = new URL(url);
    return u.protocol === "mailto:" ? decodeURIComponent(u.pathname).toLowerCase() : u.hostname;
  } catch {
    return null;
  }
}

export function linkMisleads(text: string, dest: string): boolean {
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
