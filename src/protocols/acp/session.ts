/**
 * One ACP session on this connection: a `SessionRuntime` and the projection of its events onto `session/update`s
 * and `session/request_permission` requests.
 *
 * Contracts:
 * - Every update of a session goes out in runtime event order through one queue (update-queue.ts: superseded
 *   updates are folded together while the editor does not read); a prompt's answer is sent only after every update
 *   of its turn was written (`flush`).
 * - Assistant text deltas are backpressured: the runtime waits for each chunk to be written before the next, until
 *   the connection shuts down (`stopWaiting`: a turn being cancelled then is not held by an editor not reading).
 * - Tool calls: `tool_proposed` → `tool_call` (`pending`, kind, title, absolute locations, raw input, an edit's diff);
 *   `tool_started` → `in_progress`; `tool_completed` → `completed`/`failed` with the bounded output as text (an edit
 *   keeps its diff; a successful `todo_write` is followed by a `plan` update with its list). Reasoning summaries → `agent_thought_chunk`; context size → `usage_update`; the first prompt's
 *   title → `session_info_update`.
 * - Approvals: each `approval_requested` becomes one `session/request_permission` with allow once / allow always /
 *   reject once / reject always. "Always" answers are remembered for this session and tool name (later calls are
 *   answered without asking). A cancelled outcome, or an unknown option, denies. A turn cancelled while asking
 *   sends `$/cancel_request` for the pending ask; a question withdrawn before it was sent is not sent, and the
 *   client's answer to a withdrawn one is ignored (never remembered).
 * - When the client advertised `fs` / `terminal`, the session's tools read, write and run commands through it
 *   (`client-workspace.ts`); a command's terminal is shown with its call and stays in the call's final content.
 */
import type { AgentContext, ClientCapabilities, PermissionOption, SessionUpdate, StopReason, ToolCallContent } from "@agentclientprotocol/sdk";
import { mark } from "../../runtime/debug-timing.js";
import type { SessionEvent, SessionRuntime, SessionConfig } from "../../runtime/session/index.js";
import { clientWorkspace } from "./client-workspace.js";
import type { SessionChoices } from "./config-options.js";
import type { Unawaited } from "./unawaited.js";
import { UpdateQueue } from "./update-queue.js";
import { textContent, toolDiff, toolKind, toolLocations, toolPlan, toolTitle } from "./tool-view.js";

export type TurnEnd = { stopReason: StopReason } | { failed: SessionEvent & { type: "turn_failed" } };

const PERMISSION_OPTIONS: PermissionOption[] = [
  { optionId: "allow_once", name: "Allow", kind: "allow_once" },
  { optionId: "allow_always", name: "Always allow this tool", kind: "allow_always" },
  { optionId: "reject_once", name: "Reject", kind: "reject_once" },
  { optionId: "reject_always", name: "Always reject this tool", kind: "reject_always" },
];

export class AcpSession {
  /** Updates waiting to be written, coalesced while the editor does not read them. */
  private readonly out: UpdateQueue;
  private readonly calls = new Map<string, { name: string; args: Record<string, unknown> }>();
  /** Client terminals shown with a call (kept in its final content: a released terminal still displays). */
  private readonly terminals = new Map<string, ToolCallContent>();
  private readonly always = new Map<string, boolean>();
  private readonly ends = new Map<string, (end: TurnEnd) => void>();
  private readonly asking = new Map<string, AbortController>();
  /** Resolves once the connection shuts down: a turn no longer waits for its text to be written (`stopWaiting`). */
  private readonly shutdown: Promise<void>;
  private stopWaitingNow: () => void = () => undefined;
  /** Set while this connection's prompt waits for the runtime to start its turn: a cancel read then is kept here. */
  private starting: { cancelled: boolean } | null = null;
  /** A configuration change made while a turn ran, applied when it ends. */
  private pending: Partial<SessionConfig> | null = null;
  private readonly unsubscribe: () => void;

  constructor(
    readonly rt: SessionRuntime,
    private readonly client: AgentContext,
    public choices: SessionChoices,
    caps: ClientCapabilities,
    unawaited: Unawaited,
  ) {
    this.shutdown = new Promise((resolve) => (this.stopWaitingNow = resolve));
    const sessionId = rt.id;
    this.out = new UpdateQueue((update) => this.client.notify("session/update", { sessionId, update }));
    this.unsubscribe = rt.subscribe((e) => this.on(e));
    const workspace = clientWorkspace(client, rt.id, caps, {
      showTerminal: (callId, content) => {
        this.terminals.set(callId, content);
        void this.send({ sessionUpdate: "tool_call_update", toolCallId: callId, content: [content] });
      },
    }, unawaited);
    if (workspace !== undefined) this.configure({ workspace });
  }

  get id(): string {
    return this.rt.id;
  }

  get cwd(): string {
    return this.rt.config.cwd;
  }

  /** Sends one update after every earlier one (update-queue.ts); resolves once written (never rejects). */
  send(update: SessionUpdate): Promise<void> {
    return this.out.push(update);
  }

  /** Resolves after every update queued so far was written. */
  flush(): Promise<void> {
    return this.out.flush();
  }

  /** Resolves with the end of turn `turnId` (register before starting it). */
  expectEnd(turnId: string): Promise<TurnEnd> {
    return new Promise((resolve) => this.ends.set(turnId, resolve));
  }

  forgetEnd(turnId: string): void {
    this.ends.delete(turnId);
  }

  /** Marks a turn of this connection as starting; its `cancelled` records a `cancel` read before it runs. */
  beginStart(): { cancelled: boolean } {
    this.starting = { cancelled: false };
    return this.starting;
  }

  endStart(): void {
    this.starting = null;
  }

  /** `session/cancel`: cancels the running turn, or the one this connection is starting. */
  cancel(): void {
    if (this.starting !== null) this.starting.cancelled = true;
    this.rt.cancel();
  }

  /** Applies a configuration change now, or when the running turn ends. */
  configure(patch: Partial<SessionConfig>): void {
    if (!this.rt.configure(patch)) this.pending = { ...this.pending, ...patch };
  }

  /** Applies a change that waited for a turn to end (call before starting the next one). */
  applyPending(): void {
    if (this.pending !== null && this.rt.configure(this.pending)) this.pending = null;
  }

  /**
   * The connection is shutting down (EOF or a signal): the turn stops waiting for its text chunks to be written
   * (they are still written, in order, if the editor reads them), so its cancellation is not held up by an editor
   * that no longer reads stdout.
   */
  stopWaiting(): void {
    this.stopWaitingNow();
  }

  close(): void {
    this.unsubscribe();
  }

  private on(e: SessionEvent): void | Promise<boolean> {
    switch (e.type) {
      case "assistant_delta":
        return Promise.race([this.send({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: e.text } }), this.shutdown]).then(() => true);
      case "tool_proposed": {
        if (e.parentId !== undefined) return;
        this.calls.set(e.callId, { name: e.name, args: e.arguments });
        void this.send({
          sessionUpdate: "tool_call",
          toolCallId: e.callId,
          title: toolTitle(e.name, e.arguments),
          kind: toolKind(e.name),
          status: "pending",
          locations: toolLocations(e.name, e.arguments, this.cwd),
          content: toolDiff(e.name, e.arguments, this.cwd),
          rawInput: e.arguments,
        });
        return;
      }
      case "approval_requested":
        this.ask(e);
        return;
      case "approval_resolved": {
        const asking = e.cancelled ? this.asking.get(e.approvalId) : undefined;
        if (asking !== undefined) {
          mark("acp.permission_withdrawn");
          asking.abort();
        }
        return;
      }
      case "tool_started":
        if (e.parentId === undefined) void this.send({ sessionUpdate: "tool_call_update", toolCallId: e.callId, status: "in_progress" });
        return;
      case "tool_completed": {
        if (e.parentId !== undefined) return;
        const call = this.calls.get(e.callId);
        this.calls.delete(e.callId);
        const diff = call !== undefined && e.success ? toolDiff(call.name, call.args, this.cwd) : [];
        const terminal = this.terminals.get(e.callId);
        this.terminals.delete(e.callId);
        if (terminal !== undefined) diff.push(terminal);
        void this.send({
          sessionUpdate: "tool_call_update",
          toolCallId: e.callId,
          status: e.success ? "completed" : "failed",
          content: [...diff, ...textContent(e.output)],
          rawOutput: { output: e.output, truncated: e.truncated, ...(e.error !== undefined ? { error: e.error } : {}) },
        });
        const plan = call !== undefined && e.success ? toolPlan(call.name, call.args) : null;
        if (plan !== null) void this.send(plan);
        return;
      }
      case "runtime":
        if (e.event.type === "reasoning_summary" && e.event.parentId === undefined)
          void this.send({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: e.event.text } });
        else if (e.event.type === "context" && e.event.maxTokens > 0)
          void this.send({ sessionUpdate: "usage_update", used: e.event.currentTokens, size: e.event.maxTokens });
        return;
      case "title_changed":
        void this.send({ sessionUpdate: "session_info_update", title: e.title, updatedAt: new Date().toISOString() });
        return;
      case "turn_completed":
        return this.end(e.turnId, { stopReason: "end_turn" });
      case "turn_cancelled":
        return this.end(e.turnId, { stopReason: "cancelled" });
      case "turn_failed":
        return this.end(e.turnId, e.code === "step_limit" ? { stopReason: "max_turn_requests" } : { failed: e });
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
      case "turn_started":
      case "steered":
      case "question_requested":
      case "question_resolved":
        return;
    }
  }

  private end(turnId: string, end: TurnEnd): void {
    // Calls that never completed (the turn was cancelled before they ran) end failed.
    for (const id of this.calls.keys()) void this.send({ sessionUpdate: "tool_call_update", toolCallId: id, status: "failed" });
    this.calls.clear();
    const resolve = this.ends.get(turnId);
    this.ends.delete(turnId);
    resolve?.(end);
  }

  private ask(e: SessionEvent & { type: "approval_requested" }): void {
    const remembered = this.always.get(e.name);
    if (remembered !== undefined) {
      this.rt.resolveApproval(e.approvalId, remembered);
      return;
    }
    const ctl = new AbortController();
    this.asking.set(e.approvalId, ctl);
    const call = this.calls.get(e.callId);
    const args = call?.args ?? e.arguments;
    void (async () => {
      let approved = false;
      try {
        // The tool_call goes out before the question about it. (The marks let a test land a cancel in this wait.)
        mark("acp.permission_waits_for_updates");
        await this.flush();
        // Withdrawn (the turn was cancelled) while earlier updates were written: the question never goes out.
        if (ctl.signal.aborted) return;
        const r = await this.client.request(
          "session/request_permission",
          {
            sessionId: this.id,
            toolCall: {
              toolCallId: e.callId,
              title: toolTitle(e.name, args),
              kind: toolKind(e.name),
              status: "pending",
              locations: toolLocations(e.name, args, this.cwd),
              content: toolDiff(e.name, args, this.cwd),
            },
            options: PERMISSION_OPTIONS,
          },
          { cancellationSignal: ctl.signal, stopWaitingOnCancel: true },
        );
        // Withdrawn while asked: an answer the client sends anyway is no answer (an "always" is not remembered).
        if (ctl.signal.aborted) return;
        if (r.outcome.outcome === "selected") {
          const id = r.outcome.optionId;
          approved = id === "allow_once" || id === "allow_always";
          if (id === "allow_always" || id === "reject_always") this.always.set(e.name, approved);
        }
      } catch {
        approved = false;
      } finally {
        this.asking.delete(e.approvalId);
      }
      this.rt.resolveApproval(e.approvalId, approved);
    })();
  }
}
