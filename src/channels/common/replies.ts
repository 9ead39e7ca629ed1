/** What the bridge itself says in a chat (Berth's own words, not the model's), and how a prompt is fitted. */
import { utf8Length } from "../../core/utf8.js";
import { MAX_PROMPT_BYTES } from "../../protocols/scv/wire.js";
import { cutUtf8 } from "./text.js";

export const BUSY_REPLY = "Still working on your earlier messages; this one was not processed. Please send it again later.";
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
