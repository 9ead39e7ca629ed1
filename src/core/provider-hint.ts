/**
 * The cause-and-fix tail of a failed turn's message (the provider's base URL to check, or to wait and send the prompt
 * again), shared by every door that shows a failure (`berth chat`, the Berth backend for AHP clients) so they say the
 * same thing. Contracts: `shown` is the URL as `urlForDisplay` gives it (never a user name, password or query: any of
 * them can carry the key); a hint is "" for a message it has nothing to add to.
 */

/**
 * The hint for a turn failure `msg` (the runtime's message, its provider label included) of a provider whose base URL
 * is `shown`: a provider that could not be connected to gets "is <url> reachable?" (or, for an https URL whose server
 * broke off the TLS handshake, the http:// URL to try); one that answered a bare 404 or no stream, the URL it is set to.
 */
export function providerUrlHint(msg: string, shown: string): string {
  if (msg.includes("provider connection failed")) {
    // EPROTO from an https URL: most often a plain-HTTP server (such as a local model server) written with https://.
    if (/\(EPROTO\b/.test(msg) && shown.startsWith("https://"))
      return `; ${shown} did not complete a TLS handshake: if that server speaks plain HTTP, set the provider's base_url to http://${shown.slice(8)} in settings.json`;
    return `; is ${shown} reachable?`;
  }
  if (msg.includes("check the provider's base_url")) return `; it is set to ${shown}`;
  return "";
}

/**
 * The hint for a failed turn with runtime message `msg` and failure `code`: the base-URL hint when `shown` (the
 * provider's base URL, when it has one of its own) explains it, else, for a provider failure that may pass (a rate
 * limit, an overloaded or failing server), what to do: wait and send the prompt again. That one needs no URL, so a
 * built-in provider gets it too.
 */
export function turnFailureHint(msg: string, code: string, shown: string | null): string {
  const urlHint = shown === null ? "" : providerUrlHint(msg, shown);
  if (urlHint !== "" || code !== "provider_error") return urlHint;
  if (msg.includes("provider rate limit (")) return "; the provider limits how often this key may ask: wait a minute, then send the prompt again";
  if (msg.includes("provider overloaded or unavailable (")) return "; the provider is failing or overloaded: send the prompt again in a minute";
  return "";
}
