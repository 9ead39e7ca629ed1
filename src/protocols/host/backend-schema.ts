/**
 * Backend socket protocol (versions 1–14) frame schemas, derived from the live-backend host spec.
 * The v10 managed-invocation events are in managed-schema.ts, the v11–v14 source events in
 * source-schema.ts; this file keeps the version tables for all of them.
 */
import { z } from "zod";

export const MIN_BACKEND_VERSION = 1;
export const MAX_BACKEND_VERSION = 14;
export const KNOWN_FUTURE_VERSIONS: number[] = [];
export const MAX_HISTORY_TURNS = 100;
export const MAX_ALIASES = 16;
export const MAX_ID_LEN = 512;
export const MAX_TEXT = 1024 * 1024;
export const EPOCH_REGISTRY_BOUND = 10_000;

const id = z.string().min(1).max(MAX_ID_LEN);
const shortText = z.string().max(4096);

export const ModelRef = z.object({ provider: z.string().max(256), id: z.string().max(256) });

export const HistoryTurn = z.object({
  id,
  startedAt: z.string().max(64).optional(),
  userText: z.string().max(MAX_TEXT),
  responseText: z.string().max(MAX_TEXT).optional(),
  reasoningText: z.string().max(MAX_TEXT).optional(),
  cancelled: z.boolean().optional(),
});
export type HistoryTurn = z.infer<typeof HistoryTurn>;

export const InputCapabilities = z.object({
  questionKinds: z.array(z.string().max(64)).max(16).optional(),
  freeform: z.boolean().optional(),
  drafts: z.boolean().optional(),
  maxQuestions: z.number().int().min(0).max(1000).optional(),
  maxOptions: z.number().int().min(0).max(1000).optional(),
});
export const ChatCapabilities = z.object({
  create: z.boolean().optional(),
  dispose: z.boolean().optional(),
  fork: z.boolean().optional(),
  sideChat: z.boolean().optional(),
  pagedHistory: z.boolean().optional(),
  managedInvocations: z.boolean().optional(),
});
export const ToolCapabilities = z.object({
  confirmations: z.boolean().optional(),
  resultConfirmations: z.boolean().optional(),
  clientTools: z.boolean().optional(),
});

/** AHP `MultipleWorkingDirectoriesCapability` (this host's v6 hello addition; working-dirs.ts). */
const MultipleWorkingDirectories = z
  .object({ immutablePrimary: z.boolean().optional(), primaryReplacement: z.boolean().optional() })
  .strict()
  .refine((c) => !(c.immutablePrimary === true && c.primaryReplacement === true), "immutablePrimary and primaryReplacement cannot both be true");

/** Session `hello` body (also the `hello` inside `register_session`). Version gating is checked separately. */
export const HelloBody = z.object({
  protocolVersion: z.number().int(),
  instanceId: id,
  sourceId: id,
  sourceAliases: z.array(id).optional(),
  provider: id,
  displayName: shortText.optional(),
  title: shortText.optional(),
  cwd: z.string().max(4096).optional(),
  sessionId: z.string().max(MAX_ID_LEN).optional(),
  model: ModelRef.optional(),
  thinkingLevel: z.string().max(64).optional(),
  runtimeIdle: z.boolean().optional(),
  interactivity: z.enum(["full", "read-only"]).optional(),
  inputCapabilities: InputCapabilities.optional(),
  chatCapabilities: ChatCapabilities.optional(),
  toolCapabilities: ToolCapabilities.optional(),
  /** v6, this host's addition: AHP `AgentCapabilities.multipleWorkingDirectories` for this session. */
  multipleWorkingDirectories: MultipleWorkingDirectories.optional(),
  mcpServers: z.array(z.unknown()).optional(),
  historyNextCursor: z.string().max(4096).optional(),
  history: z.array(HistoryTurn).optional(),
  requestedSession: z.string().max(MAX_ID_LEN).optional(),
  creationToken: z.string().max(512).optional(),
});
export type HelloBody = z.infer<typeof HelloBody>;

export const ProviderInfo = z.object({
  id,
  displayName: shortText.optional(),
  description: shortText.optional(),
  multipleChats: ChatCapabilities.optional(),
  /** v6: RFC 9728 protected resources this provider needs credentials for (AHP AgentInfo.protectedResources). */
  protectedResources: z
    .array(z.object({ resource: z.string().min(1).max(4096), required: z.boolean().optional() }).passthrough())
    .max(16)
    .optional(),
  /** v6, this host's addition: AHP `AgentCapabilities.multipleWorkingDirectories` (working-dirs.ts). */
  multipleWorkingDirectories: MultipleWorkingDirectories.optional(),
});

export const ProviderHello = z.object({
  type: z.literal("provider_hello"),
  protocolVersion: z.number().int(),
  instanceId: id,
  providers: z.array(ProviderInfo).min(1).max(64),
  source: z.object({ serviceId: z.string().min(1).max(256), instanceId: z.string().min(1).max(256) }).strict().optional(),
});
export type ProviderHello = z.infer<typeof ProviderHello>;

/** Per-field gating: which hello fields need which protocol version. */
export const FIELD_MIN_VERSION: Record<string, number> = {
  inputCapabilities: 2,
  chatCapabilities: 3,
  requestedSession: 3,
  creationToken: 3,
  toolCapabilities: 4,
  mcpServers: 5,
  sourceAliases: 7,
  interactivity: 7,
  multipleWorkingDirectories: 6,
};

/** Backend event minimum versions (events up to v4 are reduced; later ones are refused here). */
export const EVENT_MIN_VERSION: Record<string, number> = {
  user_message: 1,
  agent_started: 1,
  text_delta: 1,
  thinking_delta: 1,
  tool_started: 1,
  tool_completed: 1,
  config_changed: 1,
  usage: 1,
  settled: 1,
  title_changed: 1,
  input_requested: 2,
  input_updated: 2,
  input_snapshot: 2,
  input_resolved: 2,
  turns_loaded: 3,
  tool_confirmation_requested: 4,
  tool_result_confirmation_requested: 4,
  tool_confirmation_resolved: 4,
  tool_result_confirmation_resolved: 4,
  client_tool_requested: 4,
  // v10 managed invocations (managed-schema.ts); they also need chatCapabilities.managedInvocations.
  invocation_outcome: 10,
  invocation_user_message: 10,
  invocation_boundary: 10,
  invocation_observation_cut: 10,
  // v11–v14 source reconciliation and identity (source-schema.ts).
  source_turn: 11,
  source_turn_resources: 13,
  profile_image_changed: 14,
  resource_snapshot: 6,
  resource_action: 6,
};

export const COMMAND_MIN_VERSION: Record<string, number> = {
  prompt: 1,
  steer: 1,
  follow_up: 1,
  configure: 1,
  abort: 1,
  complete_input: 2,
  create_chat: 3,
  dispose_chat: 3,
  fetch_turns: 3,
  confirm_tool: 4,
  confirm_tool_result: 4,
  client_tool_content: 4,
  complete_client_tool: 4,
  managed_prompt: 10,
  managed_follow_up: 10,
  observe_invocation: 10,
  abort_invocation: 10,
  apply_resource_action: 6,
  invoke_changeset_operation: 6,
  authenticate: 6,
};

const text = z.string().max(MAX_TEXT);
const NeutralOption = z.object({ id, label: shortText, description: shortText.optional(), recommended: z.boolean().optional() });
const NeutralQuestion = z.object({
  id,
  kind: z.string().max(64),
  title: shortText.optional(),
  message: z.string().max(65536),
  required: z.boolean().optional(),
  options: z.array(NeutralOption).max(1000).optional(),
  allowFreeform: z.boolean().optional(),
});
export const NeutralInputRequest = z.object({
  id,
  turnId: id.optional(),
  message: z.string().max(65536).optional(),
  url: z.string().max(4096).optional(),
  questions: z.array(NeutralQuestion).max(1000).optional(),
});
export type NeutralInputRequest = z.infer<typeof NeutralInputRequest>;

export const BackendEvent = z.discriminatedUnion("type", [
  // `pendingId` (Berth extension, additive): the AHP pending-message ID this turn consumes.
  z.object({ type: z.literal("user_message"), text, turnId: id.optional(), pendingId: id.optional() }),
  z.object({ type: z.literal("agent_started"), turnId: id.optional() }),
  z.object({ type: z.literal("text_delta"), text }),
  z.object({ type: z.literal("thinking_delta"), text }),
  // `mcpServerId` (v6, this host's addition): the MCP server of `hello.mcpServers` that contributes the tool.
  z.object({ type: z.literal("tool_started"), toolCallId: id, toolName: id, input: z.string().max(MAX_TEXT).optional(), mcpServerId: id.optional() }),
  z.object({
    type: z.literal("tool_confirmation_requested"),
    toolCallId: id,
    toolName: id.optional(),
    mcpServerId: id.optional(),
    input: z.string().max(MAX_TEXT).optional(),
    title: shortText.optional(),
    message: z.string().max(65536).optional(),
    editable: z.boolean().optional(),
    options: z.array(z.object({ id, label: shortText, kind: z.enum(["approve", "deny"]) })).max(32).optional(),
  }),
  z.object({ type: z.literal("tool_completed"), toolCallId: id, toolName: id, output: z.string().max(MAX_TEXT), isError: z.boolean() }),
  z.object({
    type: z.literal("tool_result_confirmation_requested"),
    toolCallId: id,
    toolName: id.optional(),
    output: z.string().max(MAX_TEXT),
    isError: z.boolean().optional(),
  }),
  z.object({
    type: z.literal("tool_confirmation_resolved"),
    toolCallId: id,
    approved: z.boolean(),
    selectedOptionId: id.optional(),
    commandId: id.optional(),
  }),
  z.object({ type: z.literal("tool_result_confirmation_resolved"), toolCallId: id, approved: z.boolean(), commandId: id.optional() }),
  // v4 client tools (client-tools.ts; the spec names the event, these are this host's fields).
  z.object({ type: z.literal("client_tool_requested"), toolCallId: id, toolName: id, clientId: id.optional(), input: z.string().max(MAX_TEXT).optional() }),
  z.object({ type: z.literal("config_changed"), model: ModelRef.optional(), thinkingLevel: z.string().max(64).optional() }),
  z.object({
    type: z.literal("usage"),
    inputTokens: z.number().int().min(0).optional(),
    outputTokens: z.number().int().min(0).optional(),
    cacheReadTokens: z.number().int().min(0).optional(),
    model: z.string().max(256).optional(),
  }),
  // `resumable` (v6, this host's addition): the error part is marked resumable (chat/turnResume may reopen the turn).
  z.object({ type: z.literal("settled"), cancelled: z.boolean(), error: z.string().max(65536).optional(), resumable: z.boolean().optional() }),
  z.object({ type: z.literal("title_changed"), title: shortText }),
  z.object({ type: z.literal("input_requested"), request: NeutralInputRequest }),
  z.object({ type: z.literal("input_updated"), request: NeutralInputRequest }),
  z.object({ type: z.literal("input_snapshot"), requests: z.array(NeutralInputRequest).max(1000), available: z.boolean().optional() }),
  z.object({
    type: z.literal("input_resolved"),
    requestId: id,
    response: z.enum(["accept", "decline", "cancel"]),
    answers: z.record(z.string(), z.unknown()).optional(),
    source: z.string().max(64).optional(),
    commandId: id.optional(),
  }),
  z.object({ type: z.literal("turns_loaded"), turns: z.array(HistoryTurn).max(MAX_HISTORY_TURNS), nextCursor: z.string().max(4096).optional() }),
]);
export type BackendEvent = z.infer<typeof BackendEvent>;

export const CommandResult = z.object({
  type: z.literal("command_result"),
  commandId: id,
  accepted: z.boolean(),
  error: z.string().max(4096).optional(),
});
export const CommandIndeterminate = z.object({
  type: z.literal("command_indeterminate"),
  commandId: id,
  error: z.string().max(4096).optional(),
});

/** Error codes used on `error` frames. */
export type BackendErrorCode =
  | "frame_too_large"
  | "bad_frame"
  | "protocol_error"
  | "unsupported_version"
  | "validation_error"
  | "handshake_required"
  | "authority_error"
  | "backend_replaced"
  | "backend_disposed"
  | "alias_conflict"
  | "creation_claim_invalid"
  | "registration_failed"
  | "unknown_session"
  | "shutting_down"
  | "internal_error";

export function versionError(v: unknown): string | null {
  if (typeof v !== "number" || !Number.isInteger(v)) return "protocolVersion must be an integer";
  if (KNOWN_FUTURE_VERSIONS.includes(v))
    return `backend protocol version ${v} is not supported by this host yet (supported: ${MIN_BACKEND_VERSION}-${MAX_BACKEND_VERSION})`;
  if (v < MIN_BACKEND_VERSION || v > MAX_BACKEND_VERSION)
    return `unsupported backend protocol version ${v} (supported: ${MIN_BACKEND_VERSION}-${MAX_BACKEND_VERSION})`;
  return null;
}

/** Returns an error message if a hello uses a field its declared version does not allow. */
export function helloGatingError(h: Record<string, unknown>, version: number): string | null {
  for (const [field, min] of Object.entries(FIELD_MIN_VERSION)) {
    if (h[field] !== undefined && version < min) return `${field} requires protocol version ${min} (declared ${version})`;
  }
  const cc = h.chatCapabilities as Record<string, unknown> | undefined;
  if (cc && cc.managedInvocations && version < 10) return "chatCapabilities.managedInvocations requires protocol version 10";
  if (Array.isArray(h.history) && h.history.length > MAX_HISTORY_TURNS) return `history is limited to ${MAX_HISTORY_TURNS} turns`;
  const aliases = h.sourceAliases;
  if (Array.isArray(aliases)) {
    if (aliases.length > MAX_ALIASES) return `sourceAliases is limited to ${MAX_ALIASES} entries`;
    if (new Set(aliases).size !== aliases.length) return "sourceAliases entries must be unique";
    if (aliases.includes(h.sourceId)) return "sourceAliases must not contain sourceId";
  }
  if ((h.requestedSession === undefined) !== (h.creationToken === undefined)) return "requestedSession and creationToken go together";
  return null;
}

export function zodMessage(e: z.ZodError): string {
  const i = e.issues[0];
  return i ? `${i.path.join(".") || "frame"}: ${i.message}` : "invalid frame";
}
