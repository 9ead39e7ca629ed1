/**
 * Projections of the host model into AHP wire state: root/session/chat snapshots, summaries and
 * status bits. Pure reads of the model; nothing here mutates state or publishes.
 */
import { ROOT } from "./ahp-constants.js";
import { STATUS, type ChatModel, type Json, type SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { sessionMeta, summaryMeta } from "./session-meta.js";
import { mcpHub } from "./mcp-channels.js";
import { rootConfig } from "./notifications.js";
import { resourceSnapshot, sessionAnnotationsSummary, sessionChangesets } from "./resources.js";
import { defaultChatOf } from "./resource-actions.js";
import { chatFlags, statusFlags } from "./status-flags.js";

/** The session config schema the host exposes: the two values `configure` can change. */
export const SESSION_CONFIG_SCHEMA: Json = {
  type: "object",
  properties: {
    model: {
      type: "object",
      title: "Model",
      description: "Provider and model ID for later turns",
      properties: { provider: { type: "string", title: "Provider" }, id: { type: "string", title: "Model ID" } },
      required: ["provider", "id"],
      sessionMutable: true,
    },
    thinkingLevel: { type: "string", title: "Thinking level", sessionMutable: true },
  },
};

/**
 * A chat's status, as the public chat reducer derives it: exactly one activity value. With an
 * active turn, InputNeeded while an input request part is open or a tool call waits for
 * confirmation or authentication, else InProgress; without one, Error after a failed turn, else Idle. An input
 * request the runtime raises while no turn runs does not change the chat: it is announced at
 * the session level (`session/inputNeededSet`) only.
 */
export function chatStatus(c: ChatModel): number {
  if (c.activeTurn) {
    for (const r of c.activeTurn.responseParts) {
      if (r.kind === "inputRequest" && r.response === undefined) return STATUS.InputNeeded;
      if (r.kind === "toolCall") {
        const st = (r.toolCall as Json).status;
        if (st === "pending-confirmation" || st === "pending-result-confirmation" || st === "auth-required") return STATUS.InputNeeded;
      }
    }
    return STATUS.InProgress;
  }
  return c.lastError ? STATUS.Error : STATUS.Idle;
}

/**
 * A session's status: one exclusive activity value (never an OR of two: the schema allows
 * 1, 2, 8, 24, 32, 64). Error when creation failed; InputNeeded when the session or any chat
 * waits for input; else InProgress when any chat runs a turn, Error when any chat's last turn failed, else Idle.
 */
export function sessionStatus(st: HostState, s: SessionModel): number {
  // The AHP flags (IsRead 32, IsArchived 64) are OR-ed onto the activity value (status-flags.ts).
  return sessionActivity(st, s) | statusFlags(s);
}

function sessionActivity(st: HostState, s: SessionModel): number {
  if (s.lifecycle === "failed") return STATUS.Error;
  // A client-execution entry is work delegated to a client, not a prompt: it leaves the activity unchanged (AHP).
  for (const r of s.inputNeeded.values()) if (r.kind !== "toolClientExecution") return STATUS.InputNeeded;
  // The most pressing of its chats' activity, not only the primary chat's: a turn running, or failed, in another chat
  // (a side chat, a fork) reads so in every session list. InputNeeded, then InProgress, then Error, then Idle.
  const primary = st.chatIndex.get(s.primaryChat);
  let worst: number = STATUS.Idle;
  for (const c of primary !== undefined && !s.chats.has(primary.uri) ? [primary, ...s.chats.values()] : s.chats.values()) {
    const x = chatStatus(c);
    if (x === STATUS.InputNeeded) return x;
    if (x === STATUS.InProgress) worst = x;
    else if (x === STATUS.Error && worst === STATUS.Idle) worst = x;
  }
  return worst;
}

export function chatSummary(c: ChatModel): Json {
  const out: Json = { resource: c.uri, title: c.title, status: chatStatus(c) | chatFlags(c), modifiedAt: c.modifiedAt };
  if (c.interactivity) out.interactivity = c.interactivity;
  if (c.origin) out.origin = c.origin;
  if (c.workingDirectories) out.workingDirectories = c.workingDirectories;
  return out;
}

export function chatState(c: ChatModel): Json {
  const out: Json = { ...chatSummary(c), turns: c.turns };
  // Chat state only: a summary change could not clear it (`session/chatUpdated` merges fields).
  if (c.activity !== undefined) out.activity = c.activity;
  if (c.nextCursor) out.turnsNextCursor = c.nextCursor;
  if (c.activeTurn) {
    const t = c.activeTurn;
    const at: Json = { id: t.id, startedAt: t.startedAt, message: t.message, responseParts: t.responseParts };
    if (t.usage) at.usage = t.usage;
    out.activeTurn = at;
  }
  if (c.steeringMessage) out.steeringMessage = c.steeringMessage;
  if (c.queuedMessages.length > 0) out.queuedMessages = c.queuedMessages;
  if (c.draft) out.draft = c.draft;
  if (c.backgroundWork) out.backgroundWork = c.backgroundWork;
  if (c.changesets) out.changesets = c.changesets;
  return out;
}

export function configValues(s: SessionModel): Json {
  const values: Json = {};
  if (s.extra.model) values.model = s.extra.model;
  if (typeof s.extra.thinkingLevel === "string") values.thinkingLevel = s.extra.thinkingLevel;
  return values;
}

export function sessionState(st: HostState, s: SessionModel): Json {
  const out: Json = {
    provider: s.provider,
    title: s.title,
    status: sessionStatus(st, s),
    lifecycle: s.lifecycle,
    activeClients: s.activeClients,
    chats: [...s.chats.values()].map((c) => chatSummary(c)),
    defaultChat: defaultChatOf(s),
    config: { schema: SESSION_CONFIG_SCHEMA, values: configValues(s) },
  };
  if (s.creationError) out.creationError = s.creationError;
  if (s.activity !== undefined) out.activity = s.activity;
  if (s.serverTools) out.serverTools = s.serverTools;
  if (Array.isArray(s.extra.workingDirectories)) out.workingDirectories = s.extra.workingDirectories;
  if (s.inputNeeded.size > 0) out.inputNeeded = [...s.inputNeeded.values()];
  const customizations = mcpHub(st).sessionCustomizations(s);
  if (customizations) out.customizations = customizations;
  const changesets = sessionChangesets(st, s);
  if (changesets) out.changesets = changesets;
  const annotations = sessionAnnotationsSummary(st, s);
  if (annotations) out.annotations = annotations;
  const meta = sessionMeta(s);
  if (meta) out._meta = meta;
  return out;
}

export function summary(st: HostState, s: SessionModel): Json {
  const out: Json = {
    resource: s.uri,
    provider: s.provider,
    title: s.title,
    status: sessionStatus(st, s),
    createdAt: s.createdAt,
    modifiedAt: s.modifiedAt,
    defaultChat: defaultChatOf(s),
    chats: [...s.chats.values()].map((c) => {
      const o: Json = { resource: c.uri, title: c.title };
      if (c.interactivity) o.interactivity = c.interactivity;
      return o;
    }),
  };
  if (Array.isArray(s.extra.workingDirectories)) out.workingDirectories = s.extra.workingDirectories;
  const annotations = sessionAnnotationsSummary(st, s);
  if (annotations) out.annotations = annotations;
  const meta = summaryMeta(s);
  if (meta) out._meta = meta;
  return out;
}

/** One `AgentInfo` per provider ID with a live provider route, sorted by ID. */
export function agents(st: HostState): Json[] {
  const seen = new Map<string, Json>();
  for (const p of st.providers.values())
    for (const info of p.providers)
      if (!seen.has(info.id)) {
        const a: Json = { provider: info.id, displayName: info.displayName, description: info.description, models: [] };
        // AHP MultipleChatsCapability: present means createChat works; fork/sideChat gate sources.
        if (info.protectedResources) a.protectedResources = info.protectedResources;
        if (info.multipleChats?.create) a.capabilities = { multipleChats: { fork: info.multipleChats.fork === true, sideChat: info.multipleChats.sideChat === true } };
        if (info.multipleWorkingDirectories) a.capabilities = { ...(a.capabilities as Json | undefined), multipleWorkingDirectories: { ...info.multipleWorkingDirectories } };
        seen.set(info.id, a);
      }
  return [...seen.values()].sort((a, b) => String(a.provider).localeCompare(String(b.provider)));
}

export function snapshot(st: HostState, uri: string): Json | undefined {
  if (uri === ROOT) {
    const config = rootConfig(st);
    return { resource: ROOT, state: { agents: agents(st), activeSessions: st.sessions.size, ...(config ? { config } : {}) }, fromSeq: st.serverSeq };
  }
  const s = st.sessions.get(uri);
  if (s) return { resource: uri, state: sessionState(st, s), fromSeq: st.serverSeq };
  const c = st.chatIndex.get(uri);
  if (c) return { resource: uri, state: chatState(c), fromSeq: st.serverSeq };
  return resourceSnapshot(st, uri);
}
