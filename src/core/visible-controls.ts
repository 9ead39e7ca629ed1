/**
 * Invisible controls in text from outside Berth (a model's tool calls, tool output, code in an answer) made visible
 * for a page: the web UI's approval cards and code. Pure. The terminal's counterpart is `cli/terminal-safe.ts`.
 *
 * Why: a bidirectional override or isolate reorders what is shown ("Trojan Source"), so a command can look like
 * another one in the card that asks the user to approve it; C0 and C1 controls show as nothing at all.
 * Contract: every bidirectional control, C0 control but tab and newline, DEL, C1 control, and U+2028/U+2029 is shown
 * as `<U+XXXX>`; CRLF becomes LF and a lone CR a line break (a page cannot be overwritten, so every state of a
 * progress line stays in view). Text without any of them comes back as the same string.
 */

/** The bidirectional controls: Arabic letter mark, LRM, RLM, the embeddings and overrides, the isolates. */
export const BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069";

const HIDDEN = new RegExp(`\r\n?|[\u0000-\u0008\u000b-\u000c\u000e-\u001f\u007f-\u009f${BIDI_CONTROLS}\u2028\u2029]`, "g");

/** Every control `visibleOnOneLine` shows: those above, and tab, CR and LF too. */
const OFF_LINE = new RegExp(`[\u0000-\u001f\u007f-\u009f${BIDI_CONTROLS}\u2028\u2029]`, "g");

const codePoint = (c: string): string => `<U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}>`;

export function visibleControls(text: string): string {
  HIDDEN.lastIndex = 0;
  if (!HIDDEN.test(text)) return text;
  HIDDEN.lastIndex = 0;
  return text.replace(HIDDEN, (c) => (c[0] === "\r" ? "\n" : codePoint(c)));
}

/**
 * `text` kept on one line (a name, a URI, a MIME type quoted into a one-line label): every control `visibleControls`
 * shows, and tab, CR and LF too, as `<U+XXXX>`. Text without any of them comes back as the same string.
 */
export function visibleOnOneLine(text: string): string {
  OFF_LINE.lastIndex = 0;
  if (!OFF_LINE.test(text)) return text;
  OFF_LINE.lastIndex = 0;
  return text.replace(OFF_LINE, codePoint);
}
