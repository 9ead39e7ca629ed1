/**
 * Durable session history → model messages (the context of the next turn).
 *
 * Contracts:
 * - Input: `SessionStore.readHistory` output (the last valid checkpoint and the records after its cutoff).
 * - A checkpoint summary becomes a leading user text part.
 * - Assistant text segments (`<message>.<n>`) of one message are joined in order; tool calls attach to their
 *   message; tool results follow as `tool` messages. A tool call without a result (crash, cancellation) gets a
 *   synthetic error result so every provider sees a well-formed exchange.
 * - User records are never glued together: a turn that ended cancelled or failed (or never ended: a crash) is
 *   closed by an assistant note saying it was interrupted (after its partial text, which is kept), so the next
 *   prompt stands on its own. A checkpoint with an empty summary (a cleared session) contributes nothing.
 * - A user record's attachments are listed after its text (the images themselves are not re-sent).
 * - The list never starts with a non-user message.
 */
import type { History, StoredRecord } from "../store/sessions/index.js";
import type { AssistantBlock, Message, UserContent } from "./types.js";
import { attachmentNote, imageType } from "./session/attachments.js";
import type { UserAttachment } from "../store/sessions/index.js";

export const SUMMARY_PREFIX = "Summary of the earlier conversation (compacted):\n";
const INTERRUPTED = "The tool call did not complete (interrupted).";
export const TURN_INTERRUPTED = "[This reply was interrupted before it finished.]";

interface OpenAssistant {
  base: string;
  turn: string;
  text: string;
  calls: Array<{ id: string; name: string; arguments: Record<string, unknown> }>;
}

/** Image attachments of earlier user records, oldest first: the message each belongs to (an index into the result). */
export interface HistoryImage {
  message: number;
  attachment: UserAttachment;
}

export function historyToMessages(h: History | null, images?: HistoryImage[]): Message[] {
  const out: Message[] = [];
  if (h?.checkpoint && h.checkpoint.summary !== "") pushUser(out, [{ type: "text", text: SUMMARY_PREFIX + h.checkpoint.summary }]);
  if (h === null) return out;
  let cur: OpenAssistant | null = null;
  /** The turn whose user record was seen and whose terminal was not. */
  let openTurn: string | null = null;
  /** Closes an interrupted turn: its partial text stays, a note follows (merged into a trailing assistant text). */
  const interrupted = (): void => {
    const last = out[out.length - 1];
    if (last?.role === "assistant" && last.content.every((b) => b.type !== "tool_call")) last.content = [...last.content, { type: "text", text: TURN_INTERRUPTED }];
    else if (last !== undefined) out.push({ role: "assistant", content: [{ type: "text", text: TURN_INTERRUPTED }] });
  };
  let awaiting = new Map<string, string>(); // call id → name, results still missing
  const closeResults = (): void => {
    for (const [id, name] of awaiting) out.push({ role: "tool", toolCallId: id, toolName: name, content: INTERRUPTED, isError: true });
    awaiting = new Map();
  };
  const flush = (): void => {
    if (cur === null) return;
    const blocks: AssistantBlock[] = [];
    if (cur.text !== "") blocks.push({ type: "text", text: cur.text });
    for (const c of cur.calls) {
      blocks.push({ type: "tool_call", id: c.id, name: c.name, arguments: c.arguments });
      awaiting.set(c.id, c.name);
    }
    if (blocks.length > 0 && out.length > 0) out.push({ role: "assistant", content: blocks });
    else awaiting = new Map();
    cur = null;
  };
  const open = (r: StoredRecord & { turn_id: string }, base: string): OpenAssistant => {
    if (cur !== null && cur.base === base && cur.turn === r.turn_id) return cur;
    flush();
    closeResults();
    return (cur = { base, turn: r.turn_id, text: "", calls: [] });
  };
  for (const r of h.records) {
    switch (r.kind) {
      case "user": {
        flush();
        closeResults();
        const steering = r.turn_id === openTurn;
        if (!steering && openTurn !== null) interrupted();
        const text = r.text + attachmentNote(r.attachments ?? [], true);
        // A leading summary and the first prompt share one message; otherwise every record is its own message.
        if (out.length === 1 && h.checkpoint !== null && h.checkpoint.summary !== "" && !steering) pushUser(out, [{ type: "text", text }]);
        else out.push({ role: "user", content: [{ type: "text", text }] });
        for (const a of r.attachments ?? []) if (imageType(a) !== null) images?.push({ message: out.length - 1, attachment: a });
        openTurn = r.turn_id;
        break;
      }
      case "assistant": {
        const dot = r.message_id.lastIndexOf(".");
        open(r, dot > 0 ? r.message_id.slice(0, dot) : r.message_id).text += r.text;
        break;
      }
      case "tool_call":
        open(r, r.message_id).calls.push({ id: r.call_id, name: r.name, arguments: r.arguments });
        break;
      case "tool_result":
        flush();
        if (awaiting.delete(r.call_id)) out.push({ role: "tool", toolCallId: r.call_id, toolName: r.name, content: r.content, isError: r.is_error });
        break;
      case "terminal":
        flush();
        closeResults();
        if (r.status !== "completed" && r.turn_id === openTurn) interrupted();
        openTurn = null;
        break;
      case "checkpoint":
        break;
    }
  }
  flush();
  closeResults();
  if (openTurn !== null) interrupted();
  return out;
}

/** Appends user content, merging into a trailing user message. */
export function pushUser(out: Message[], content: UserContent[]): void {
  const last = out[out.length - 1];
  if (last !== undefined && last.role === "user") last.content = [...last.content, ...content];
  else out.push({ role: "user", content });
}
