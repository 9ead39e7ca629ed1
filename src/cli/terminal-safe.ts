/**
 * Text from outside Berth (the model's answers and tool arguments, tool output, file contents in an approval card,
 * a repository's settings) made safe to print on the user's terminal. Pure.
 *
 * Why: such text can carry terminal controls. An escape sequence or a carriage return in a bash command could erase
 * or overwrite the line of an approval card (`rm -rf ~ \r$ ls` shows as `$ ls`), conceal text (SGR 8), retitle the
 * window or move the cursor; bidirectional-override characters can reorder what is shown ("Trojan Source").
 * Contract: every C0 control but tab (and newline when `multiline`) is shown in caret notation (ESC as `^[`), DEL
 * as `^?`, a C1 control or a bidirectional control as `<U+XXXX>`; a carriage return is dropped (it only ever
 * overwrites; CRLF becomes LF, also when split across stream chunks). Everything else is unchanged, so text
 * without controls comes back as the same string.
 */
import { wellFormedJson } from "../core/text-policy.js";
import { BIDI_CONTROLS as BIDI } from "../core/visible-controls.js";

// C0 but tab (and newline, in multi-line text), DEL, C1; the bidi embeddings, overrides, isolates and marks.
const MULTI = new RegExp(`[\u0000-\u0008\u000b-\u001f\u007f-\u009f${BIDI}]`, "g");
const SINGLE = new RegExp(`[\u0000-\u0008\u000a-\u001f\u007f-\u009f${BIDI}]`, "g");

function visible(c: string, multiline: boolean): string {
  const code = c.charCodeAt(0);
  if (code === 0x0a) return multiline ? c : "^J";
  if (code === 0x0d) return "";
  if (code < 0x20) return "^" + String.fromCharCode(code + 64);
  if (code === 0x7f) return "^?";
  return `<U+${code.toString(16).toUpperCase().padStart(4, "0")}>`;
}

export function terminalSafe(text: string, multiline = true): string {
  const re = multiline ? MULTI : SINGLE;
  re.lastIndex = 0;
  if (!re.test(text)) return text;
  re.lastIndex = 0;
  return text.replace(re, (c) => visible(c, multiline));
}

// Outside JSON strings a JSON text is ASCII, so these can only be string content: escaping them keeps the value.
const JSON_CONTROLS = new RegExp(`[\u007f-\u009f${BIDI}\u2028\u2029]`, "g");

/**
 * `v` as one line of JSON (newline-terminated) that a strict parser accepts and a terminal cannot obey: a lone
 * surrogate (which `JSON.stringify` writes as a `\udXXX` escape, rejected by strict parsers) becomes U+FFFD; DEL, C1
 * controls, bidirectional controls and U+2028/U+2029 are written as `\u` escapes (the parsed value is unchanged; C0
 * controls are escaped by `JSON.stringify` already).
 */
export function jsonLine(v: unknown): string {
  return JSON.stringify(wellFormedJson(v)).replace(JSON_CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`) + "\n";
}
