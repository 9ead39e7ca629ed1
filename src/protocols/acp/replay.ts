/**
 * `session/load` replay: a session's durable history as the `session/update`s a client would have seen live.
 *
 * Contracts:
 * - Order is the file's order. A compaction checkpoint (the summary of everything before it) comes first, as an
 *   `agent_thought_chunk` headed "Summary of the earlier conversation".
 * - `user` → `user_message_chunk` (text), then one `resource_link` chunk per file attached to it (by another door:
 *   ACP's own inline images are not stored); `assistant` → `agent_message_chunk` with its final text (a later record of
 *   the same message replaces an earlier partial one, so each message appears once); raw thinking is never shown.
 * - `tool_call` → `tool_call` (kind, title, locations, raw input, the edit's diff; a successful `todo_write` also
 *   replays its `plan`), `tool_result` →
 *   `tool_call_update` (`completed` or `failed`, the result text; a successful edit keeps its diff, since an
 *   update's content replaces the call's). A call with no result (the turn was interrupted)
 *   ends `failed`.
 * - A turn that did not complete (its terminal is `failed` or `cancelled`: a process killed mid-turn, whose turn the
 *   runtime settles `failed` before a load replays, a provider error, a cancel) ends with one more
 *   `agent_message_chunk`, the note the model's context closes it with (`TURN_INTERRUPTED`), after its partial
 *   answer (a blank line between) and its unfinished calls: ACP updates carry no turn status, and without it the
 *   partial answer reads as a complete one. A last turn with no terminal (another process is running it) gets none.
 */
import { basename } from "node:path";
import { pathToFileURL } from "node:url";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import type { History } from "../../store/sessions/index.js";
import { TURN_INTERRUPTED } from "../../runtime/session/index.js";
import { textContent, toolDiff, toolKind, toolLocations, toolPlan, toolTitle } from "./tool-view.js";

export function replayUpdates(history: History, cwd: string): SessionUpdate[] {
  const out: SessionUpdate[] = [];
  if (history.checkpoint !== null) {
    out.push({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: `Summary of the earlier conversation:\n${history.checkpoint.summary}` } });
  }
  const messageAt = new Map<string, number>();
  /** Calls without a result yet: their name and arguments (a completed edit keeps showing its diff). */
  const open = new Map<string, { name: string; args: Record<string, unknown> }>();
  const closeOpenCalls = (): void => {
    for (const id of open.keys()) out.push({ sessionUpdate: "tool_call_update", toolCallId: id, status: "failed" });
    open.clear();
  };
  let turn: string | null = null;
  for (const r of history.records) {
    if ("turn_id" in r && r.turn_id !== turn) {
      closeOpenCalls();
      turn = r.turn_id;
    }
    switch (r.kind) {
      case "user":
        out.push({ sessionUpdate: "user_message_chunk", content: { type: "text", text: r.text } });
        for (const a of r.attachments ?? []) {
          out.push({
            sessionUpdate: "user_message_chunk",
            content: { type: "resource_link", name: a.name ?? basename(a.path), uri: pathToFileURL(a.path).href, ...(a.mime !== undefined ? { mimeType: a.mime } : {}), ...(a.size !== undefined ? { size: a.size } : {}) },
          });
        }
        break;
      case "assistant": {
        const key = `${r.turn_id}\u0000${r.message_id}`;
        const at = messageAt.get(key);
        const update: SessionUpdate = { sessionUpdate: "agent_message_chunk", content: { type: "text", text: r.text } };
        if (at !== undefined) out[at] = update;
        else if (r.text !== "") {
          messageAt.set(key, out.length);
          out.push(update);
        }
        break;
      }
      case "tool_call":
        open.set(r.call_id, { name: r.name, args: r.arguments });
        out.push({
          sessionUpdate: "tool_call",
          toolCallId: r.call_id,
          title: toolTitle(r.name, r.arguments),
          kind: toolKind(r.name),
          status: "in_progress",
          locations: toolLocations(r.name, r.arguments, cwd),
          content: toolDiff(r.name, r.arguments, cwd),
          rawInput: r.arguments,
        });
        break;
      case "tool_result": {
        const call = open.get(r.call_id);
        open.delete(r.call_id);
        out.push({
          sessionUpdate: "tool_call_update",
          toolCallId: r.call_id,
          status: r.is_error ? "failed" : "completed",
          content: [...(call !== undefined && !r.is_error ? toolDiff(call.name, call.args, cwd) : []), ...textContent(r.content)],
        });
        const plan = call !== undefined && !r.is_error ? toolPlan(call.name, call.args) : null;
        if (plan !== null) out.push(plan);
        break;
      }
      case "terminal":
        if (r.status !== "completed") {
          closeOpenCalls();
          const after = out.at(-1)?.sessionUpdate === "agent_message_chunk" ? "\n\n" : "";
          out.push({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: `${after}${TURN_INTERRUPTED}` } });
        }
        break;
      case "checkpoint":
        break;
    }
  }
  closeOpenCalls();
  return out.filter((u) => !(u.sessionUpdate === "agent_message_chunk" && u.content.type === "text" && u.content.text === ""));
}
