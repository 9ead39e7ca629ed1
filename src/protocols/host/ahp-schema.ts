/**
 * Spec-derived AHP (Agent Host Protocol) message shapes, written from the public specification
 * (microsoft/agent-host-protocol: types/common/*, types/channels-{root,session,chat}/*).
 * Only the subset this host emits or accepts is modelled. The tests validate every message the host emits with it;
 * the host itself loads only its small parts (ahp-constants.ts, ahp-message.ts), so that a daemon's start does not
 * build this whole schema.
 */
import { z } from "zod";
import { Message, MessageOrigin, SideChatSelection } from "./ahp-message.js";

export { Message, MessageOrigin, SideChatSelection };

import { ErrorCodes, ROOT } from "./ahp-constants.js";

export { ErrorCodes, ROOT };

const uri = z.string().min(1);
const iso = z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
const meta = z.record(z.string(), z.unknown());

export const UsageInfo = z.object({
  inputTokens: z.number().optional(),
  outputTokens: z.number().optional(),
  model: z.string().optional(),
  cacheReadTokens: z.number().optional(),
  _meta: meta.optional(),
});
export const ErrorInfo = z.object({ errorType: z.string(), message: z.string(), stack: z.string().optional(), _meta: meta.optional() });
export const StringOrMarkdown = z.union([z.string(), z.object({ markdown: z.string() })]);

export const ChatInputQuestion = z.object({
  id: z.string(),
  kind: z.enum(["text", "number", "integer", "boolean", "single-select", "multi-select"]),
  title: z.string().optional(),
  message: z.string(),
  required: z.boolean().optional(),
  options: z.array(z.object({ id: z.string(), label: z.string(), description: z.string().optional(), recommended: z.boolean().optional() })).optional(),
  allowFreeformInput: z.boolean().optional(),
});
export const ChatInputRequest = z.object({
  id: z.string(),
  message: z.string().optional(),
  url: z.string().optional(),
  questions: z.array(ChatInputQuestion).optional(),
  answers: z.record(z.string(), z.unknown()).optional(),
});

const ConfirmationOption = z.object({ id: z.string(), label: z.string(), kind: z.enum(["approve", "deny"]), group: z.number().optional() });
const ToolCallBase = {
  toolCallId: z.string(),
  toolName: z.string(),
  displayName: z.string(),
  intention: z.string().optional(),
  contributor: z.unknown().optional(),
  _meta: meta.optional(),
};
const ToolResultFields = {
  success: z.boolean(),
  pastTenseMessage: StringOrMarkdown,
  content: z.array(z.object({ type: z.string() }).passthrough()).optional(),
  structuredContent: meta.optional(),
  error: z.object({ message: z.string(), code: z.string().optional() }).optional(),
};
const confirmedReason = z.enum(["not-needed", "user-action", "setting"]);
/** AHP `McpAuthRequirement`: why, the RFC 9728 protected resource, required scopes; never a token. */
const McpAuthRequirement = z.object({
  reason: z.enum(["required", "expired", "insufficientScope"]),
  oauthClient: z.object({ clientId: z.string(), clientSecret: z.string().optional() }).optional(),
  resource: z.object({ resource: z.string() }).passthrough(),
  requiredScopes: z.array(z.string()).optional(),
  description: z.string().optional(),
});
export const ToolCallState = z.discriminatedUnion("status", [
  z.object({ ...ToolCallBase, status: z.literal("streaming"), partialInput: z.string().optional(), invocationMessage: StringOrMarkdown.optional() }),
  z.object({
    ...ToolCallBase,
    status: z.literal("pending-confirmation"),
    invocationMessage: StringOrMarkdown,
    toolInput: z.string().optional(),
    confirmationTitle: StringOrMarkdown.optional(),
    editable: z.boolean().optional(),
    options: z.array(ConfirmationOption).optional(),
  }),
  z.object({ ...ToolCallBase, status: z.literal("running"), invocationMessage: StringOrMarkdown, toolInput: z.string().optional(), confirmed: confirmedReason }),
  z.object({ ...ToolCallBase, ...ToolResultFields, status: z.literal("pending-result-confirmation"), invocationMessage: StringOrMarkdown, confirmed: confirmedReason }),
  z.object({
    ...ToolCallBase,
    status: z.literal("auth-required"),
    contributor: z.object({ kind: z.literal("mcp"), customizationId: z.string() }),
    invocationMessage: StringOrMarkdown,
    toolInput: z.string().optional(),
    confirmed: confirmedReason,
    content: z.array(z.object({ type: z.string() }).passthrough()).optional(),
    auth: McpAuthRequirement,
  }),
  z.object({ ...ToolCallBase, ...ToolResultFields, status: z.literal("completed"), invocationMessage: StringOrMarkdown, confirmed: confirmedReason }),
  z.object({ ...ToolCallBase, status: z.literal("cancelled"), invocationMessage: StringOrMarkdown, reason: z.enum(["denied", "skipped", "result-denied"]), reasonMessage: StringOrMarkdown.optional() }),
]);

export const ResponsePart = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("markdown"), id: z.string(), content: z.string() }),
  z.object({ kind: z.literal("reasoning"), id: z.string(), content: z.string() }),
  z.object({ kind: z.literal("toolCall"), toolCall: ToolCallState }),
  z.object({ kind: z.literal("inputRequest"), request: ChatInputRequest, response: z.enum(["accept", "decline", "cancel"]).optional() }),
  z.object({ kind: z.literal("error"), error: ErrorInfo, resumable: z.boolean().optional() }),
]);

export const Turn = z.object({
  id: z.string(),
  startedAt: iso.optional(),
  duration: z.number().optional(),
  message: Message,
  responseParts: z.array(ResponsePart),
  usage: UsageInfo.optional(),
  state: z.enum(["complete", "cancelled", "error"]),
});
export const ActiveTurn = z.object({
  id: z.string(),
  startedAt: iso,
  message: Message,
  responseParts: z.array(ResponsePart),
  usage: UsageInfo.optional(),
});

/** AHP `SessionStatus`: one exclusive activity value (1, 2, 8, 24) OR-ed with the flags IsRead (32) and IsArchived (64). */
const statusBits = z.number().int().min(0).refine((v) => [1, 2, 8, 24].includes(v & 31) && (v & ~127) === 0, "one activity value (1, 2, 8, 24) OR-ed with IsRead 32 / IsArchived 64");
export const ChatOrigin = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("user") }),
  z.object({ kind: z.literal("fork"), chat: uri, turnId: z.string() }),
  z.object({ kind: z.literal("sideChat"), chat: uri, turnId: z.string(), selection: SideChatSelection.optional() }),
  z.object({ kind: z.literal("tool"), chat: uri, toolCallId: z.string() }),
]);
export const ChatSummary = z.object({
  resource: uri,
  title: z.string(),
  status: statusBits,
  activity: z.string().optional(),
  modifiedAt: iso,
  origin: ChatOrigin.optional(),
  interactivity: z.enum(["full", "read-only", "hidden"]).optional(),
  workingDirectories: z.array(uri).optional(),
});
export const PendingMessage = z.object({ id: z.string(), message: Message });
/** AHP `BackgroundShellWork` / `BackgroundSubagentWork` (or a newer kind); chat-09.ts bounds them. */
export const BackgroundWorkWire = z.object({ id: z.string(), kind: z.string(), label: z.string(), startedAt: z.string().optional(), command: z.string().optional(), terminal: uri.optional(), chat: uri.optional(), _meta: meta.optional() }).passthrough()
  .refine((w) => (w.kind !== "shell" || typeof w.command === "string") && (w.kind !== "subagent" || typeof w.chat === "string"), "a shell carries command, a subagent carries chat");
const ChangesetRef = z.object({ label: z.string(), uriTemplate: z.string(), changeKind: z.string() }).passthrough();
export const ChatState = ChatSummary.extend({
  backgroundWork: z.array(BackgroundWorkWire).optional(),
  changesets: z.array(ChangesetRef).optional(),
  turns: z.array(Turn),
  turnsNextCursor: z.string().optional(),
  activeTurn: ActiveTurn.optional(),
  steeringMessage: PendingMessage.optional(),
  queuedMessages: z.array(PendingMessage).optional(),
  draft: Message.optional(),
  _meta: meta.optional(),
});
export const SessionInputRequest = z.object({
  id: z.string(),
  chat: uri,
  kind: z.enum(["chatInput", "toolConfirmation", "toolClientExecution", "toolAuthentication"]),
}).passthrough();
/** AHP `McpServerState` (the kinds this host reports; unknown members tolerated). */
export const McpServerState = z.object({ kind: z.enum(["starting", "ready", "authRequired", "error", "stopped"]) }).passthrough();
/** AHP `McpServerCustomization` as this host publishes it (top-level, server-originated). */
export const McpServerCustomization = z.object({
  type: z.literal("mcpServer"),
  id: z.string(),
  uri: uri,
  name: z.string(),
  state: McpServerState,
  channel: z.string().regex(/^mcp:\/\//).optional(),
  mcpApp: z.object({ capabilities: z.object({
    serverTools: z.object({ listChanged: z.boolean().optional() }).optional(),
    serverResources: z.object({ listChanged: z.boolean().optional() }).optional(),
    logging: z.object({}).strict().optional(),
    sampling: z.object({ tools: z.object({}).strict().optional() }).optional(),
  }) }).optional(),
  enablement: z.array(z.unknown()).optional(),
  _meta: meta.optional(),
});
/** AHP container customizations (`PluginCustomization`, `DirectoryCustomization`) with their children. */
const ChildCustomization = z.object({ type: z.enum(["agent", "skill", "prompt", "rule", "hook", "mcpServer"]), id: z.string(), uri, name: z.string(), enabled: z.boolean().optional() }).passthrough();
const ContainerBase = { id: z.string(), uri, name: z.string(), clientId: z.string().optional(), children: z.array(ChildCustomization).optional(), _meta: meta.optional() };
export const Customization = z.union([
  McpServerCustomization,
  z.object({ type: z.literal("plugin"), ...ContainerBase, enablement: z.array(z.unknown()).optional(), version: z.string().optional() }).passthrough(),
  z.object({ type: z.literal("directory"), ...ContainerBase, enabled: z.boolean(), contents: z.string(), writable: z.boolean() }).passthrough(),
]);
/** AHP `AnnotationsSummary` (channels-annotations/state.ts), on session state and summaries. */
const AnnotationsSummary = z.object({ resource: uri, annotationCount: z.number().int().min(0), entryCount: z.number().int().min(0) });
export const SessionState = z.object({
  provider: z.string(),
  title: z.string(),
  status: statusBits,
  activity: z.string().optional(),
  serverTools: z.array(z.object({ name: z.string() }).passthrough()).optional(),
  workingDirectories: z.array(uri).optional(),
  lifecycle: z.enum(["creating", "ready", "failed"]),
  creationError: ErrorInfo.optional(),
  activeClients: z.array(z.object({ clientId: z.string(), tools: z.array(z.unknown()) }).passthrough()),
  chats: z.array(ChatSummary),
  defaultChat: uri.optional(),
  inputNeeded: z.array(SessionInputRequest).optional(),
  customizations: z.array(Customization).optional(),
  changesets: z.array(z.object({ label: z.string(), uriTemplate: z.string(), changeKind: z.string() }).passthrough()).optional(),
  annotations: AnnotationsSummary.optional(),
  config: z.object({ schema: z.object({ type: z.literal("object"), properties: z.record(z.string(), z.object({ type: z.string(), title: z.string() }).passthrough()) }), values: meta }).optional(),
  _meta: meta.optional(),
});
export const SessionSummary = z.object({
  resource: uri,
  provider: z.string(),
  title: z.string(),
  status: statusBits,
  activity: z.string().optional(),
  workingDirectories: z.array(uri).optional(),
  createdAt: iso,
  modifiedAt: iso,
  annotations: AnnotationsSummary.optional(),
  _meta: meta.optional(),
  chats: z.array(z.object({ resource: uri, title: z.string(), interactivity: z.enum(["full", "read-only", "hidden"]).optional() })).optional(),
  defaultChat: uri.optional(),
});
export const AgentInfo = z.object({
  provider: z.string(),
  displayName: z.string(),
  description: z.string(),
  models: z.array(z.object({ id: z.string(), provider: z.string(), name: z.string() }).passthrough()),
  capabilities: z.object({
    multipleChats: z.object({ fork: z.boolean().optional(), sideChat: z.boolean().optional() }).optional(),
    multipleWorkingDirectories: z.object({ immutablePrimary: z.boolean().optional(), primaryReplacement: z.boolean().optional() }).strict().optional(),
  }).optional(),
  protectedResources: z.array(z.object({ resource: z.string() }).passthrough()).optional(),
});
export const RootState = z.object({
  agents: z.array(AgentInfo),
  activeSessions: z.number().int().min(0).optional(),
  config: z.object({ schema: z.object({ type: z.literal("object"), properties: z.record(z.string(), z.object({ type: z.string(), title: z.string() }).passthrough()) }), values: meta }).optional(),
  _meta: meta.optional(),
});
const ChangesetErrorInfo = z.object({ errorType: z.string(), message: z.string() }).passthrough();
const ChangesetFile = z.object({ id: z.string(), edit: z.record(z.string(), z.unknown()), reviewed: z.boolean().optional() }).passthrough();
const ChangesetOperation = z.object({ id: z.string(), label: z.string(), scopes: z.array(z.enum(["changeset", "resource", "range"])), status: z.enum(["idle", "running", "error", "disabled"]) }).passthrough();
/** AHP `ChangesetState` (channels-changeset/state.ts). */
export const ChangesetState = z.object({ status: z.enum(["computing", "ready", "error"]), error: ChangesetErrorInfo.optional(), files: z.array(ChangesetFile), operations: z.array(ChangesetOperation).optional() });
const AnnotationEntry = z.object({ id: z.string(), text: z.union([z.string(), z.object({ markdown: z.string() })]) }).passthrough();
const Annotation = z.object({ id: z.string(), turnId: z.string(), resource: z.string(), resolved: z.boolean(), entries: z.array(AnnotationEntry).min(1) }).passthrough();
/** AHP `AnnotationsState` (channels-annotations/state.ts). */
export const AnnotationsState = z.object({ annotations: z.array(Annotation) });
export const Snapshot = z.object({ resource: uri, state: z.union([RootState, SessionState, ChatState, ChangesetState, AnnotationsState]), fromSeq: z.number().int().min(0) });

const turnId = z.string();
export const StateAction = z.discriminatedUnion("type", [
  z.object({ type: z.literal("root/agentsChanged"), agents: z.array(AgentInfo) }),
  z.object({ type: z.literal("root/activeSessionsChanged"), activeSessions: z.number().int().min(0) }),
  z.object({ type: z.literal("session/ready") }),
  z.object({ type: z.literal("session/creationFailed"), error: ErrorInfo }),
  z.object({ type: z.literal("session/chatAdded"), summary: ChatSummary }),
  z.object({ type: z.literal("session/chatRemoved"), chat: uri }),
  z.object({ type: z.literal("session/chatUpdated"), chat: uri, changes: ChatSummary.partial() }),
  z.object({ type: z.literal("session/titleChanged"), title: z.string() }),
  z.object({ type: z.literal("session/inputNeededSet"), request: SessionInputRequest }),
  z.object({ type: z.literal("session/inputNeededRemoved"), id: z.string() }),
  z.object({ type: z.literal("session/metaChanged") }).passthrough(),
  // AHP SessionActiveClient: {clientId, displayName?, tools: ToolDefinition[], customizations?}.
  z.object({ type: z.literal("session/activeClientSet"), activeClient: z.object({ clientId: z.string(), displayName: z.string().optional(), tools: z.array(z.object({ name: z.string() }).passthrough()), customizations: z.array(z.unknown()).optional() }).strict() }),
  z.object({ type: z.literal("session/activeClientRemoved"), clientId: z.string() }),
  // Status flags, working directories, drafts (status-flags.ts, working-dirs.ts, chat-drafts.ts).
  z.object({ type: z.literal("session/isReadChanged"), isRead: z.boolean() }),
  z.object({ type: z.literal("session/isArchivedChanged"), isArchived: z.boolean() }),
  z.object({ type: z.literal("session/workingDirectorySet"), directory: uri }),
  z.object({ type: z.literal("session/workingDirectoryRemoved"), directory: uri }),
  z.object({ type: z.literal("session/workingDirectoryReplaced"), directory: uri, replacement: uri }),
  z.object({ type: z.literal("chat/workingDirectorySet"), directory: uri }),
  z.object({ type: z.literal("chat/workingDirectoryRemoved"), directory: uri }),
  z.object({ type: z.literal("chat/draftChanged"), draft: Message.optional() }),
  z.object({ type: z.literal("chat/inputAnswerChanged"), requestId: z.string(), questionId: z.string(), answer: z.object({ state: z.enum(["draft", "submitted", "skipped"]) }).passthrough().optional() }),
  z.object({ type: z.literal("chat/queuedMessagesReordered"), order: z.array(z.string()) }),
  // The 0.9 chat families (chat-09.ts).
  z.object({ type: z.literal("chat/turnResume"), turnId: z.string() }).strict(),
  z.object({ type: z.literal("session/chatsReordered"), chats: z.array(uri) }).strict(),
  z.object({ type: z.literal("chat/backgroundWorkSet"), work: BackgroundWorkWire }).strict(),
  z.object({ type: z.literal("chat/backgroundWorkRemoved"), id: z.string() }).strict(),
  z.object({ type: z.literal("chat/changesetsChanged"), changesets: z.array(ChangesetRef).optional() }).strict(),
  z.object({ type: z.literal("chat/isReadChanged"), isRead: z.boolean() }),
  z.object({ type: z.literal("chat/isArchivedChanged"), isArchived: z.boolean() }),
  z.object({ type: z.literal("chat/turnStarted"), turnId, startedAt: iso, message: Message, queuedMessageId: z.string().optional(), _meta: meta.optional() }),
  z.object({ type: z.literal("chat/delta"), turnId, partId: z.string(), content: z.string() }),
  z.object({ type: z.literal("chat/reasoning"), turnId, partId: z.string(), content: z.string() }),
  z.object({ type: z.literal("chat/responsePart"), turnId, part: ResponsePart }),
  z.object({ type: z.literal("chat/toolCallStart"), turnId, toolCallId: z.string(), toolName: z.string(), displayName: z.string(), intention: z.string().optional(), contributor: z.object({ kind: z.enum(["client", "mcp"]) }).passthrough().optional() }),
  z.object({
    type: z.literal("chat/toolCallReady"),
    turnId,
    toolCallId: z.string(),
    invocationMessage: StringOrMarkdown,
    toolInput: z.string().optional(),
    confirmationTitle: StringOrMarkdown.optional(),
    editable: z.boolean().optional(),
    confirmed: confirmedReason.optional(),
    options: z.array(ConfirmationOption).optional(),
  }),
  z.object({
    type: z.literal("chat/toolCallConfirmed"),
    turnId,
    toolCallId: z.string(),
    approved: z.boolean(),
    confirmed: confirmedReason.optional(),
    reason: z.enum(["denied", "skipped"]).optional(),
    editedToolInput: z.string().optional(),
    selectedOptionId: z.string().optional(),
    reasonMessage: StringOrMarkdown.optional(),
    userSuggestion: Message.optional(),
  }),
  z.object({ type: z.literal("chat/toolCallComplete"), turnId, toolCallId: z.string(), result: z.object(ToolResultFields), requiresResultConfirmation: z.boolean().optional() }),
  z.object({ type: z.literal("chat/toolCallResultConfirmed"), turnId, toolCallId: z.string(), approved: z.boolean() }),
  z.object({ type: z.literal("chat/turnComplete"), turnId, duration: z.number().min(0) }),
  z.object({ type: z.literal("chat/turnCancelled"), turnId, duration: z.number().min(0) }),
  z.object({ type: z.literal("chat/error"), turnId, duration: z.number().min(0), error: ErrorInfo }),
  z.object({ type: z.literal("chat/usage"), turnId, usage: UsageInfo }),
  z.object({ type: z.literal("chat/inputRequested"), request: ChatInputRequest }),
  z.object({ type: z.literal("chat/inputCompleted"), requestId: z.string(), response: z.enum(["accept", "decline", "cancel"]), answers: z.record(z.string(), z.unknown()).optional() }),
  z.object({ type: z.literal("chat/turnsLoaded"), turns: z.array(Turn), turnsNextCursor: z.string().optional() }),
  z.object({ type: z.literal("chat/pendingMessageSet"), kind: z.enum(["steering", "queued"]), id: z.string(), message: Message }),
  z.object({ type: z.literal("chat/pendingMessageRemoved"), kind: z.enum(["steering", "queued"]), id: z.string() }),
  z.object({ type: z.literal("session/configChanged"), config: meta, replace: z.boolean().optional() }),
  // Host extension (live-backend spec): a scoped Stop was accepted; official clients keep it unreduced.
  z.object({ type: z.literal("paratenic/invocationStopRequested"), turnId }),
  z.object({ type: z.literal("session/customizationsChanged"), customizations: z.array(Customization) }),
  z.object({ type: z.literal("session/customizationUpdated"), customization: Customization }),
  z.object({ type: z.literal("session/customizationRemoved"), id: z.string() }),
  // `enabled` in the 0.9/1.0 types, scoped `enablement` in 1.1 (each client gets one of them).
  z.object({ type: z.literal("session/customizationToggled"), id: z.string(), enabled: z.boolean().optional(), enablement: z.array(z.object({ kind: z.enum(["session", "workspace", "global"]), enabled: z.boolean(), uri: uri.optional() }).strict()).optional() }).strict(),
  z.object({ type: z.literal("session/mcpServerStateChanged"), id: z.string(), state: McpServerState, channel: z.string().optional() }),
  z.object({ type: z.literal("session/mcpServerBackgroundRequested"), id: z.string() }).strict(),
  z.object({ type: z.literal("root/configChanged"), config: meta, replace: z.boolean().optional() }),
  z.object({ type: z.literal("session/changesetsChanged"), changesets: z.array(z.object({ label: z.string(), uriTemplate: z.string(), changeKind: z.string() }).passthrough()) }),
  z.object({ type: z.literal("changeset/statusChanged"), status: z.enum(["computing", "ready", "error"]), error: ChangesetErrorInfo.optional() }),
  z.object({ type: z.literal("changeset/fileSet"), file: ChangesetFile }),
  z.object({ type: z.literal("changeset/fileRemoved"), fileId: z.string() }),
  z.object({ type: z.literal("changeset/contentChanged"), files: z.array(ChangesetFile), operations: z.array(ChangesetOperation).optional(), error: ChangesetErrorInfo.optional() }),
  z.object({ type: z.literal("changeset/operationsChanged"), operations: z.array(ChangesetOperation).optional() }),
  z.object({ type: z.literal("changeset/operationStatusChanged"), operationId: z.string(), status: z.enum(["idle", "running", "error", "disabled"]), error: ChangesetErrorInfo.optional() }),
  z.object({ type: z.literal("changeset/cleared") }),
  z.object({ type: z.literal("changeset/filesReviewChanged"), files: z.array(z.string()), reviewed: z.boolean() }),
  z.object({ type: z.literal("annotations/set"), annotation: Annotation }),
  z.object({ type: z.literal("annotations/removed"), annotationId: z.string() }),
  z.object({ type: z.literal("annotations/updated"), annotationId: z.string() }).passthrough(),
  z.object({ type: z.literal("annotations/entrySet"), annotationId: z.string(), entry: AnnotationEntry }),
  z.object({ type: z.literal("annotations/entryRemoved"), annotationId: z.string(), entryId: z.string() }),
  z.object({ type: z.literal("session/activityChanged"), activity: z.string().optional() }),
  z.object({ type: z.literal("session/defaultChatChanged"), defaultChat: uri.optional() }),
  z.object({ type: z.literal("session/serverToolsChanged"), tools: z.array(z.object({ name: z.string() }).passthrough()) }),
  z.object({ type: z.literal("chat/activityChanged"), activity: z.string().optional() }),
  z.object({ type: z.literal("chat/toolCallContentChanged"), turnId, toolCallId: z.string(), content: z.array(z.object({ type: z.string() }).passthrough()), _meta: meta.optional() }),
  z.object({ type: z.literal("chat/toolCallDelta"), turnId, toolCallId: z.string(), content: z.string(), invocationMessage: StringOrMarkdown.optional(), _meta: meta.optional() }),
  z.object({ type: z.literal("chat/toolCallAuthRequired"), turnId, toolCallId: z.string(), auth: McpAuthRequirement, _meta: meta.optional() }),
  z.object({ type: z.literal("chat/toolCallAuthResolved"), turnId, toolCallId: z.string(), _meta: meta.optional() }),
  // Host extension (live-backend spec): a state-neutral acknowledgement of an MCP lifecycle request.
  z.object({ type: z.literal("paratenic/mcpLifecycleAccepted"), id: z.string(), operation: z.enum(["start", "stop"]) }),
]);
export type StateAction = z.infer<typeof StateAction>;

export const ActionOrigin = z.object({ clientId: z.string(), clientSeq: z.number().int() });
/** Envelope as emitted (rejected envelopes carry the client's raw action, so `action` is loose there). */
export const ActionEnvelope = z.object({
  channel: uri,
  action: z.object({ type: z.string() }).passthrough(),
  serverSeq: z.number().int().min(1),
  origin: ActionOrigin.optional(),
  rejectionReason: z.string().optional(),
}).superRefine((env, ctx) => {
  if (env.rejectionReason === undefined) {
    const r = StateAction.safeParse(env.action);
    if (!r.success) ctx.addIssue({ code: "custom", message: `invalid action ${env.action.type}: ${r.error.issues[0]?.message}` });
  }
});

export const InitializeResult = z.object({
  protocolVersion: z.string().regex(/^\d+\.\d+\.\d+$/),
  serverSeq: z.number().int().min(0),
  serverInfo: z.object({ name: z.string(), version: z.string().optional(), title: z.string().optional() }).optional(),
  _meta: meta.optional(),
  snapshots: z.array(Snapshot),
  telemetry: z.object({ logs: z.string().optional(), traces: z.string().optional(), metrics: z.string().optional() }).optional(),
});
export const ReconnectResult = z.union([
  z.object({ type: z.literal("replay"), actions: z.array(ActionEnvelope), missing: z.array(uri) }),
  z.object({ type: z.literal("snapshot"), snapshots: z.array(Snapshot) }),
]);
export const SubscribeResult = z.object({ snapshot: Snapshot.optional() });
export const ListSessionsResult = z.object({ items: z.array(SessionSummary), nextCursor: z.string().optional() });

export const JsonRpcError = z.object({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.number(), z.string(), z.null()]),
  error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }),
});
export const JsonRpcSuccess = z.object({ jsonrpc: z.literal("2.0"), id: z.union([z.number(), z.string()]), result: z.unknown() });

export const ServerNotification = z.discriminatedUnion("method", [
  z.object({ jsonrpc: z.literal("2.0"), method: z.literal("action"), params: ActionEnvelope }),
  z.object({ jsonrpc: z.literal("2.0"), method: z.literal("root/sessionAdded"), params: z.object({ channel: z.literal(ROOT), summary: SessionSummary }) }),
  z.object({ jsonrpc: z.literal("2.0"), method: z.literal("root/sessionRemoved"), params: z.object({ channel: z.literal(ROOT), session: uri }) }),
  z.object({
    jsonrpc: z.literal("2.0"),
    method: z.literal("root/sessionSummaryChanged"),
    params: z.object({ channel: z.literal(ROOT), session: uri, changes: SessionSummary.partial() }),
  }),
  z.object({
    jsonrpc: z.literal("2.0"),
    method: z.literal("root/progress"),
    params: z.object({ channel: z.literal(ROOT), progressToken: z.string(), progress: z.number(), total: z.number().optional(), message: z.string().optional() }),
  }),
  z.object({
    jsonrpc: z.literal("2.0"),
    method: z.literal("auth/required"),
    params: z.object({ channel: uri, resource: z.object({ resource: z.string() }).passthrough(), reason: z.enum(["required", "expired"]).optional() }),
  }),
  z.object({ jsonrpc: z.literal("2.0"), method: z.literal("otlp/exportLogs"), params: z.object({ channel: uri, payload: meta }) }),
  z.object({ jsonrpc: z.literal("2.0"), method: z.literal("otlp/exportTraces"), params: z.object({ channel: uri, payload: meta }) }),
  z.object({ jsonrpc: z.literal("2.0"), method: z.literal("otlp/exportMetrics"), params: z.object({ channel: uri, payload: meta }) }),
]);

/** Result schema by request method, for validating responses. */
export const RESULT_SCHEMAS: Record<string, z.ZodType> = {
  initialize: InitializeResult,
  reconnect: ReconnectResult,
  subscribe: SubscribeResult,
  listSessions: ListSessionsResult,
  ping: z.null(),
  createSession: z.null(),
  disposeSession: z.null(),
  fetchTurns: z.object({}),
  createChat: z.null(),
  disposeChat: z.null(),
  authenticate: z.object({}).strict(),
  invokeChangesetOperation: z.object({ message: z.unknown().optional(), followUp: z.unknown().optional() }).strict(),
  "paratenic/authContext": z.object({ review: z.string(), required_scopes: z.array(z.string()).nullable() }),
  "paratenic/dispatchOutcome": z.object({
    outcome: z.enum(["pending", "accepted", "rejected", "indeterminate"]),
    action: z.object({ type: z.string() }).passthrough(),
    serverSeq: z.number().int().optional(),
    /** Managed (v10) dispatches: the invocation, whether it left the ledger, and the connector's outcome. */
    invocation: z.object({ commandId: z.string(), resolved: z.boolean(), outcome: z.enum(["succeeded", "failed", "cancelled", "unknown"]).optional() }).strict().optional(),
  }),
};
