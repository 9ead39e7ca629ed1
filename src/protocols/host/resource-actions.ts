/**
 * Backend protocol v6 `resource_action` families on session and chat channels (spec "Events":
 * "an official AHP action for the owning session, chat, changeset, or annotations channel"),
 * beyond MCP server state (mcp-lifecycle.ts) and changesets/annotations (resources.ts); and the
 * client's cancellation of a tool call that waits for MCP authentication. Contracts:
 *  - accepted session actions: `session/activityChanged`, `session/serverToolsChanged`,
 *    `session/defaultChatChanged` (a chat of the session; persisted with the session);
 *    accepted chat actions: `chat/activityChanged`, `chat/toolCallContentChanged`,
 *    `chat/toolCallAuthRequired`, `chat/toolCallAuthResolved`. Each is validated against the
 *    official shape and the current state (a transition the official reducer would ignore is
 *    refused, never published as a silent no-op), then reduced (reducer.ts) and published;
 *  - `chat/toolCallStart` (optionally MCP-contributed) opens a `streaming` call and
 *    `chat/toolCallDelta` appends to its `partialInput` (bounded); the neutral `tool_started` or
 *    `tool_confirmation_requested` for that toolCallId then makes it ready (backend-events.ts);
 *  - families the host derives from the neutral events (turns, text, tools, input, titles,
 *    configuration, chats, customizations, metadata) are refused by name, pointing at the event;
 *  - `chat/toolCallAuthRequired` needs a running tool call whose contributor is an MCP server
 *    (`tool_started.mcpServerId`, this host's v6 addition); it raises a session
 *    `toolAuthentication` input request, which leaves when the call resumes, completes or its
 *    turn ends;
 *  - server tools and activity describe the live backend: they are cleared (with the same actions)
 *    when the session loses its route, and never persisted;
 *  - a client `chat/toolCallComplete` with a failed result on such a call (AHP: the client
 *    cancels instead of authenticating) is sent as `apply_resource_action` and reduced and echoed
 *    only after the backend accepts.
 */
import { z } from "zod";
import { clip } from "./inbound.js";
import { mcpHub } from "./mcp-channels.js";
import { forwardResourceAction } from "./ahp-requests.js";
import { findTool, type ChatModel, type Json, type Origin, type SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { ROOT } from "./ahp-constants.js";
import { backendCustomizationAction, backendCustomizationsGone } from "./customizations.js";
import { backendToggle } from "./customization-toggles.js";
import { NOT_CONNECTED_REFUSAL } from "./commands.js";

const MIN_VERSION = 6;
/** The largest `chat/toolCallDelta` content, and the largest streamed input a tool call may hold. */
export const MAX_DELTA = 64 * 1024;
export const MAX_PARTIAL_INPUT = 1024 * 1024;
/** Server tools a session may advertise at once, and the largest encoded list. */
export const MAX_SERVER_TOOLS = 1024;
export const MAX_SERVER_TOOLS_BYTES = 1024 * 1024;

const id = z.string().min(1).max(512);
const activity = z.string().max(4096).optional();
const ToolDefinition = z.object({ name: z.string().min(1).max(512), title: z.string().max(4096).optional(), description: z.string().max(65536).optional() }).passthrough();
const ToolContent = z.object({ type: z.string().min(1).max(64) }).passthrough();
const ProtectedResource = z.object({ resource: z.string().min(1).max(4096) }).passthrough();
/** AHP `McpAuthRequirement` (the challenge; never a token). */
const McpAuthRequirement = z.object({
  reason: z.enum(["required", "expired", "insufficientScope"]),
  oauthClient: z.object({ clientId: z.string().min(1).max(4096) }).strict().optional(),
  resource: ProtectedResource,
  requiredScopes: z.array(z.string().max(256)).max(64).optional(),
  description: z.string().max(4096).optional(),
}).strict();
const meta = z.record(z.string(), z.unknown()).optional();

const SessionActions = z.discriminatedUnion("type", [
  z.object({ type: z.literal("session/activityChanged"), activity }).strict(),
  z.object({ type: z.literal("session/serverToolsChanged"), tools: z.array(ToolDefinition).max(MAX_SERVER_TOOLS) }).strict(),
  z.object({ type: z.literal("session/defaultChatChanged"), defaultChat: z.string().min(1).max(4096).optional() }).strict(),
]);
const ChatActions = z.discriminatedUnion("type", [
  z.object({ type: z.literal("chat/activityChanged"), activity }).strict(),
  z.object({ type: z.literal("chat/toolCallContentChanged"), turnId: id, toolCallId: id, content: z.array(ToolContent).max(1024), _meta: meta }).strict(),
  z.object({ type: z.literal("chat/toolCallAuthRequired"), turnId: id, toolCallId: id, auth: McpAuthRequirement, _meta: meta }).strict(),
  z.object({ type: z.literal("chat/toolCallAuthResolved"), turnId: id, toolCallId: id, _meta: meta }).strict(),
  // AHP ChatToolCallStartAction: a call whose input the backend streams next (chat/toolCallDelta).
  z.object({
    type: z.literal("chat/toolCallStart"), turnId: id, toolCallId: id, toolName: id, displayName: z.string().min(1).max(4096),
    intention: z.string().max(4096).optional(), contributor: z.object({ kind: z.literal("mcp"), customizationId: id }).strict().optional(),
  }).strict(),
  // AHP ChatToolCallDeltaAction: `content` appends to the streaming call's partialInput; `invocationMessage` replaces.
  z.object({
    type: z.literal("chat/toolCallDelta"), turnId: id, toolCallId: id, content: z.string().max(MAX_DELTA),
    invocationMessage: z.union([z.string().max(4096), z.object({ markdown: z.string().max(4096) }).strict()]).optional(), _meta: meta,
  }).strict(),
]);

/** Session and chat actions the host derives from neutral events, with the event to send instead. */
const DERIVED: Readonly<Record<string, string>> = {
  "session/titleChanged": "the title_changed event",
  "session/configChanged": "the config_changed event",
  "session/inputNeededSet": "the input_requested event",
  "session/inputNeededRemoved": "the input_resolved event",
  "session/customizationsChanged": "hello.mcpServers",
  "session/chatAdded": "createChat",
  "session/chatRemoved": "disposeChat",
  "session/chatUpdated": "the chat's own events",
  "session/metaChanged": "input_snapshot or profile_image_changed",
  "session/ready": "the session's registration",
  "session/creationFailed": "session_creation_failed",
  "chat/turnStarted": "the user_message event",
  "chat/delta": "the text_delta event",
  "chat/reasoning": "the thinking_delta event",
  "chat/responsePart": "the text_delta and thinking_delta events",
  "chat/toolCallReady": "the tool_started or tool_confirmation_requested event",
  "chat/toolCallConfirmed": "the tool_confirmation_resolved event",
  "chat/toolCallComplete": "the tool_completed event",
  "chat/toolCallResultConfirmed": "the tool_result_confirmation_resolved event",
  "chat/turnComplete": "the settled event",
  "chat/turnCancelled": "the settled event",
  "chat/error": "the settled event",
  "chat/usage": "the usage event",
  "chat/inputRequested": "the input_requested event",
  "chat/inputCompleted": "the input_resolved event",
  "chat/turnsLoaded": "the turns_loaded event",
  "chat/pendingMessageSet": "the user_message event",
  "chat/pendingMessageRemoved": "the user_message event",
};

function refusal(type: unknown): string {
  const t = clip(type);
  const via = typeof type === "string" ? DERIVED[type] : undefined;
  return via ? `resource_action ${t} is derived by the host: send ${via} instead` : `resource_action ${t} is not projected by this host`;
}
const invalid = (type: unknown, e: z.ZodError): string => `invalid ${clip(type)}: ${e.issues[0]?.path.join(".") ?? ""} ${e.issues[0]?.message ?? ""}`.trim();

/** The session input request that mirrors a tool call paused for authentication. */
export const authInputId = (toolCallId: string): string => `auth:${toolCallId}`;

/** A v6 `resource_action` on the session's own channel (other than MCP state and the changeset catalogue). */
export function sessionResourceAction(st: HostState, s: SessionModel, action: Json): string | null {
  if (action.type === "session/customizationUpdated" || action.type === "session/customizationRemoved") return backendCustomizationAction(st, s, action);
  if (action.type === "session/customizationToggled") return backendToggle(st, s, action);
  if (action.type !== "session/activityChanged" && action.type !== "session/serverToolsChanged" && action.type !== "session/defaultChatChanged") return refusal(action.type);
  const p = SessionActions.safeParse(action);
  if (!p.success) return invalid(action.type, p.error);
  if (p.data.type === "session/defaultChatChanged") {
    if (p.data.defaultChat === undefined) return "session/defaultChatChanged: this host always names a default chat (name the primary chat to reset it)";
    if (!s.chats.has(p.data.defaultChat)) return "session/defaultChatChanged names no chat of this session";
    st.publish(s.uri, p.data);
    st.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { defaultChat: p.data.defaultChat } });
    return null;
  }
  if (p.data.type === "session/serverToolsChanged" && Buffer.byteLength(JSON.stringify(p.data.tools)) > MAX_SERVER_TOOLS_BYTES) return "session/serverToolsChanged exceeds 1 MiB";
  st.publish(s.uri, p.data);
  return null;
}

/** A v6 `resource_action` on one of the session's chats. */
export function chatResourceAction(st: HostState, s: SessionModel, chat: ChatModel, action: Json): string | null {
  const known = ["chat/activityChanged", "chat/toolCallContentChanged", "chat/toolCallAuthRequired", "chat/toolCallAuthResolved", "chat/toolCallStart", "chat/toolCallDelta"];
  if (!known.includes(action.type as string)) return refusal(action.type);
  const p = ChatActions.safeParse(action);
  if (!p.success) return invalid(action.type, p.error);
  const a = p.data;
  if (a.type === "chat/activityChanged") {
    st.publish(chat.uri, a);
    return null;
  }
  const t = chat.activeTurn;
  // The host ended the turn before the runtime did: its trailing tool actions are accepted and ignored.
  if (!t && chat.draining) return null;
  if (!t || t.id !== a.turnId) return `${a.type} names no active turn of this chat`;
  if (a.type === "chat/toolCallStart") {
    if (findTool(t, a.toolCallId)) return `chat/toolCallStart: duplicate toolCallId ${clip(a.toolCallId)}`;
    if (a.contributor && !mcpHub(st).server(s, a.contributor.customizationId)) return `chat/toolCallStart: contributor ${clip(a.contributor.customizationId)} names no MCP server of this session`;
    st.publish(chat.uri, a);
    return null;
  }
  const tc = findTool(t, a.toolCallId);
  if (!tc) return `${a.type}: unknown toolCallId ${clip(a.toolCallId)}`;
  switch (a.type) {
    case "chat/toolCallDelta": {
      if (tc.status !== "streaming") return "chat/toolCallDelta needs a streaming tool call (started with chat/toolCallStart, not yet ready)";
      const held = typeof tc.partialInput === "string" ? tc.partialInput.length : 0;
      if (held + a.content.length > MAX_PARTIAL_INPUT) return "chat/toolCallDelta: the streamed input would exceed 1,048,576 characters";
      st.publish(chat.uri, a);
      return null;
    }
    case "chat/toolCallContentChanged":
      if (tc.status !== "running") return "chat/toolCallContentChanged needs a running tool call";
      st.publish(chat.uri, a);
      return null;
    case "chat/toolCallAuthRequired": {
      if (tc.status !== "running") return "chat/toolCallAuthRequired needs a running tool call";
      const contributor = tc.contributor as Json | undefined;
      if (contributor?.kind !== "mcp") return "chat/toolCallAuthRequired needs a tool call contributed by an MCP server (tool_started.mcpServerId)";
      st.publish(chat.uri, a);
      st.publish(s.uri, { type: "session/inputNeededSet", request: { id: authInputId(a.toolCallId), chat: chat.uri, kind: "toolAuthentication", turnId: t.id, toolCall: { ...findTool(t, a.toolCallId)! } } });
      return null;
    }
    case "chat/toolCallAuthResolved":
      if (tc.status !== "auth-required") return "chat/toolCallAuthResolved needs a tool call waiting for authentication";
      st.publish(chat.uri, a);
      if (s.inputNeeded.has(authInputId(a.toolCallId))) st.publish(s.uri, { type: "session/inputNeededRemoved", id: authInputId(a.toolCallId) });
      return null;
  }
}

/**
 * The session lost its backend route: what that backend last reported about itself (server tools,
 * session and chat activity) leaves with it, announced with the official actions.
 */
export function backendViewGone(st: HostState, s: SessionModel): void {
  if (s.serverTools && s.serverTools.length > 0) st.publish(s.uri, { type: "session/serverToolsChanged", tools: [] });
  if (s.activity !== undefined) st.publish(s.uri, { type: "session/activityChanged" });
  for (const c of s.chats.values()) if (c.activity !== undefined) st.publish(c.uri, { type: "chat/activityChanged" });
  backendCustomizationsGone(st, s);
}

/** The session's default chat (`SessionState.defaultChat`): the backend's choice while that chat exists, else the primary chat. */
export function defaultChatOf(s: SessionModel): string {
  const d = s.extra.defaultChat;
  return typeof d === "string" && s.chats.has(d) ? d : s.primaryChat;
}

/** Chat `chatUri` is about to leave: if it is the default, the primary chat becomes the default again (announced first). */
export function resetDefaultChat(st: HostState, s: SessionModel, chatUri: string): void {
  if (s.extra.defaultChat !== chatUri) return;
  st.publish(s.uri, { type: "session/defaultChatChanged", defaultChat: s.primaryChat });
  st.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { defaultChat: s.primaryChat } });
}

/** Whether `tool_started.mcpServerId` names an MCP server of the session's current route; else why not. */
export function mcpContributor(st: HostState, s: SessionModel, serverId: string | undefined): Json | string | undefined {
  if (serverId === undefined) return undefined;
  if ((s.route?.version ?? 0) < MIN_VERSION) return "mcpServerId requires protocol version 6";
  if (!mcpHub(st).server(s, serverId)) return `mcpServerId ${clip(serverId)} names no MCP server of this session`;
  return { kind: "mcp", customizationId: serverId };
}

const ToolCallResult = z.object({
  success: z.literal(false),
  pastTenseMessage: z.union([z.string().max(4096), z.object({ markdown: z.string().max(4096) }).strict()]),
  content: z.array(ToolContent).max(64).optional(),
  error: z.object({ message: z.string().max(4096), code: z.string().max(256).optional() }).strict().optional(),
}).strict();
const CancelAuth = z.object({ type: z.literal("chat/toolCallComplete"), turnId: id, toolCallId: id, result: ToolCallResult, _meta: meta }).strict();

/**
 * A client `chat/toolCallComplete` on a tool call waiting for MCP authentication: AHP lets the
 * client cancel it with a failed result. Validated, sent as `apply_resource_action`, and reduced
 * and echoed only after the backend accepts; anything else is refused with the reason.
 */
export function cancelAuthRequiredTool(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const t = chat.activeTurn;
  const tc = t && t.id === action.turnId && typeof action.toolCallId === "string" ? findTool(t, action.toolCallId) : undefined;
  if (!tc) return reject("no such tool call in the active turn");
  if (tc.status !== "auth-required") return reject("chat/toolCallComplete from a client is accepted only to cancel a tool call waiting for authentication");
  const p = CancelAuth.safeParse(action);
  if (!p.success) return reject("a tool call waiting for authentication can only be completed with a failed result (success: false)");
  const route = s.route;
  if (!route) return reject(NOT_CONNECTED_REFUSAL);
  if (route.version < MIN_VERSION) return reject("the session's backend does not accept resource actions (needs backend protocol 6)");
  forwardResourceAction(st, s, chat.uri, p.data, reject, () => {
    const cur = chat.activeTurn && chat.activeTurn.id === p.data.turnId ? findTool(chat.activeTurn, p.data.toolCallId) : undefined;
    if (cur?.status !== "auth-required") return reject("the tool call is no longer waiting for authentication");
    st.publish(chat.uri, p.data, origin);
    if (s.inputNeeded.has(authInputId(p.data.toolCallId))) st.publish(s.uri, { type: "session/inputNeededRemoved", id: authInputId(p.data.toolCallId) });
  });
}
