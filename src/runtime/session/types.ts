/**
 * Public types of the session runtime (`SessionRuntime`, `SessionHub`): what a door (app-service, SCV, ACP, the
 * host's Berth backend, chat channels) configures, submits and observes. Protocol-neutral: every door projects
 * `SessionEvent`s onto its own wire and keeps only what its protocol allows.
 */
import type { RuntimeEvent, FailureReason, TerminalStatus, TurnUsage } from "../events.js";
import type { SelectionOverride, SessionModelInfo } from "../agent.js";
import type { McpServerInfo, SessionToolInfo } from "../tool-registries.js";
import type { ImagePart, JobRef, ToolErrorKind, ToolRisk } from "../types.js";
import type { Workspace } from "../workspace.js";
import type { Question, QuestionAnswer } from "./questions.js";
import type { McpServerDef } from "../../store/settings/schema.js";
import type { SessionErrorCode, UserAttachment } from "../../store/sessions/index.js";

export type { SelectionOverride, SessionModelInfo, UserAttachment, ToolRisk, Question, QuestionAnswer, McpServerInfo, SessionToolInfo };

/**
 * When a tool call needs a person's approval:
 * - `on-risk` (default): `read_only` tools run; every other risk class (and every MCP tool) asks;
 * - `edits`: like `on-risk`, but `filesystem` tools (file edits) run too;
 * - `always`: every call asks; `never`: nothing asks (every call runs).
 */
export type ApprovalMode = "on-risk" | "edits" | "always" | "never";

/** A session's configuration, fixed when it is opened (`SessionRuntime.configure` changes it while idle). */
export interface SessionConfig {
  /** Absolute working directory: tools run here, the system prompt names it. */
  cwd: string;
  /** Provider/model/base URL/reasoning of this session only (unset: the settings' selection). */
  selection?: SelectionOverride;
  /** MCP servers of this session (unset: the settings' `mcp_servers`). */
  mcpServers?: Record<string, McpServerDef>;
  /** A chat channel's name (≤ 32 bytes, no control characters): adds the chat section to the system prompt. */
  channel?: string;
  /** The client's own delegation depth (0 for a direct client). */
  delegationDepth?: number;
  /** No tools at all: provider requests carry none. */
  noTools?: boolean;
  approval?: ApprovalMode;
  /**
   * The client declares it approves every request. Its own turns still raise `approval_requested` (the client
   * answers); server-started turns, which have no client to ask, are approved without asking.
   */
  autoApprove?: boolean;
  /** Where the tools touch files and run commands (unset: this machine); see `runtime/workspace.ts`. */
  workspace?: Workspace;
}

/** Why a server started a turn on its own (SCV `origin`): e.g. `{kind: "background", jobs: ["job-1"]}`. */
export interface TurnOrigin {
  kind: string;
  jobs?: string[];
}

export interface SubmitOptions {
  attachments?: UserAttachment[];
  /**
   * Images sent inline with this prompt (a door whose client sends image bytes, e.g. ACP), added after the
   * attachments' images. Not durable: the session file keeps the prompt text only. Not kept for queued prompts.
   */
  images?: ImagePart[];
  /** This prompt only runs without tools (in addition to the session's `noTools`). */
  noTools?: boolean;
  /** A label of who submitted it (shown in queue entries); default `"client"`. */
  submitter?: string;
  /** Set for a turn the server starts itself. */
  origin?: TurnOrigin;
  /** The turn ID to use (a door that must know it before the turn starts); default: a fresh UUID. */
  turnId?: string;
}

/** One queued prompt. `revision` starts at 1 and grows by one on every change (update or move). */
export interface QueueEntry {
  queue_id: string;
  revision: number;
  prompt: string;
  submitter: string;
  attachments?: UserAttachment[];
}

/** Outcome of a revision-checked queue operation. */
export type QueueResult = { ok: true; entry: QueueEntry } | { ok: false; error: "not_found" } | { ok: false; error: "conflict"; current: QueueEntry };

/** A `turn.failed` code (SCV `ErrorCode` subset). */
export type FailureCode = "provider_error" | "response_limit" | "tool_limit" | "step_limit" | "context_limit" | "history_limit" | "internal_error";

/** Bounds of tool data in events (before any door serializes them). */
export const TOOL_OUTPUT_MAX_BYTES = 64 * 1024;
export const TOOL_ARGUMENTS_MAX_BYTES = 64 * 1024;
export const PROGRESS_MAX_BYTES = 512;

interface TurnRef {
  sessionId: string;
  turnId: string;
}
interface Terminal extends TurnRef {
  /** The accepted assistant text of the whole turn (partial when cancelled or failed). */
  text: string;
  usage: TurnUsage;
  /** Provider requests made (the turn's steps). */
  steps: number;
  origin?: TurnOrigin;
}

/**
 * What a session reports, in order. Per turn: `turn_started`, then deltas/tools/activity in execution order,
 * then exactly one of `turn_completed` / `turn_cancelled` / `turn_failed`. Queue events are emitted in order
 * with the turn events: `queue_dequeued` for an entry comes after the previous turn's terminal and before the
 * `turn_started` of the turn it became.
 */
export type SessionEvent =
  | (TurnRef & { type: "turn_started"; prompt: string; origin?: TurnOrigin; queueId?: string; submitter: string; attachments?: UserAttachment[] })
  /** Append-only assistant text. A listener may return `false` (refuse: the turn fails) or a promise (backpressure). */
  | (TurnRef & { type: "assistant_delta"; text: string })
  /** One model response ended; `text` is its whole text (empty when it only called tools). */
  | (TurnRef & { type: "assistant_completed"; text: string })
  /** `parentId`: set for calls of a subagent (its task's lifecycle ID). */
  | (TurnRef & { type: "tool_proposed"; callId: string; name: string; arguments: Record<string, unknown>; truncated: boolean; parentId?: string })
  | (TurnRef & { type: "approval_requested"; approvalId: string; callId: string; name: string; risk: ToolRisk; cwd: string; summary: string; arguments: Record<string, unknown>; parentId?: string })
  /** A pending approval ended: answered, or withdrawn because the turn was cancelled (`approved: false, cancelled: true`). */
  | (TurnRef & { type: "approval_resolved"; approvalId: string; callId: string; approved: boolean; cancelled: boolean })
  | (TurnRef & { type: "tool_started"; callId: string; name: string; parentId?: string })
  /** Bounded status lines (joined by LF, ≤ 512 bytes); display only. */
  | (TurnRef & { type: "tool_progress"; callId: string; text: string; parentId?: string })
  | (TurnRef & { type: "tool_completed"; callId: string; name: string; success: boolean; output: string; truncated: boolean; error?: ToolErrorKind; timedOut?: boolean; jobs?: JobRef[]; parentId?: string })
  /** A steering message was injected into the running turn (`ref`: the door's ID given to `steer`). */
  | (TurnRef & { type: "steered"; text: string; ref?: string })
  /** The model asked the user a question (the `question` tool); answer with `answerQuestion`. */
  | (TurnRef & { type: "question_requested"; questionId: string; callId: string; question: Question })
  /** A question was answered, declined, or withdrawn (`answer.kind === "cancelled"`). */
  | (TurnRef & { type: "question_resolved"; questionId: string; callId: string; answer: QuestionAnswer })
  | (TurnRef & { type: "context_compacted"; beforeTokens: number; afterTokens: number; removedMessages: number })
  /** Every runtime event as it happened (for doors that project activity themselves, e.g. the app-service). */
  | (TurnRef & { type: "runtime"; event: RuntimeEvent })
  | (Terminal & { type: "turn_completed" })
  | (Terminal & { type: "turn_cancelled" })
  /** `status` is the durable one (`compaction_required` is a failure on every wire); `reason` the runtime's label. */
  /** `providerUrl`: the custom provider's base URL, credentials stripped (`urlForDisplay`), for a door's hint. */
  | (Terminal & { type: "turn_failed"; code: FailureCode; message: string; reason: FailureReason; status: Exclude<TerminalStatus, "completed" | "cancelled">; providerUrl?: string })
  /** `steerRef`: set when a steering message whose turn ended first became this prompt (see `steer`). */
  | { type: "queue_enqueued"; sessionId: string; entry: QueueEntry; steerRef?: string }
  | { type: "queue_updated"; sessionId: string; entry: QueueEntry }
  /** `beforeQueueId`: the entry it now precedes (null: last). */
  | { type: "queue_moved"; sessionId: string; entry: QueueEntry; beforeQueueId: string | null }
  | { type: "queue_removed"; sessionId: string; queueId: string }
  | { type: "queue_dequeued"; sessionId: string; queueId: string; turnId: string }
  | { type: "queue_snapshot"; sessionId: string; entries: QueueEntry[] }
  | { type: "paused"; sessionId: string; paused: boolean }
  | { type: "title_changed"; sessionId: string; title: string }
  /**
   * The history passed its bounds: admission of the turn just started (emitted right after its `turn_started`)
   * took `removedMessages` records out of the model context; `historyBytes` is what stays (see trim.ts).
   */
  | { type: "session_trimmed"; sessionId: string; removedMessages: number; historyBytes: number }
  | { type: "session_cleared"; sessionId: string };

/**
 * A listener. Called synchronously, in event order. Only for `assistant_delta` is the return value used:
 * `false` refuses the delta (the turn ends failed, `response_limit`, with the text accepted so far); a promise
 * is awaited before the next delta (backpressure; deltas are never dropped). A throwing listener is ignored.
 */
export type SessionListener = (e: SessionEvent) => void | boolean | Promise<void | boolean>;

/** A session as listed: durable ones (from the store) and open ones. */
export interface SessionSummary {
  sessionId: string;
  /** The title policy's title (redacted, one line), or null when the session has no prompt yet. */
  title: string | null;
  createdAt: string;
  /** The session's working directory (from its header). */
  cwd: string;
  updatedAtMs: number;
  /** Open in this process (a `SessionRuntime` exists). */
  open: boolean;
}

/**
 * Admission refusals (`startTurn`): the store's codes (`busy`: a running turn here or another holder; `lost`;
 * `limit`: the attachment cap; `invalid_id`; `unavailable`: missing or unreadable), `history_incomplete` (the
 * bounded history cannot hold the context), `closed` (the runtime was closed), `internal`.
 */
export type AdmissionError = SessionErrorCode | "history_incomplete" | "closed" | "internal";
