/**
 * Client-dispatched chat state shared between clients: `chat/draftChanged`,
 * `chat/inputAnswerChanged` and `chat/queuedMessagesReordered` (AHP chat actions). Contracts:
 *  - `chat/draftChanged {draft?}`: a user `Message` (encoded at most MAX_DRAFT_BYTES) or absent
 *    to clear. Host-owned (no backend frame carries drafts): reduced into `ChatState.draft`,
 *    echoed at once and persisted with the chat, coalesced like active-turn checkpoints;
 *  - `chat/inputAnswerChanged {requestId, questionId, answer?}`: the request must be pending in
 *    this chat and, when it lists questions, name one of them; `answer` (an official
 *    `ChatInputAnswer`, encoded at most MAX_ANSWER_BYTES) replaces that question's in-progress
 *    answer, absent removes it. When the backend advertised `inputCapabilities.drafts` at v6 or
 *    later it is sent as `apply_resource_action` and echoed once accepted; otherwise it is
 *    host-owned and echoed at once. The session's `inputNeeded` entry for the request follows
 *    with `session/inputNeededSet` (the same request, new answers);
 *  - `chat/queuedMessagesReordered {order}`: `order` must name exactly the chat's queued message
 *    IDs, each once. The runtime owns delivery order, so it is sent as `apply_resource_action`
 *    (backend protocol 6 or later) and reduced and echoed only after the backend accepts.
 */
import { z } from "zod";
import { Message } from "./ahp-message.js";
import { forwardResourceAction } from "./ahp-requests.js";
import type { ChatModel, Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { NOT_CONNECTED_REFUSAL } from "./commands.js";

/** The largest draft, as encoded JSON bytes of its `Message`. */
export const MAX_DRAFT_BYTES = 256 * 1024;
/** The largest in-progress answer to one question, as encoded JSON bytes. */
export const MAX_ANSWER_BYTES = 64 * 1024;
/** The most queued-message IDs a reorder may name. */
const MAX_ORDER = 1024;
const MIN_VERSION = 6;

const id = z.string().min(1).max(512);
const freeform = z.array(z.string()).max(64).optional();
/** AHP `ChatInputAnswerValue` (one per question kind). */
const AnswerValue = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("text"), value: z.string() }).strict(),
  z.object({ kind: z.literal("number"), value: z.number() }).strict(),
  z.object({ kind: z.literal("boolean"), value: z.boolean() }).strict(),
  z.object({ kind: z.literal("selected"), value: z.string(), freeformValues: freeform }).strict(),
  z.object({ kind: z.literal("selected-many"), value: z.array(z.string()).max(1024), freeformValues: freeform }).strict(),
]);
/** AHP `ChatInputAnswer`: draft or submitted with a value, or skipped. */
export const ChatInputAnswer = z.union([
  z.object({ state: z.enum(["draft", "submitted"]), value: AnswerValue }).strict(),
  z.object({ state: z.literal("skipped"), freeformValues: freeform }).strict(),
]);
const DraftChanged = z.object({ type: z.literal("chat/draftChanged"), draft: Message.optional() }).strict();
const InputAnswerChanged = z.object({ type: z.literal("chat/inputAnswerChanged"), requestId: id, questionId: id, answer: ChatInputAnswer.optional() }).strict();
const QueuedReordered = z.object({ type: z.literal("chat/queuedMessagesReordered"), order: z.array(id).max(MAX_ORDER) }).strict();

export const CHAT_DRAFT_ACTIONS: ReadonlySet<string> = new Set(["chat/draftChanged", "chat/inputAnswerChanged", "chat/queuedMessagesReordered"]);

const bytes = (v: unknown): number => Buffer.byteLength(JSON.stringify(v));

/** A client `dispatchAction` of one of the three actions on chat `chat` of session `s`. */
export function chatDraftAction(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  switch (action.type) {
    case "chat/draftChanged": {
      const p = DraftChanged.safeParse(action);
      if (!p.success) return reject("chat/draftChanged needs draft: a Message ({text, origin}) or nothing to clear it");
      if (p.data.draft && p.data.draft.origin.kind !== "user") return reject("clients may only draft user messages");
      if (p.data.draft && bytes(p.data.draft) > MAX_DRAFT_BYTES) return reject(`chat/draftChanged: the draft exceeds ${MAX_DRAFT_BYTES} bytes encoded`);
      st.publish(chat.uri, p.data, origin);
      return;
    }
    case "chat/inputAnswerChanged":
      return inputAnswerChanged(st, s, chat, action, origin, reject);
    case "chat/queuedMessagesReordered":
      return queuedReordered(st, s, chat, action, origin, reject);
  }
}

function inputAnswerChanged(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const p = InputAnswerChanged.safeParse(action);
  if (!p.success) return reject("chat/inputAnswerChanged needs requestId, questionId and an optional ChatInputAnswer ({state, value} or {state: \"skipped\"})");
  const a = p.data;
  const why = answerProblem(chat, a);
  if (why) return reject(why);
  if (a.answer !== undefined && bytes(a.answer) > MAX_ANSWER_BYTES) return reject(`chat/inputAnswerChanged: the answer exceeds ${MAX_ANSWER_BYTES} bytes encoded`);
  const route = s.route;
  if (!route || route.version < MIN_VERSION || route.inputDrafts !== true) return publishAnswer(st, s, chat, a, origin);
  forwardResourceAction(st, s, chat.uri, a, reject, () => {
    const now = st.chatIndex.get(chat.uri) === chat ? answerProblem(chat, a) : "the chat is gone";
    if (now) return reject(now);
    publishAnswer(st, s, chat, a, origin);
  });
}

/** Why answer `a` does not apply to the chat's pending requests now; null when it does. */
function answerProblem(chat: ChatModel, a: { requestId: string; questionId: string }): string | null {
  const req = chat.inputs.get(a.requestId);
  if (!req) return "chat/inputAnswerChanged: no such pending input request in this chat";
  const questions = req.questions as Json[] | undefined;
  if (Array.isArray(questions) && questions.length > 0 && !questions.some((q) => q.id === a.questionId))
    return "chat/inputAnswerChanged: questionId names no question of that request";
  return null;
}

function publishAnswer(st: HostState, s: SessionModel, chat: ChatModel, a: Json, origin: Origin): void {
  st.publish(chat.uri, a, origin);
  // The session's mirror of the request carries the same answers (AHP SessionChatInputRequest).
  for (const [key, entry] of s.inputNeeded) {
    const r = entry.request as Json | undefined;
    if (entry.chat !== chat.uri || entry.kind !== "chatInput" || r?.id !== a.requestId) continue;
    const request = chat.inputs.get(a.requestId as string);
    if (request) st.publish(s.uri, { type: "session/inputNeededSet", request: { ...entry, id: key, request: structuredClone(request) } });
  }
}

function queuedReordered(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const p = QueuedReordered.safeParse(action);
  if (!p.success) return reject("chat/queuedMessagesReordered needs order: the queued message IDs");
  const a = p.data;
  const why = orderProblem(chat, a.order);
  if (why) return reject(why);
  if (!s.route) return reject(NOT_CONNECTED_REFUSAL);
  if (s.route.version < MIN_VERSION) return reject("the session's backend does not accept resource actions (needs backend protocol 6)");
  forwardResourceAction(st, s, chat.uri, a, reject, () => {
    const now = st.chatIndex.get(chat.uri) === chat ? orderProblem(chat, a.order) : "the chat is gone";
    if (now) return reject(`the queued messages changed meanwhile: ${now}`);
    st.publish(chat.uri, a, origin);
  });
}

/** Why `order` is not exactly the chat's queued IDs, each once; null when it is. */
function orderProblem(chat: ChatModel, order: string[]): string | null {
  const have = new Set(chat.queuedMessages.map((m) => m.id));
  const named = new Set(order);
  if (named.size !== order.length || order.length !== have.size || order.some((x) => !have.has(x)))
    return `chat/queuedMessagesReordered: order must name exactly the queued message IDs, each once (${have.size} queued now)`;
  return null;
}

/** Reducer for the three actions (upstream chat reducer semantics; modifiedAt unchanged). */
export function reduceChatDraft(st: HostState, c: ChatModel, type: string, a: Json): void {
  if (type === "chat/draftChanged") {
    if (a.draft === undefined) delete c.draft;
    else c.draft = a.draft as Json;
    // Coalesced like active-turn checkpoints (at most about once a second; all at a clean stop): a typing client cannot multiply disk writes.
    st.checkpoints.touch(c, false);
  } else if (type === "chat/inputAnswerChanged") {
    const req = c.inputs.get(a.requestId as string);
    if (!req) return;
    const answers: Json = { ...((req.answers as Json | undefined) ?? {}) };
    if (a.answer === undefined) delete answers[a.questionId as string];
    else answers[a.questionId as string] = a.answer;
    const next: Json = { ...req };
    if (Object.keys(answers).length > 0) next.answers = answers;
    else delete next.answers;
    c.inputs.set(a.requestId as string, next);
    // The open part of the active turn holds the request too.
    for (const p of c.activeTurn?.responseParts ?? []) if (p.kind === "inputRequest" && p.response === undefined && (p.request as Json).id === a.requestId) p.request = next;
  } else if (type === "chat/queuedMessagesReordered") {
    const byId = new Map(c.queuedMessages.map((m) => [m.id, m]));
    const order = (a.order as string[]).filter((x) => byId.has(x));
    const rest = c.queuedMessages.filter((m) => !order.includes(m.id)); // upstream: unnamed ones keep their order at the end
    c.queuedMessages = [...order.map((x) => byId.get(x)!), ...rest];
    st.persistChat(c);
  }
}
