/**
 * Protocol-neutral runtime events: what a running turn reports besides its assistant text. Each protocol adapter
 * projects these to its own wire form (app-service: the allowlisted `turn.activity` projection). Events carry raw
 * runtime identities (tool names, call IDs, MCP server names); adapters decide what is hashed or omitted.
 * Tool events also carry the call's validated `arguments` (proposed) and its bounded result `output` (completed)
 * for doors whose protocol shows them (SCV, the host); a projection that must not show them (app-service
 * activity) allowlists its fields and never copies these.
 */
import type { JobRef, ToolErrorKind } from "./types.js";

/** Where a context count came from (the app-service `source` labels). */
export type ContextSource =
  | "fallback_estimate"
  | "tokenizer_estimate"
  | "fallback_projection"
  | "tokenizer_projection"
  | "last_provider_usage"
  | "provider_exact"
  | "provider_partial";

export type LifecycleCategory = "tool" | "subagent_batch" | "subagent_task" | "assistant" | "compaction" | "diagnostic";
export type LifecycleStatus = "queued" | "running" | "writing" | "completed" | "failed" | "cancelled";

export type ToolPhase = "proposed" | "started" | "progress" | "completed";

export interface ToolEvent {
  type: "tool";
  phase: ToolPhase;
  /** Provider call ID (unique within the turn). */
  callId: string;
  /** Tool name as advertised to the model (may be unknown to the registry). */
  name: string;
  transport: "local" | "mcp" | "unknown";
  /** MCP server name for MCP tools. */
  serverName?: string;
  /** `progress`: one short status line (rate-limited, ≤ 120 chars, never output content). */
  line?: string;
  /** `proposed`: the arguments the model sent (not yet validated; never put them in logs or errors). */
  arguments?: Record<string, unknown>;
  /** `completed`: the result text the model sees (already bounded by the tool). */
  output?: string;
  /** `completed`: whether the result is an error, its kind, and timeout state when the tool has one. */
  isError?: boolean;
  errorKind?: ToolErrorKind;
  timedOut?: boolean;
  /** `completed`: background jobs the call started or showed the model. */
  jobs?: JobRef[];
  /** Set for events of a subagent: the `subagent_task` lifecycle ID they belong to. */
  parentId?: string;
}

export type RuntimeEvent =
  | ToolEvent
  | { type: "reasoning_summary"; text: string; parentId?: string }
  /** One provider response ended: its whole accepted text (empty when it only called tools). Top-level only. */
  | { type: "assistant_completed"; text: string }
  | {
      type: "context";
      currentTokens: number;
      maxTokens: number;
      reasoningTokens: number | null;
      requestSequence: number;
      source: ContextSource;
    }
  | {
      type: "usage";
      effectiveInput: number;
      output: number;
      cacheRead: number;
      cacheKnown: boolean;
      requestSequence: number;
      finalUsage: boolean;
      source: "provider_request" | "subagent_aggregate";
    }
  | {
      type: "compaction";
      /** One compaction attempt (unique within the turn; a turn may compact at its start and between steps). */
      id: string;
      status: "triggered" | "running" | "completed" | "failed" | "cancelled";
      currentTokens: number | null;
      maxTokens: number | null;
      /** `completed`: the estimate after compaction and how many messages the summary replaced. */
      afterTokens?: number;
      removedMessages?: number;
    }
  /** Start (`status` running/queued, with `category` and optional parent) or finish (terminal status) of a unit of work. */
  | { type: "lifecycle"; id: string; category: LifecycleCategory; status: LifecycleStatus; parentId?: string; finish: boolean };

/**
 * Where a turn's output goes. Contracts:
 * - `delta` offers the next assistant text delta (already non-empty). Returning `false` refuses it: the text is not
 *   accepted, the runtime stops the provider stream and ends the turn `failed` with the text accepted so far.
 *   A returned promise is awaited before the next delta (backpressure; deltas are never dropped).
 * - `event` is non-blocking and may drop (best-effort activity).
 */
export interface TurnSink {
  delta(text: string): boolean | Promise<boolean>;
  event(e: RuntimeEvent): void;
}

export type TerminalStatus = "completed" | "cancelled" | "failed" | "compaction_required";

/** Why a turn failed (diagnostic label; never provider/tool text). */
export type FailureReason =
  | "provider"
  | "provider_limit"
  | "tool_limit"
  | "history"
  | "credential"
  | "selection"
  | "output_limit"
  | "step_limit"
  | "persistence"
  | "compaction"
  | "internal";

export interface TurnUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  requests: number;
}

export interface TurnOutcome {
  status: TerminalStatus;
  /** The authoritative accepted assistant text (partial when cancelled/failed). */
  assistantText: string;
  reason?: FailureReason;
  /**
   * A fixed, safe label saying more about a failure (a provider's error label; for `persistence`, the file system's
   * errno code when it is a known one: `ENOSPC`, …); never provider or tool text.
   */
  message?: string;
  /** A failed turn's custom provider base URL as `urlForDisplay` shows it (no user name, password or query). */
  providerUrl?: string;
  usage: TurnUsage;
}
