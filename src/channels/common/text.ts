/**
 * Reply text shaping shared by both bridges. Pure.
 * - `shapeReply` caps a turn's answer at 64 KiB (UTF-8) with a truncation marker, then splits it at character
 *   boundaries into parts of at most `partBytes`.
 * - `systemMessage` wraps the bridge's own words: WeChat shows them in a fenced block whose first line starts
 *   `system msg: ` (the fence is longer than any backtick run inside); Feishu shows them plain.
 */
import { splitUtf8, utf8Length } from "../../core/utf8.js";

export const REPLY_CAP_BYTES = 64 * 1024;
export const TRUNCATION_MARKER = "\n\n[reply truncated]";

/** Cuts `s` to at most `maxBytes` UTF-8 bytes without splitting a character. */
export function cutUtf8(s: string, maxBytes: number): string {
  if (utf8Length(s) <= maxBytes) return s;
  return splitUtf8(s, Math.max(4, maxBytes))[0] ?? "";
}

export function shapeReply(text: string, partBytes: number): string[] {
  let body = text;
  if (utf8Length(body) > REPLY_CAP_BYTES) body = cutUtf8(body, REPLY_CAP_BYTES - utf8Length(TRUNCATION_MARKER)) + TRUNCATION_MARKER;
  if (body === "") return [];
  return splitUtf8(body, partBytes);
}

export function systemMessage(platform: "wechat" | "feishu", text: string): string {
  if (platform === "feishu") return text;
  let longest = 0;
  for (const m of text.matchAll(/`+/g)) longest = Math.max(longest, m[0].length);
  const fence = "`".repeat(Math.max(3, longest + 1));
  return `${fence}\nsystem msg: ${text}\n${fence}`;
}

/** Carries held (earlier refused) replies in front of the new one. */
export function withHeld(held: readonly string[], reply: string): string {
  if (held.length === 0) return reply;
  const earlier = held.map((h) => `[earlier reply]\n${h}`).join("\n\n");
  return `${earlier}\n\n[reply to your latest message]\n${reply}`;
}
