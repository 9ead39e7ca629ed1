/**
 * One running Berth turn, projected onto live-backend events (the session's sequenced stream).
 * Contracts:
 *  - text deltas become `text_delta` in order; a delta waits for socket backpressure (never dropped);
 *  - reasoning summaries become `thinking_delta`;
 *  - a tool call is announced once, with a turn-unique `toolCallId`: by `tool_confirmation_requested`
 *    when the approval gate asks (the AHP client answers with `confirm_tool`), else by
 *    `tool_started` when it starts or completes; `tool_completed` carries no tool output (the
 *    runtime exposes none to adapters) but the outcome and error kind; a call the user denied is
 *    already reported by the confirmation and is not completed again;
 *  - cancelling the turn's signal releases every pending approval (`cancelled`, never `deny`).
 */
import type { ApprovalPolicy, ApprovalRequest, ApprovalDecision } from "../../../runtime/approval.js";
import type { RuntimeEvent, TurnSink } from "../../../runtime/events.js";

type Json = Record<string, unknown>;

/** Emit one session event; a returned promise resolves when the socket accepted more data. */
export type EmitEvent = (event: Json) => void | Promise<void>;

/** Tools that only read are run without asking; every other tool (writes, bash, MCP, unknown) asks. */
export const READ_ONLY_TOOLS = new Set(["read", "grep", "glob", "ls", "task", "read_skill"]);
export function defaultApprovalPolicy(toolName: string): "auto" | "ask" {
  return READ_ONLY_TOOLS.has(toolName) ? "auto" : "ask";
}

const MAX_INPUT_CHARS = 64 * 1024;

interface ToolState {
  id: string;
  name: string;
  announced: boolean;
  pending?: (d: ApprovalDecision) => void;
}

export class BerthTurn {
  readonly ctl = new AbortController();
  private readonly tools = new Map<string, ToolState>(); // unique id -> state
  private readonly open = new Map<string, string[]>(); // raw call id -> unique ids not yet completed

  constructor(
    readonly turnId: string,
    private readonly emit: EmitEvent,
    private readonly policy: (toolName: string) => "auto" | "ask" = defaultApprovalPolicy,
  ) {
    this.ctl.signal.addEventListener("abort", () => {
      for (const t of this.tools.values()) t.pending?.("deny");
    });
  }

  readonly sink: TurnSink = {
    delta: async (text) => {
      await this.emit({ type: "text_delta", text });
      return true;
    },
    event: (e) => this.onEvent(e),
  };

  readonly approval: ApprovalPolicy = {
    policy: (name) => this.policy(name),
    ask: (req) => this.ask(req),
  };

  /** Answer a pending confirmation; false when no confirmation is pending for that call. */
  confirm(toolCallId: string, approved: boolean): boolean {
    const t = this.tools.get(toolCallId);
    if (!t?.pending) return false;
    const resolve = t.pending;
    t.pending = undefined;
    resolve(approved ? "approve" : "deny");
    return true;
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

  private onEvent(e: RuntimeEvent): void {
    if (e.type === "reasoning_summary") {
      if (e.text !== "") void this.emit({ type: "thinking_delta", text: e.text });
      return;
    }
    if (e.type !== "tool") return;
    if (e.phase === "proposed") {
      const t: ToolState = { id: this.uniqueId(e.callId, e.parentId), name: e.name, announced: false };
      this.tools.set(t.id, t);
      this.open.set(e.callId, [...(this.open.get(e.callId) ?? []), t.id]);
      return;
    }
    const t = this.current(e.callId);
    if (!t) return;
    if (e.phase === "started") return this.announce(t);
    if (e.phase !== "completed") return;
    const ids = this.open.get(e.callId)!.filter((x) => x !== t.id);
    if (ids.length > 0) this.open.set(e.callId, ids);
    else this.open.delete(e.callId);
    if (e.errorKind === "denied" && t.announced) return; // the confirmation already reported it
    this.announce(t);
    const output = e.isError ? `${e.errorKind ?? "failed"}${e.timedOut ? " (timed out)" : ""}` : "completed";
    void this.emit({ type: "tool_completed", toolCallId: t.id, toolName: t.name, output, isError: e.isError === true });
  }

  private ask(req: ApprovalRequest): Promise<ApprovalDecision> {
    const t = this.current(req.callId);
    if (!t || req.signal.aborted) return Promise.resolve("deny");
    let input = JSON.stringify(req.arguments);
    if (input.length > MAX_INPUT_CHARS) input = input.slice(0, MAX_INPUT_CHARS);
    t.announced = true;
    return new Promise<ApprovalDecision>((resolve) => {
      t.pending = resolve;
      void this.emit({ type: "tool_confirmation_requested", toolCallId: t.id, toolName: t.name, input, title: `Allow ${t.name}?`, message: t.name });
    });
  }
}
