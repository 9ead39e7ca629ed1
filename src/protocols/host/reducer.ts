/**
 * The AHP reducer: applies one accepted action to the host model (session and chat state).
 * Mirrors the upstream reducers for the actions this host emits or accepts; actions for unknown
 * channels or turns are no-ops. Persists chat transcripts when a turn ends or history loads.
 */
import { ROOT } from "./ahp-constants.js";
import { channelRemoved } from "./channel-removals.js";
import { findPart, findTool, nowIso, retirePending, type ChatModel, type Json, type PendingMessage } from "./model.js";
import type { HostState } from "./state.js";
import { chatModified, isChatFlagAction, isStatusFlagAction, reduceChatFlag, reduceStatusFlag } from "./status-flags.js";
import { isChatWorkingDirAction, isWorkingDirAction, reduceChatWorkingDir, reduceWorkingDir } from "./working-dirs.js";
import { CHAT_DRAFT_ACTIONS, reduceChatDraft } from "./chat-drafts.js";
import { CHAT_09_ACTIONS, reduceChat09, reduceChatsReordered } from "./chat-09.js";

/** `startedAt` + `duration` ms as ISO-8601 (the start itself when either is unusable). */
export function turnEndIso(startedAt: string, duration: unknown): string {
  const t = Date.parse(startedAt);
  if (!Number.isFinite(t)) return startedAt;
  const d = typeof duration === "number" && Number.isFinite(duration) ? Math.max(0, duration) : 0;
  return new Date(t + d).toISOString();
}

export function reduceAction(st: HostState, channel: string, a: Json): void {
  const type = a.type as string;
  if (channel === ROOT) return;
  const s = st.sessions.get(channel);
  if (s) {
    if (type === "session/titleChanged") {
      s.title = a.title as string;
      s.modifiedAt = nowIso();
    } else if (type === "session/inputNeededSet") {
      const r = a.request as Json;
      s.inputNeeded.set(r.id as string, r);
    } else if (type === "session/inputNeededRemoved") s.inputNeeded.delete(a.id as string);
    else if (type === "session/chatAdded") {
      const sum = a.summary as Json;
      const c = st.ensureChat(s, sum.resource as string, sum.title as string);
      if (typeof sum.modifiedAt === "string") c.modifiedAt = sum.modifiedAt; // what was announced is what is stored
      if (sum.origin) c.origin = sum.origin as Json;
      if (Array.isArray(sum.workingDirectories)) c.workingDirectories = sum.workingDirectories as string[];
      if (typeof sum.interactivity === "string") c.interactivity = sum.interactivity;
      st.persistChat(c);
    } else if (type === "session/chatRemoved") {
      const uri = a.chat as string;
      if (uri === s.primaryChat || !s.chats.has(uri)) return;
      s.chats.delete(uri);
      st.chatIndex.delete(uri);
      channelRemoved(st, uri);
      st.actions.dropChannel(uri);
      st.store.removeChat(uri);
    } else if (type === "session/configChanged") {
      const cfg = a.config as Json;
      if (a.replace === true) {
        delete s.extra.model;
        delete s.extra.thinkingLevel;
      }
      if (cfg.model !== undefined) s.extra.model = cfg.model;
      if (cfg.thinkingLevel !== undefined) s.extra.thinkingLevel = cfg.thinkingLevel;
      st.persistSession(s);
    } else if (type === "session/activityChanged") s.activity = typeof a.activity === "string" ? a.activity : undefined;
    else if (type === "session/serverToolsChanged") s.serverTools = a.tools as Json[];
    else if (type === "session/activeClientSet") {
      // Upsert keyed by clientId (upstream session reducer).
      const e = a.activeClient as Json;
      const i = s.activeClients.findIndex((x) => x.clientId === e.clientId);
      if (i === -1) s.activeClients = [...s.activeClients, e];
      else s.activeClients = s.activeClients.map((x, j) => (j === i ? e : x));
    } else if (type === "session/activeClientRemoved") s.activeClients = s.activeClients.filter((x) => x.clientId !== a.clientId);
    else if (isStatusFlagAction(type)) reduceStatusFlag(st, s, a);
    else if (isWorkingDirAction(type)) reduceWorkingDir(st, s, a);
    else if (type === "session/chatsReordered") reduceChatsReordered(st, s, a);
    else if (type === "session/defaultChatChanged") {
      if (a.defaultChat === s.primaryChat) delete s.extra.defaultChat;
      else s.extra.defaultChat = a.defaultChat;
      st.persistSession(s);
    }
    return;
  }
  const c = st.chatIndex.get(channel);
  if (!c) return;
  reduceChat(st, c, type, a);
  // The active turn is checkpointed (turn-checkpoint.ts): a new turn on the next tick, changes at a bounded rate.
  if (c.activeTurn && TURN_CHANGES.has(type)) st.checkpoints.touch(c, type === "chat/turnStarted");
}

/** Chat actions that change the active turn. */
const TURN_CHANGES = new Set([
  "chat/turnStarted",
  "chat/responsePart",
  "chat/delta",
  "chat/reasoning",
  "chat/toolCallStart",
  "chat/toolCallDelta",
  "chat/toolCallReady",
  "chat/toolCallConfirmed",
  "chat/toolCallComplete",
  "chat/toolCallResultConfirmed",
  "chat/usage",
  "chat/inputRequested",
  "chat/inputCompleted",
  "chat/inputAnswerChanged",
]);

// modifiedAt is derived from the turn (0.9+): its start when it starts, start + duration when
// it ends; other chat actions leave it as it was, so any reducer rebuilds the same value.
function reduceChat(st: HostState, c: ChatModel, type: string, a: Json): void {
  const t = c.activeTurn;
  switch (type) {
    case "chat/turnStarted":
      c.activeTurn = { id: a.turnId as string, startedAt: a.startedAt as string, startedMono: performance.now(), message: a.message as Json, responseParts: [] };
      c.modifiedAt = a.startedAt as string;
      c.lastError = false;
      chatModified(c);
      if (typeof a.queuedMessageId === "string") {
        // Upstream reducer: the consumed pending message (queued or steering) leaves the chat.
        c.queuedMessages = c.queuedMessages.filter((m) => m.id !== a.queuedMessageId);
        if (c.steeringMessage?.id === a.queuedMessageId) c.steeringMessage = undefined;
        retirePending(c, a.queuedMessageId);
        st.persistChat(c);
      }
      break;
    case "chat/pendingMessageSet": {
      const m: PendingMessage = { id: a.id as string, message: a.message as Json };
      // A steering message replaced by one with another ID is removed.
      if (a.kind === "steering" && c.steeringMessage && c.steeringMessage.id !== m.id) retirePending(c, c.steeringMessage.id);
      if (a.kind === "steering") c.steeringMessage = m;
      else {
        const i = c.queuedMessages.findIndex((x) => x.id === m.id);
        if (i === -1) c.queuedMessages.push(m);
        else c.queuedMessages[i] = m;
      }
      st.persistChat(c);
      break;
    }
    case "chat/pendingMessageRemoved":
      if (typeof a.id === "string") retirePending(c, a.id);
      if (a.kind === "steering") {
        if (c.steeringMessage?.id === a.id) c.steeringMessage = undefined;
      } else c.queuedMessages = c.queuedMessages.filter((m) => m.id !== a.id);
      st.persistChat(c);
      break;
    case "chat/responsePart":
      if (t && t.id === a.turnId) t.responseParts.push(a.part as Json);
      break;
    case "chat/delta":
    case "chat/reasoning": {
      if (!t || t.id !== a.turnId) break;
      const p = findPart(t, a.partId as string);
      if (p) p.content = (p.content as string) + (a.content as string);
      break;
    }
    case "chat/toolCallStart":
      if (t && t.id === a.turnId)
        t.responseParts.push({
          kind: "toolCall",
          toolCall: {
            toolCallId: a.toolCallId, toolName: a.toolName, displayName: a.displayName,
            ...(a.intention !== undefined ? { intention: a.intention } : {}), ...(a.contributor ? { contributor: a.contributor } : {}), status: "streaming",
          },
        });
      break;
    case "chat/toolCallDelta": {
      // Upstream reducer: only a streaming call takes input deltas; the message is replaced.
      const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
      if (tc?.status !== "streaming") break;
      tc.partialInput = (typeof tc.partialInput === "string" ? tc.partialInput : "") + (a.content as string);
      if (a.invocationMessage !== undefined) tc.invocationMessage = a.invocationMessage;
      break;
    }
    case "chat/activityChanged":
      c.activity = typeof a.activity === "string" ? a.activity : undefined;
      break;
    case "chat/toolCallContentChanged": {
      const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
      if (tc?.status === "running") tc.content = a.content;
      break;
    }
    case "chat/toolCallAuthRequired": {
      // Upstream reducer: only a running, MCP-contributed call pauses for authentication.
      const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
      if (tc?.status !== "running" || (tc.contributor as Json | undefined)?.kind !== "mcp") break;
      tc.status = "auth-required";
      tc.auth = a.auth;
      break;
    }
    case "chat/toolCallAuthResolved": {
      const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
      if (tc?.status !== "auth-required") break;
      tc.status = "running";
      delete tc.auth;
      break;
    }
    case "chat/toolCallReady": {
      const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
      if (!tc) break;
      if (tc.status !== "streaming" && tc.status !== "running") break;
      delete tc.partialInput; // the streamed input gives way to toolInput (upstream reducer)
      tc.invocationMessage = a.invocationMessage;
      if (a.toolInput !== undefined) tc.toolInput = a.toolInput;
      if (a.confirmed) {
        tc.status = "running";
        tc.confirmed = a.confirmed;
      } else {
        tc.status = "pending-confirmation";
        delete tc.confirmed;
        if (a.confirmationTitle !== undefined) tc.confirmationTitle = a.confirmationTitle;
        if (a.editable !== undefined) tc.editable = a.editable;
        if (a.options !== undefined) tc.options = a.options;
      }
      break;
    }
    case "chat/toolCallConfirmed": {
      const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
      if (!tc || tc.status !== "pending-confirmation") break;
      // Upstream reducer: the chosen option is resolved from the offered ones and kept.
      const selected = typeof a.selectedOptionId === "string" && Array.isArray(tc.options) ? (tc.options as Json[]).find((o) => o.id === a.selectedOptionId) : undefined;
      delete tc.confirmationTitle;
      delete tc.editable;
      delete tc.options;
      if (selected) tc.selectedOption = selected;
      if (a.approved) {
        tc.status = "running";
        tc.confirmed = a.confirmed ?? "user-action";
        if (typeof a.editedToolInput === "string") tc.toolInput = a.editedToolInput;
      } else {
        tc.status = "cancelled";
        tc.reason = a.reason ?? "denied";
        if (a.reasonMessage !== undefined) tc.reasonMessage = a.reasonMessage;
      }
      break;
    }
    case "chat/toolCallComplete": {
      const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
      if (!tc || (tc.status !== "running" && tc.status !== "pending-confirmation" && tc.status !== "auth-required")) break;
      const r = a.result as Json;
      // Upstream: a call waiting for authentication only completes with a failed result (a cancel).
      if (tc.status === "auth-required" && r.success !== false) break;
      delete tc.auth;
      tc.status = a.requiresResultConfirmation ? "pending-result-confirmation" : "completed";
      if (!tc.confirmed) tc.confirmed = "not-needed";
      if (!tc.invocationMessage) tc.invocationMessage = tc.displayName;
      delete tc.confirmationTitle;
      delete tc.editable;
      delete tc.options;
      Object.assign(tc, r);
      break;
    }
    case "chat/toolCallResultConfirmed": {
      const tc = t && t.id === a.turnId ? findTool(t, a.toolCallId as string) : undefined;
      if (!tc || tc.status !== "pending-result-confirmation") break;
      if (a.approved) tc.status = "completed";
      else {
        const keep: Json = { toolCallId: tc.toolCallId, toolName: tc.toolName, displayName: tc.displayName, invocationMessage: tc.invocationMessage };
        if (tc.contributor) keep.contributor = tc.contributor;
        for (const k of Object.keys(tc)) delete tc[k];
        Object.assign(tc, keep, { status: "cancelled", reason: "result-denied" });
      }
      break;
    }
    case "chat/usage":
      if (t && t.id === a.turnId) t.usage = a.usage as Json;
      break;
    case "chat/inputRequested": {
      const req = a.request as Json;
      c.inputs.set(req.id as string, req);
      if (t) {
        chatModified(c);
        const existing = t.responseParts.find((p) => p.kind === "inputRequest" && (p.request as Json).id === req.id && p.response === undefined);
        if (existing) existing.request = req;
        else t.responseParts.push({ kind: "inputRequest", request: req });
      }
      break;
    }
    case "chat/inputCompleted": {
      c.inputs.delete(a.requestId as string);
      c.inputTurns.delete(a.requestId as string);
      const parts = t ? t.responseParts : [];
      const p = parts.find((x) => x.kind === "inputRequest" && (x.request as Json).id === a.requestId);
      if (p) {
        p.response = a.response;
        if (a.answers) (p.request as Json).answers = a.answers;
      }
      break;
    }
    case "chat/turnComplete":
    case "chat/turnCancelled":
    case "chat/error": {
      if (!t || t.id !== a.turnId) break;
      const parts = t.responseParts.slice();
      for (const p of parts) {
        if (p.kind !== "toolCall") continue;
        const tc = p.toolCall as Json;
        if (tc.status === "streaming" || tc.status === "pending-confirmation" || tc.status === "running" || tc.status === "pending-result-confirmation" || tc.status === "auth-required") {
          const keep: Json = { toolCallId: tc.toolCallId, toolName: tc.toolName, displayName: tc.displayName, invocationMessage: tc.invocationMessage ?? tc.displayName };
          if (tc.contributor) keep.contributor = tc.contributor;
          p.toolCall = { ...keep, status: "cancelled", reason: "skipped" };
        }
      }
      if (type === "chat/error") parts.push((a.part as Json | undefined) ?? { kind: "error", error: a.error });
      const done: Json = {
        id: t.id,
        startedAt: t.startedAt,
        duration: a.duration,
        message: t.message,
        responseParts: parts,
        state: type === "chat/turnComplete" ? "complete" : type === "chat/turnCancelled" ? "cancelled" : "error",
      };
      if (t.usage) done.usage = t.usage;
      if (type === "chat/error") done.error = a.error;
      c.turns.push(done);
      c.modifiedAt = turnEndIso(t.startedAt, a.duration);
      c.activeTurn = undefined;
      c.lastError = type === "chat/error";
      for (const [id, turn] of c.inputTurns) if (turn === t.id) {
        c.inputs.delete(id);
        c.inputTurns.delete(id);
      }
      st.persistChat(c);
      break;
    }
    case "chat/turnsLoaded": {
      const turns = a.turns as Json[];
      const have = new Set(c.turns.map((x) => x.id));
      const older = turns.filter((x) => !have.has(x.id));
      if (older.length > 0) {
        c.turns = [...older, ...c.turns];
        c.rewriteTurns = true;
      }
      if (a.turnsNextCursor) c.nextCursor = a.turnsNextCursor as string;
      else delete c.nextCursor;
      st.persistChat(c);
      break;
    }
    default:
      if (CHAT_DRAFT_ACTIONS.has(type)) reduceChatDraft(st, c, type, a);
      else if (isChatFlagAction(type)) reduceChatFlag(st, c, a);
      else if (isChatWorkingDirAction(type)) reduceChatWorkingDir(st, c, a);
      else if (CHAT_09_ACTIONS.has(type)) reduceChat09(st, c, type, a);
  }
}
