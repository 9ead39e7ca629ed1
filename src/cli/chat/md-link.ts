/**
 * How the terminal renderer (markdown.ts) shows a markdown link `[text](url)`. Pure; no I/O.
 *
 * Why: the text is the model's, so possibly an attacker's (a prompt-injected model quoting a hostile file), and a
 * link's text can claim to go elsewhere: `[https://bank.example](https://evil.example)`, `[e\u202Egpj.exe](…)`
 * (reads "eexe.jpg"), `[bank\u200b.example](…)`. A terminal shows no link target on hover, so the URL itself is shown.
 * Contract: `shownLink` returns the text and the URL to print, both with bidirectional controls and zero-width
 * characters as `<U+XXXX>`; `url` is null when the text is the URL itself (or a `mailto:` link's address), shown once;
 * `goesTo` is the real host (or mail address) when the text names a place (a URL, a host name, a mail address)
 * other than where the link goes (core/link-check.ts, the web UI's rule too), `www.` ignored; else null.
 */
import { linkDestination, linkMisleads, showHidden } from "../../core/link-check.js";

export interface ShownLink {
  text: string;
  url: string | null;
  goesTo: string | null;
}

export function shownLink(text: string, url: string): ShownLink {
  const t = text.trim();
  if (t === url || `mailto:${t}` === url) return { text: showHidden(text), url: null, goesTo: null };
  const dest = linkDestination(url);
  return { text: showHidden(text), url: showHidden(url), goesTo: dest !== null && linkMisleads(text, dest) ? showHidden(dest) : null };
}
