/**
 * One Berth session's runtime events projected onto live-backend events (the session's sequenced stream).
 * Contracts:
 *  - `turn_started` becomes `user_message` (with the follow-up's `pendingId` when it came from the queue);
 *  - text deltas become `text_delta` in order; a delta waits for socket backpressure (never dropped);
 *  - reasoning summaries become `thinking_delta`;
 *  - a tool call is announced once, with a turn-unique `toolCallId`: by `tool_confirmation_requested` when the
 *    approval policy asks (the AHP client answers with `confirm_tool`), else by `tool_started` when it starts or
 *    completes; `tool_completed` carries the outcome and error kind, not the output; a call the user denied is
 *    already reported by the confirmation and is not completed again; its `output` is the tool's output bounded to
 *    `TOOL_OUTPUT_MAX_BYTES` (head kept, a note says how much was cut);
 *  - a steering message injected into the running turn becomes `user_message` (its AHP pending-message ID as
 *    `pendingId`); one that became a prompt of its own is reported like a follow-up when its turn starts;
 *  - a `question` becomes `input_requested` (one question `answer`, options `o0`…), its resolution `input_resolved`
 *    (with the winning `complete_input` command ID when a client answered);
 *  - the terminal becomes `usage` then `settled` (`cancelled`, or `error` naming the failure).
 */
import type { SessionEvent } from "../../runtime/session/index.js";
import { truncateUtf8 } from "../../core/utf8.js";
import { turnFailureHint } from "../../core/provider-hint.js";
import { inputRequest, resolution } from "./parse.js";

import type { Json } from "../../core/json-bounds.js";

/** Emit one session event; a returned promise resolves when the socket accepted more data. */
export type EmitEvent = (event: Json) => void | Promise<void>;

const MAX_INPUT_CHARS = 64 * 1024;
/** The most tool output one `tool_completed` carries (UTF-8 bytes, before the note). */
export const TOOL_OUTPUT_MAX_BYTES = 16 * 1024;

export function boundOutput(text: string): string {
  const cut = truncateUtf8(text, TOOL_OUTPUT_MAX_BYTES);
  if (cut.length === text.length) return text;
  return `${cut}\n[… ${Buffer.byteLength(text, "utf8") - Buffer.byteLength(cut, "utf8")} more bytes not shown]`;
}

interface ToolState {
  id: string;
  name: string;
  announced: boolean;
  approvalId?: string;
}

export class HostProjection {
  private tools = new Map<string, ToolState>(); // unique id -> state
  private open = new Map<string, string[]>(); // raw call id -> unique ids not yet completed
  /** Queue entry → the follow-up's pending-message ID. */
  readonly pendingIds = new Map<string, string>();
  /** Question ID → the `complete_input` command that answered it (set just before the answer). */
  readonly answeredBy = new Map<string, string>();
  /** Turns whose user message the host already holds (a chat's initial turn): not echoed. */
  readonly silentTurns = new Set<string>();

  constructor(
    private readonly emit: EmitEvent,
    private readonly onTitle: (title: string) => boolean,
  ) {}

  /** The approval ID of a pending confirmation by its announced `toolCallId`. */
  approvalOf(toolCallId: string): string | undefined {
    return this.tools.get(toolCallId)?.approvalId;
  }

  private uniqueId(raw: string, parentId: string | undefined): string {
    const base = (parentId !== undefined ? `${parentId}:${raw}` : raw).slice(0, 400);
    let id = base;
    for (let k = 2; this.tools.has(id); k++) id = `${base}#${k}`;
    return id;
  }

  private current(raw: string): ToolState | undefined {
    const ids = this.open.get(raw);
    const id = ids?.[ids.length - 1];
    return id !== undefined ? this.tools.get(id) : undefined;
  }

  private announce(t: ToolState): void {
    if (t.announced) return;
    t.announced = true;
    void this.emit({ type: "tool_started", toolCallId: t.id, toolName: t.name });
  }

  /** Projects one event; a delta's promise resolves `true` once the socket took it. */
  on(e: SessionEvent): void | boolean | Promise<boolean> {
    switch (e.type) {
      case "turn_started": {
        this.tools = new Map();
        this.open = new Map();
        const pendingId = e.queueId !== undefined ? this.pendingIds.get(e.queueId) : undefined;
        if (e.queueId !== undefined) this.pendingIds.delete(e.queueId);
        if (this.silentTurns.delete(e.turnId)) return;
        void this.emit({ type: "user_message", text: e.prompt, turnId: e.turnId, ...(pendingId !== undefined ? { pendingId } : {}) });
        return;
      }
      case "steered":
        void this.emit({ type: "user_message", text: e.text, turnId: e.turnId, ...(e.ref !== undefined ? { pendingId: e.ref } : {}) });
        return;
      case "queue_enqueued":
        if (e.steerRef !== undefined) this.pendingIds.set(e.entry.queue_id, e.steerRef);
        return;
      case "question_requested":
        void this.emit({ type: "input_requested", request: inputRequest(e.questionId, e.turnId, e.question) });
        return;
      case "question_resolved": {
        // A withdrawn question (its turn was cancelled) is retired by the turn's settlement on the host.
        if (e.answer.kind === "cancelled") return;
        const commandId = this.answeredBy.get(e.questionId);
        this.answeredBy.delete(e.questionId);
        const r = resolution(e.answer);
        void this.emit({ type: "input_resolved", requestId: e.questionId, ...r, source: commandId !== undefined ? "client" : "runtime", ...(commandId !== undefined ? { commandId } : {}) });
        return;
      }
      case "title_changed":
        if (this.onTitle(e.title)) void this.emit({ type: "title_changed", title: e.title });
        return;
      case "assistant_delta": {
        const r = this.emit({ type: "text_delta", text: e.text });
        return r === undefined ? true : r.then(() => true);
      }
      case "runtime":
        if (e.event.type === "reasoning_summary" && e.event.text !== "") void this.emit({ type: "thinking_delta", text: e.event.text });
        return;
      case "tool_proposed": {
        const t: ToolState = { id: this.uniqueId(e.callId, e.parentId), name: e.name, announced: false };
        this.tools.set(t.id, t);
        this.open.set(e.callId, [...(this.open.get(e.callId) ?? []), t.id]);
        return;
      }
      case "approval_requested": {
        const t = this.current(e.callId);
        if (t === undefined) return;
        let input = JSON.stringify(e.arguments);
        if (input.length > MAX_INPUT_CHARS) input = input.slice(0, MAX_INPUT_CHARS);
        t.announced = true;
        t.approvalId = e.approvalId;
        void this.emit({ type: "tool_confirmation_requested", toolCallId: t.id, toolName: t.name, input, title: `Allow ${t.name}?`, message: t.name });
        return;
      }
      case "approval_resolved": {
        for (const t of this.tools.values()) if (t.approvalId === e.approvalId) delete t.approvalId;
        return;
      }
      case "tool_started": {
        const t = this.current(e.callId);
        if (t !== undefined) this.announce(t);
        return;
      }
      case "tool_completed": {
        const t = this.current(e.callId);
        if (t === undefined) return;
        const ids = (this.open.get(e.callId) ?? []).filter((x) => x !== t.id);
        if (ids.length > 0) this.open.set(e.callId, ids);
        else this.open.delete(e.callId);
        if (e.error === "denied" && t.announced) return; // the confirmation already reported it
        this.announce(t);
        const status = e.success ? "" : `[${e.error ?? "failed"}${e.timedOut === true ? ", timed out" : ""}] `;
        const output = boundOutput(status + e.output);
        void this.emit({ type: "tool_completed", toolCallId: t.id, toolName: t.name, output, isError: !e.success });
        return;
      }
      case "turn_completed":
      case "turn_cancelled":
      case "turn_failed": {
        const u = e.usage;
        void this.emit({ type: "usage", inputTokens: u.inputTokens, outputTokens: u.outputTokens, cacheReadTokens: u.cacheReadTokens });
        const settled: Json = { type: "settled", cancelled: e.type === "turn_cancelled" };
        // The same cause-and-fix hint as `berth chat` (the URL already without user name, password or query; wait and
        // retry for a rate limit or an overloaded provider).
        if (e.type === "turn_failed") settled.error = `turn failed: ${e.message} (${e.code})${turnFailureHint(e.message, e.code, e.providerUrl ?? null)}`;
        void this.emit(settled);
        return;
      }
      case "assistant_completed":
      case "context_compacted":
      case "paused":
      case "queue_dequeued":
      case "queue_enqueued":
      case "queue_moved":
      case "queue_removed":
      case "queue_snapshot":
      case "queue_updated":
      case "session_cleared":
      case "session_trimmed":
      case "tool_progress":
        return;
    }
  }
}
