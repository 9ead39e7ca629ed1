/**
 * Protocol-neutral runtime contracts shared by providers, tools and the turn loop.
 * Nothing here knows which wire protocol (app-service, SCV, host) drives a turn.
 */
import type { Workspace } from "./workspace.js";

export { THINKING_LEVELS, type ThinkingLevel } from "../core/thinking.js";
import type { ThinkingLevel } from "../core/thinking.js";

export interface TextPart { type: "text"; text: string }
/** An image attachment; passed only to providers whose model accepts images. */
export interface ImagePart { type: "image"; mediaType: string; dataBase64: string }
export type UserContent = TextPart | ImagePart;

export type AssistantBlock =
  | { type: "text"; text: string }
  /**
   * Raw thinking is kept for provider continuity (e.g. Anthropic signatures), never projected to clients.
   * `api` names the wire that produced it (a provider replays only its own thinking); `redacted`
   * marks an opaque block whose payload is in `signature` (Anthropic `redacted_thinking`).
   */
  | { type: "thinking"; text: string; signature?: string; redacted?: boolean; api?: ProviderApi }
  | { type: "tool_call"; id: string; name: string; arguments: Record<string, unknown> };

export type Message =
  | { role: "user"; content: UserContent[] }
  | { role: "assistant"; content: AssistantBlock[] }
  | { role: "tool"; toolCallId: string; toolName: string; content: string; isError: boolean };

/** A tool as advertised to a model: name, description and JSON Schema of its arguments. */
export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export interface ProviderRequest {
  model: string;
  system: string;
  messages: Message[];
  tools: ToolSpec[];
  maxOutputTokens?: number;
  thinking?: ThinkingLevel;
  /**
   * Fast mode: ask for the API's priority/fast processing where its wire has a field for it
   * (see docs/providers.md); ignored where it has none.
   */
  fast?: boolean;
  signal: AbortSignal;
  /**
   * Durability gate: the request's final body bytes are sent only once this resolves (connection setup, header and
   * body encoding may run before). A rejection ends the stream like an abort, with nothing sent in full. The agent
   * passes the user record's fsync here, so the record is durable before the provider can act on the request.
   */
  gate?: Promise<void>;
}

export type ProviderErrorKind =
  | "aborted" // the caller's signal fired
  | "limit" // a bounded read was exceeded (event, response, text, tool args, tool-call count)
  | "http" // non-success HTTP status (after retries)
  | "auth" // 401/403 or no credential
  | "protocol" // malformed stream / unexpected shape
  | "network"; // connection failure or mid-stream disconnect

/**
 * One provider stream. Contract: once `stream()` is called it never throws and never rejects;
 * it ends with exactly one `done` or `error` event, after which it yields nothing.
 * `text_delta` events carry only new text (deltas, never the accumulated text).
 * A `tool_call` is yielded only once its arguments are complete and parsed.
 */
export type ProviderEvent =
  | { type: "text_delta"; text: string }
  | { type: "thinking_delta"; text: string }
  /** A completed reasoning summary whose provenance the provider verified (Anthropic thinking block end, OpenAI reasoning summary part done). */
  | { type: "reasoning_summary"; text: string }
  /** Provider continuity data for a finished thinking block (kept in history, never shown). */
  | { type: "thinking_block"; text: string; signature?: string; redacted?: boolean; api?: ProviderApi }
  | { type: "tool_call"; id: string; name: string; arguments: Record<string, unknown> }
  | { type: "usage"; inputTokens: number; outputTokens: number; cacheReadTokens: number | null; reasoningTokens: number | null }
  | { type: "done"; stopReason: "end" | "tool_use" | "max_tokens" }
  /** `message` is a fixed, safe label: never a provider body, URL or credential. */
  | { type: "error"; kind: ProviderErrorKind; retryable: boolean; message: string };

export interface Provider {
  readonly id: string;
  readonly api: ProviderApi;
  stream(req: ProviderRequest): AsyncIterable<ProviderEvent>;
  /** Optional: the same stream as batches (see `ProviderBatch`); the turn loop prefers it. */
  streamBatches?(req: ProviderRequest): AsyncIterable<ProviderBatch>;
}

/**
 * Consecutive events of one provider stream (those decoded from one body chunk). Concatenated, the batches are the
 * events `stream()` yields, with one rule left to the consumer: before each event of a batch that is not `settled`,
 * if the request's signal has aborted, the stream ends there as aborted (the error event `stream()` would yield;
 * nothing more is read). A settled batch (the terminal one, or what was decoded before a failure) is delivered whole.
 */
export interface ProviderBatch {
  events: ProviderEvent[];
  settled: boolean;
}

export type ProviderApi = "anthropic" | "openai-responses" | "openai-chat";

/** Supplies a credential per request so refreshed/rotated credentials are picked up. `null` = none (no-auth mode). */
export type CredentialSource = () => Promise<{ kind: "api_key" | "bearer"; value: string; accountId?: string } | null>;

/** Read bounds (SCV spec; defaults for every protocol). */
export const PROVIDER_BOUNDS = {
  maxSseEventBytes: 1024 * 1024,
  maxResponseBytes: 4 * 1024 * 1024,
  maxAssistantTextBytes: 1024 * 1024,
  maxToolArgumentBytes: 256 * 1024,
  maxToolCallsPerResponse: 32,
} as const;

// ---------------------------------------------------------------- tools

export type ToolErrorKind = "denied" | "cancelled" | "invalid_arguments" | "unavailable" | "limit" | "unknown_tool" | "failed";

export interface ToolContext {
  /** The session's working directory; relative paths resolve against it. */
  cwd: string;
  signal: AbortSignal;
  /** Short, rate-limited status line (never tool output content). */
  onProgress: (line: string) => void;
  /** The provider's ID of this call (set by the turn loop). */
  callId?: string;
  /** Where file tools read/write and `bash` runs, when not this machine (see workspace.ts). */
  workspace?: Workspace;
  /**
   * Asks the calling session's approval gate about work the tool relays (a nested agent's approval request); the
   * session's policy applies to `risk`. Absent when the call runs without a gate (everything is approved).
   */
  approve?(r: { name: string; risk: ToolRisk; summary: string; arguments: Record<string, unknown> }): Promise<"approve" | "deny" | "cancelled">;
}

/** `scv_protocol::JobStatus`: a background job's state as a tool call reports it. */
export type JobStatus = "running" | "completed" | "failed" | "declined" | "timeout" | "cancelled";

/** A background job a tool call started or showed the model (SCV `tool.completed.jobs`). */
export interface JobRef {
  job: string;
  tool: string;
  status: JobStatus;
  /** First line of the delegated prompt, shortened; omitted when empty. */
  task?: string;
}

export interface ToolResult {
  /** Bounded text for the model. */
  content: string;
  isError: boolean;
  errorKind?: ToolErrorKind;
  /** `true`/`false` when the tool has a timeout notion, else undefined. */
  timedOut?: boolean;
  /** Background jobs this call started or whose result it showed the model. */
  jobs?: JobRef[];
}

/**
 * What running a tool can affect; the approval policy decides by it (runtime/session/approvals.ts). Declared once,
 * on the tool: `read_only` reads the workspace; `filesystem` changes files; `process` runs commands; `delegate`
 * hands work to another agent; `network` reaches other machines or processes we do not control (every MCP tool).
 */
export const TOOL_RISKS = ["read_only", "filesystem", "process", "delegate", "network"] as const;
export type ToolRisk = (typeof TOOL_RISKS)[number];

export interface Tool {
  readonly spec: ToolSpec;
  readonly risk: ToolRisk;
  readonly transport: "local" | "mcp";
  /** MCP server name for MCP tools. */
  readonly serverName?: string;
  /** Validates arguments against the tool's schema before it runs. */
  validate(args: unknown): { ok: true; value: Record<string, unknown> } | { ok: false; message: string };
  /**
   * Optional per-call approval exemption: true when this particular call needs no approval (e.g. `web_fetch` of
   * an https URL on a host the user auto-approved). Absent or false: the approval policy decides.
   */
  autoApprove?(args: Record<string, unknown>): boolean;
  /** Runs the tool. Never rejects: failures come back as `isError` results with an `errorKind`. */
  run(args: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult>;
}
