/**
 * Backend events → AHP actions. Each validated backend event is reduced by publishing the AHP
 * actions it stands for. Contract: `applyBackendEvent` either publishes and returns null, or
 * publishes nothing and returns a semantic-rejection message.
 */
import { randomUUID } from "node:crypto";
import type { BackendEvent, HistoryTurn, NeutralInputRequest } from "./backend-schema.js";
import { REFUSED_NOTE_SUFFIX, chatErrorAction, findTool, nowIso, retirePending, type ChatModel, type Json, type Origin, type SessionModel, type TurnModel } from "./model.js";
import type { HostState } from "./state.js";
import { setInputAvailable } from "./session-meta.js";
import { authInputId, mcpContributor } from "./resource-actions.js";
import { clientCallSettled, clientInputId, clientToolRequested } from "./client-tools.js";

/** Streamed text (text and thinking deltas, in UTF-16 code units) one turn may carry. */
export const MAX_TURN_TEXT = 4 * 1024 * 1024;
export const TRUNCATION_NOTICE = `\n\n[Berth: this turn's output exceeded ${MAX_TURN_TEXT / (1024 * 1024)} MiB; the rest was not kept.]`;

/**
 * The part of `text` that still fits the turn's text bound (possibly ""). Crossing the bound
 * marks the turn `truncated` (the caller announces it once); later deltas are dropped.
 */
function boundTurnText(t: TurnModel, text: string): string {
  if (t.truncated) return "";
  const used = t.textChars ?? 0;
  let room = MAX_TURN_TEXT - used;
  if (text.length <= room) {
    t.textChars = used + text.length;
    return text;
  }
  if (room > 0 && /[\uD800-\uDBFF]/.test(text[room - 1]!)) room--; // never split a surrogate pair
  t.textChars = MAX_TURN_TEXT;
  t.truncated = true;
  return text.slice(0, Math.max(0, room));
}

/**
 * The runtime consumed pending message `id`, which the chat does not show as pending (the answer to its `steer` or
 * `follow_up` was lost with the connection): remembered as consumed, so a client's resend of it is refused.
 */
function consumedUnseen(st: HostState, chat: ChatModel, id: string): void {
  retirePending(chat, id);
  st.persistChat(chat);
}

/** A backend history turn as a completed AHP `Turn`. */
export function historyToTurn(h: HistoryTurn): Json {
  const parts: Json[] = [];
  if (h.reasoningText) parts.push({ kind: "reasoning", id: `${h.id}-r`, content: h.reasoningText });
  if (h.responseText) parts.push({ kind: "markdown", id: `${h.id}-m`, content: h.responseText });
  const t: Json = { id: h.id, message: { text: h.userText, origin: { kind: "user" } }, responseParts: parts, state: h.cancelled ? "cancelled" : "complete" };
  if (h.startedAt && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(h.startedAt)) t.startedAt = h.startedAt;
  return t;
}

/** A text or reasoning delta in the active turn: one `chat/delta` (or a new part), bounded by the turn's text limit. */
function applyTextDelta(st: HostState, chat: ChatModel, t: TurnModel, type: "text_delta" | "thinking_delta", delta: string): void {
  const text = boundTurnText(t, delta);
  const kind = type === "text_delta" ? "markdown" : "reasoning";
  const n = t.responseParts.length;
  const last = t.responseParts[n - 1];
  if (text === "") {
    /* nothing left to keep */
  } else if (last && last.kind === kind && t.noteAt !== n - 1) st.publish(chat.uri, { type: kind === "markdown" ? "chat/delta" : "chat/reasoning", turnId: t.id, partId: last.id, content: text });
  else st.publish(chat.uri, { type: "chat/responsePart", turnId: t.id, part: { kind, id: `p${++chat.partSeq}`, content: text } });
  if (t.truncated === true) {
    t.truncated = "announced";
    st.publish(chat.uri, { type: "chat/responsePart", turnId: t.id, part: { kind: "markdown", id: `p${++chat.partSeq}`, content: TRUNCATION_NOTICE } });
  }
}

/**
 * A text or thinking delta refused for being over the per-event bound (`bound`, in characters): the clients watching
 * the chat's active turn get a visible note in its answer, naming the size and the bound, so the answer does not
 * silently miss that text. Nothing is published without an active turn (the event would be refused anyway).
 */
export function noteRefusedDelta(st: HostState, s: SessionModel, chat: ChatModel, type: "text_delta" | "thinking_delta", chars: number, bound: number): void {
  const t = chat.activeTurn;
  if (!t) return;
  const what = type === "text_delta" ? "text" : "reasoning";
  const content = `\n\n[Berth: the backend sent a ${type} of ${chars} characters; this host accepts at most ${bound} (${bound / (1024 * 1024)} MiB) per event, so that ${what} was refused and is missing from this answer.]`;
  st.publish(chat.uri, { type: "chat/responsePart", turnId: t.id, part: { kind: "markdown", id: `p${++chat.partSeq}${REFUSED_NOTE_SUFFIX}`, content } });
  t.noteAt = t.responseParts.length - 1; // later text starts a part of its own (no ID scan per delta)
  st.summaryChanged(s);
}

/**
 * Reduce one validated backend event into AHP state. Returns null on success, or a
 * semantic-rejection message (nothing was published in that case).
 */
const TURN_SCOPED = new Set(["text_delta", "thinking_delta", "tool_started", "tool_completed", "tool_confirmation_requested", "tool_confirmation_resolved", "tool_result_confirmation_requested", "tool_result_confirmation_resolved", "usage", "client_tool_requested"]);

export function applyBackendEvent(st: HostState, s: SessionModel, chat: ChatModel, ev: BackendEvent): string | null {
  const t = chat.activeTurn;
  if (!t && chat.draining) {
    if (TURN_SCOPED.has(ev.type)) return null; // trailing output of a turn the host already ended
    if (ev.type === "settled") {
      chat.draining = false;
      return null;
    }
  }
  if (ev.type === "user_message" || ev.type === "agent_started") chat.draining = false;
  if (t && (ev.type === "text_delta" || ev.type === "thinking_delta")) {
    applyTextDelta(st, chat, t, ev.type, ev.text); // the hot path: no closures below
    st.summaryChanged(s);
    return null;
  }
  const needTurn = () => (t ? null : `${ev.type} without an active turn`);
  const startTurn = (text: string, turnId?: string, kind = "user", queuedMessageId?: string) => {
    const act: Json = { type: "chat/turnStarted", turnId: turnId ?? randomUUID(), startedAt: nowIso(), message: { text, origin: { kind } } };
    if (queuedMessageId !== undefined) act.queuedMessageId = queuedMessageId;
    st.publish(chat.uri, act);
  };
  switch (ev.type) {
    case "user_message": {
      if (t) {
        // An echo of a client-started (or already running) turn, or a steering message the
        // runtime injected into it.
        const steer = chat.steeringMessage;
        if (steer && (ev.pendingId !== undefined ? ev.pendingId === steer.id : (steer.message.text as string) === ev.text))
          st.publish(chat.uri, { type: "chat/pendingMessageRemoved", kind: "steering", id: steer.id });
        else if (ev.pendingId !== undefined) consumedUnseen(st, chat, ev.pendingId);
        return null;
      }
      // A queued (follow-up) message the runtime started: named by `pendingId`, else the head
      // of the queue when its text is identical.
      const head = chat.queuedMessages[0];
      const queued =
        ev.pendingId !== undefined
          ? chat.queuedMessages.find((m) => m.id === ev.pendingId)
          : head && (head.message.text as string) === ev.text
            ? head
            : undefined;
      if (queued) st.publish(chat.uri, { type: "chat/pendingMessageRemoved", kind: "queued", id: queued.id });
      // A steering message whose turn ended before it was injected, now run as a turn of its own.
      else if (ev.pendingId !== undefined && chat.steeringMessage?.id === ev.pendingId) st.publish(chat.uri, { type: "chat/pendingMessageRemoved", kind: "steering", id: ev.pendingId });
      // A message the chat never showed as pending (its command's answer was lost): consumed all the same.
      else if (ev.pendingId !== undefined) consumedUnseen(st, chat, ev.pendingId);
      startTurn(ev.text, ev.turnId, "user", queued?.id);
      break;
    }
    case "agent_started":
      if (!t) startTurn("", ev.turnId, "agent");
      break;
    case "text_delta":
    case "thinking_delta":
      return needTurn(); // with a turn, handled above
    case "tool_started": {
      const err = needTurn();
      if (err) return err;
      // A call the backend opened with a v6 chat/toolCallStart (streaming its input) becomes ready here.
      const open = findTool(t!, ev.toolCallId);
      if (open && open.status !== "streaming") return `duplicate toolCallId ${ev.toolCallId}`;
      if (open && ev.mcpServerId !== undefined && (open.contributor as Json | undefined)?.customizationId !== ev.mcpServerId) return `tool_started.mcpServerId differs from the contributor of streaming call ${ev.toolCallId}`;
      const contributor = open ? undefined : mcpContributor(st, s, ev.mcpServerId);
      if (typeof contributor === "string") return contributor;
      if (!open) st.publish(chat.uri, { type: "chat/toolCallStart", turnId: t!.id, toolCallId: ev.toolCallId, toolName: ev.toolName, displayName: ev.toolName, ...(contributor ? { contributor } : {}) });
      const ready: Json = { type: "chat/toolCallReady", turnId: t!.id, toolCallId: ev.toolCallId, invocationMessage: ev.toolName, confirmed: "not-needed" };
      if (ev.input !== undefined) ready.toolInput = ev.input;
      st.publish(chat.uri, ready);
      break;
    }
    case "tool_confirmation_requested": {
      const err = needTurn();
      if (err) return err;
      if (!findTool(t!, ev.toolCallId)) {
        if (!ev.toolName) return `unknown toolCallId ${ev.toolCallId}`;
        const contributor = mcpContributor(st, s, ev.mcpServerId);
        if (typeof contributor === "string") return contributor;
        st.publish(chat.uri, { type: "chat/toolCallStart", turnId: t!.id, toolCallId: ev.toolCallId, toolName: ev.toolName, displayName: ev.toolName, ...(contributor ? { contributor } : {}) });
      }
      const tc = findTool(t!, ev.toolCallId)!;
      const ready: Json = { type: "chat/toolCallReady", turnId: t!.id, toolCallId: ev.toolCallId, invocationMessage: ev.message ?? (tc.displayName) };
      if (ev.input !== undefined) ready.toolInput = ev.input;
      if (ev.title !== undefined) ready.confirmationTitle = ev.title;
      if (ev.editable !== undefined) ready.editable = ev.editable;
      if (ev.options !== undefined) ready.options = ev.options;
      st.publish(chat.uri, ready);
      st.publish(s.uri, {
        type: "session/inputNeededSet",
        request: { id: `tool:${ev.toolCallId}`, chat: chat.uri, kind: "toolConfirmation", turnId: t!.id, toolCall: { ...findTool(t!, ev.toolCallId)! } },
      });
      break;
    }
    case "tool_confirmation_resolved": {
      const err = needTurn();
      if (err) return err;
      const tc = findTool(t!, ev.toolCallId);
      if (!tc) return `unknown toolCallId ${ev.toolCallId}`;
      if (tc.status === "pending-confirmation") {
        const act: Json = ev.approved
          ? { type: "chat/toolCallConfirmed", turnId: t!.id, toolCallId: ev.toolCallId, approved: true, confirmed: "user-action" }
          : { type: "chat/toolCallConfirmed", turnId: t!.id, toolCallId: ev.toolCallId, approved: false, reason: "denied" };
        if (ev.selectedOptionId) act.selectedOptionId = ev.selectedOptionId;
        st.publish(chat.uri, act);
      }
      if (s.inputNeeded.has(`tool:${ev.toolCallId}`)) st.publish(s.uri, { type: "session/inputNeededRemoved", id: `tool:${ev.toolCallId}` });
      break;
    }
    case "tool_completed":
    case "tool_result_confirmation_requested": {
      const err = needTurn();
      if (err) return err;
      const tc = findTool(t!, ev.toolCallId);
      if (!tc) return `unknown toolCallId ${ev.toolCallId}`;
      const isError = ev.isError === true;
      if (tc.status === "auth-required" && !isError) return "the tool call is waiting for authentication: send chat/toolCallAuthResolved before a successful result";
      const act: Json = {
        type: "chat/toolCallComplete",
        turnId: t!.id,
        toolCallId: ev.toolCallId,
        result: { success: !isError, pastTenseMessage: `${tc.displayName as string} ${isError ? "failed" : "finished"}`, content: [{ type: "text", text: ev.output }] },
      };
      if (ev.type === "tool_result_confirmation_requested" && tc.status !== "auth-required") act.requiresResultConfirmation = true;
      st.publish(chat.uri, act);
      if (s.inputNeeded.has(authInputId(ev.toolCallId))) st.publish(s.uri, { type: "session/inputNeededRemoved", id: authInputId(ev.toolCallId) });
      if (s.inputNeeded.has(`tool:${ev.toolCallId}`)) st.publish(s.uri, { type: "session/inputNeededRemoved", id: `tool:${ev.toolCallId}` });
      // A client-executed call the runtime settled itself (for example after an indeterminate completion).
      if (s.inputNeeded.has(clientInputId(chat.uri, ev.toolCallId))) st.publish(s.uri, { type: "session/inputNeededRemoved", id: clientInputId(chat.uri, ev.toolCallId) });
      clientCallSettled(st, chat.uri, ev.toolCallId);
      break;
    }
    case "client_tool_requested": {
      const err = clientToolRequested(st, s, chat, ev);
      if (err) return err;
      break;
    }
    case "tool_result_confirmation_resolved": {
      const err = needTurn();
      if (err) return err;
      const tc = findTool(t!, ev.toolCallId);
      if (!tc) return `unknown toolCallId ${ev.toolCallId}`;
      if (tc.status === "pending-result-confirmation")
        st.publish(chat.uri, { type: "chat/toolCallResultConfirmed", turnId: t!.id, toolCallId: ev.toolCallId, approved: ev.approved });
      break;
    }
    case "config_changed": {
      const config: Json = {};
      if (ev.model) config.model = ev.model;
      if (ev.thinkingLevel) config.thinkingLevel = ev.thinkingLevel;
      st.publish(s.uri, { type: "session/configChanged", config });
      break;
    }
    case "usage": {
      if (!t) return null;
      const u: Json = {};
      if (ev.inputTokens !== undefined) u.inputTokens = ev.inputTokens;
      if (ev.outputTokens !== undefined) u.outputTokens = ev.outputTokens;
      if (ev.cacheReadTokens !== undefined) u.cacheReadTokens = ev.cacheReadTokens;
      if (ev.model !== undefined) u.model = ev.model;
      st.publish(chat.uri, { type: "chat/usage", turnId: t.id, usage: u });
      break;
    }
    case "settled": {
      if (!t) return null; // already settled (e.g. cancelled by a client)
      const duration = Math.max(0, Math.round(performance.now() - t.startedMono));
      if (ev.error) st.publish(chat.uri, chatErrorAction(t.id, duration, "backend_error", ev.error, ev.resumable === true && (s.route?.version ?? 0) >= 6));
      else if (ev.cancelled) st.publish(chat.uri, { type: "chat/turnCancelled", turnId: t.id, duration });
      else st.publish(chat.uri, { type: "chat/turnComplete", turnId: t.id, duration });
      break;
    }
    case "title_changed":
      st.setTitle(s, ev.title, undefined);
      break;
    case "input_requested":
    case "input_updated": {
      const r = ev.request;
      if (r.turnId !== undefined && (!t || t.id !== r.turnId)) return `input request ${r.id} targets a turn that is not active`;
      if (ev.type === "input_updated" && !chat.inputs.has(r.id)) return `input request ${r.id} is not pending`;
      postInput(st, s, chat, r);
      break;
    }
    case "input_snapshot": {
      setInputAvailable(st, s, ev.available !== false);
      if (!s.inputAvailable) break; // an availability fence: retained requests are neither replaced nor resolved
      const keep = new Set(ev.requests.map((r) => r.id));
      for (const id of [...chat.inputs.keys()]) if (!keep.has(id)) resolveInput(st, s, chat, id, "cancel", undefined, undefined);
      for (const r of ev.requests) postInput(st, s, chat, r);
      break;
    }
    case "input_resolved": {
      if (!chat.inputs.has(ev.requestId)) return `input request ${ev.requestId} is not pending`;
      const origin = ev.commandId ? st.inputOrigins.get(ev.commandId) : undefined;
      if (ev.commandId) st.inputOrigins.delete(ev.commandId);
      resolveInput(st, s, chat, ev.requestId, ev.response, ev.answers, origin);
      break;
    }
    case "turns_loaded": {
      st.publish(chat.uri, {
        type: "chat/turnsLoaded",
        turns: ev.turns.map((h) => historyToTurn(h)),
        ...(ev.nextCursor ? { turnsNextCursor: ev.nextCursor } : {}),
      });
      break;
    }
  }
  st.summaryChanged(s);
  return null;
}


function postInput(st: HostState, s: SessionModel, chat: ChatModel, r: NeutralInputRequest): void {
  const req: Json = { id: r.id };
  if (r.message !== undefined) req.message = r.message;
  if (r.url !== undefined) req.url = r.url;
  if (r.questions)
    req.questions = r.questions.map((q) => {
      const out: Json = { id: q.id, kind: mapQuestionKind(q.kind), message: q.message };
      if (q.title !== undefined) out.title = q.title;
      if (q.required !== undefined) out.required = q.required;
      if (q.options) out.options = q.options;
      if (q.allowFreeform !== undefined) out.allowFreeformInput = q.allowFreeform;
      return out;
    });
  // AHP: a replaced request keeps its in-progress answers (chat/inputAnswerChanged, chat-drafts.ts).
  const drafted = chat.inputs.get(r.id)?.answers;
  if (drafted !== undefined) req.answers = drafted;
  st.publish(chat.uri, { type: "chat/inputRequested", request: req });
  if (r.turnId) chat.inputTurns.set(r.id, r.turnId);
  st.publish(s.uri, { type: "session/inputNeededSet", request: { id: `input:${chat.uri}:${r.id}`, chat: chat.uri, kind: "chatInput", request: req } });
}
function resolveInput(st: HostState, s: SessionModel, chat: ChatModel, requestId: string, response: string, answers: Json | undefined, origin: Origin | undefined): void {
  const act: Json = { type: "chat/inputCompleted", requestId, response };
  if (answers) act.answers = answers;
  st.publish(chat.uri, act, origin);
  const key = `input:${chat.uri}:${requestId}`;
  if (s.inputNeeded.has(key)) st.publish(s.uri, { type: "session/inputNeededRemoved", id: key });
}

function mapQuestionKind(k: string): string {
  const m: Record<string, string> = {
    single_select: "single-select",
    multi_select: "multi-select",
    text: "text",
    number: "number",
    integer: "integer",
    boolean: "boolean",
  };
  return m[k] ?? k.replace(/_/g, "-");
}
