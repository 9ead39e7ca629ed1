/**
 * Generic lifecycle events derived from what a running turn already reports, so every door can show what the
 * runtime is doing, not only subagents. A `TurnSink` wrapper; it adds events and never drops or reorders the
 * wrapped sink's own calls. Contracts (each unit: one start, optional updates, at most one finish):
 * - `tool`: a proposed call starts `queued` (awaiting validation, approval or earlier calls), is `running` once
 *   started, and finishes `completed`, `failed` or `cancelled` with the call's result. IDs are per call (and per
 *   subagent: child calls carry the subagent task as parent).
 * - `assistant`: a provider response of the main loop that streams text starts `writing` just before its first
 *   delta is offered and finishes `completed` when its text ends: just before the response's first tool call, its
 *   usage report, the next request's context count, or the turn's end, whichever comes first.
 * - `compaction`: an attempt starts `queued` when triggered, `running` while summarizing, and finishes with its
 *   outcome.
 * - `end(status)` finishes every unit still open with the turn's outcome (completed → completed, cancelled →
 *   cancelled, anything else → failed).
 */
import type { LifecycleStatus, RuntimeEvent, TerminalStatus, TurnSink } from "./events.js";

export interface LifecycleSink extends TurnSink {
  end(status: TerminalStatus): void;
}

export function withLifecycle(sink: TurnSink): LifecycleSink {
  const open = new Map<string, Extract<RuntimeEvent, { type: "lifecycle" }>>();
  let assistantSeq = 0;
  let requestSeq = 0;
  let writing: string | null = null;
  const start = (id: string, category: "tool" | "assistant" | "compaction", status: LifecycleStatus, parentId?: string): void => {
    const e = { type: "lifecycle" as const, id, category, status, finish: false, ...(parentId !== undefined ? { parentId } : {}) };
    open.set(id, e);
    sink.event(e);
  };
  const finish = (id: string, status: LifecycleStatus): void => {
    const e = open.get(id);
    if (e === undefined) return;
    open.delete(id);
    sink.event({ type: "lifecycle", id, category: e.category, status, finish: true });
  };
  const closeWriting = (): void => {
    if (writing !== null) finish(writing, "completed");
    writing = null;
  };
  const onEvent = (e: RuntimeEvent): void => {
    if (e.type === "tool") {
      const id = `tool:${e.parentId ?? ""}:${e.callId}`;
      if (e.phase === "proposed") start(id, "tool", "queued", e.parentId);
      else if (e.phase === "started" && open.has(id)) start(id, "tool", "running", e.parentId);
      else if (e.phase === "completed") finish(id, e.isError !== true ? "completed" : e.errorKind === "cancelled" ? "cancelled" : "failed");
    } else if (e.type === "context") {
      requestSeq = e.requestSequence;
    } else if (e.type === "compaction") {
      const id = `compaction:${e.id}`;
      if (e.status === "triggered") start(id, "compaction", "queued");
      else if (e.status === "running") start(id, "compaction", "running");
      else finish(id, e.status);
    }
  };
  return {
    delta(text) {
      if (writing === null) {
        writing = `assistant:${requestSeq}:${++assistantSeq}`;
        start(writing, "assistant", "writing");
      }
      return sink.delta(text);
    },
    event(e) {
      // The end of the assistant's text precedes what follows it; otherwise the unit's own event comes first,
      // then the lifecycle change it implies (a tool's finish follows its result).
      const endsText =
        (e.type === "tool" && e.phase === "proposed" && e.parentId === undefined) || (e.type === "usage" && e.source === "provider_request") || e.type === "context";
      if (endsText) closeWriting();
      sink.event(e);
      onEvent(e);
    },
    end(status) {
      const to: LifecycleStatus = status === "completed" ? "completed" : status === "cancelled" ? "cancelled" : "failed";
      for (const id of [...open.keys()]) finish(id, to);
      writing = null;
    },
  };
}
