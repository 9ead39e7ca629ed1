/** What the bridge itself says in a chat (Berth's own words, not the model's), and how a prompt is fitted. */
import { utf8Length } from "../../core/utf8.js";
import { MAX_PROMPT_BYTES } from "../../protocols/scv/wire.js";
import { cutUtf8 } from "./text.js";

export const BUSY_REPLY = "Still working on your earlier messages; this one was not processed. Please send it again later.";
/** A conversation gets at most one busy notice per window, and at most this many conversations get one per window. */
export const BUSY_WINDOW_MS = 60_000;
export const BUSY_NOTICES_PER_WINDOW = 64;
export const TURN_TIMEOUT_REPLY = "That took too long and was stopped. Please try again, perhaps with a smaller request.";
export const FAILURE_REPLY = "Your previous message was interrupted by a restart and was not processed. Please send it again.";
/** Prompt text for a forwarded bundle whose messages could not be fetched. */
export const FORWARD_UNREADABLE = "[forwarded messages that could not be read]";
export const TURN_FAILED_REPLY = "Sorry, that request failed. Please try again.";
export const NOTHING_READABLE_REPLY = "I can only read text, images and files here.";
export const NO_TRANSCRIPT_REPLY = "I can't listen to voice messages; please type your message.";

/**
 * The session host refuses a `turn.start` prompt over MAX_PROMPT_BYTES, and the user would get only "that request
 * failed" however often they retried: a longer message (a huge paste, a forwarded bundle of 50 long CJK messages)
 * is cut at a character boundary and this note tells the model so. Media notes are kept whole.
 */
export const PROMPT_TRUNCATED = `\n[message truncated: it was longer than ${MAX_PROMPT_BYTES / 1024} KiB]`;

export function fitPrompt(text: string, notes: readonly string[]): string {
  const tail = notes.filter((t) => t !== "").join("\n");
  const room = MAX_PROMPT_BYTES - (tail === "" ? 0 : utf8Length(tail) + 1);
  if (utf8Length(text) > room) text = cutUtf8(text, room - utf8Length(PROMPT_TRUNCATED)) + PROMPT_TRUNCATED;
  return [text, tail].filter((t) => t !== "").join("\n");
}

/**
 * Which busy messages get a notice: a chat that floods the bot while its turns run gets one notice a minute, not one
 * per message, and a flood across many chats gets at most BUSY_NOTICES_PER_WINDOW a minute. The rest are dropped
 * silently (the bridge marks them seen), as the notice they would repeat already told their chat.
 */
export class BusyThrottle {
  /** Conversation → when its last notice was allowed; only entries within the window are kept. */
  private readonly last = new Map<string, number>();

  /** True when `conversation` may get a busy notice at `now` (the notice then counts). */
  allow(conversation: string, now: number): boolean {
    for (const [c, t] of this.last) if (now - t >= BUSY_WINDOW_MS || now < t) this.last.delete(c);
    if (this.last.has(conversation) || this.last.size >= BUSY_NOTICES_PER_WINDOW) return false;
    this.last.set(conversation, now);
    return true;
  }
}
