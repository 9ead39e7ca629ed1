/**
 * Client `chat/pendingMessageSet` (AHP pending messages, kinds `steering` and `queued`). Contracts:
 *  - steering → `steer`, queued → `follow_up` (on a managed route `managed_follow_up`, managed-actions.ts), both
 *    with the AHP pending-message `id`; the runtime owns delivery, and the host removes the pending message when
 *    the runtime's `user_message` reports consuming it;
 *  - a pending message ID names one message of its chat: an ID the chat consumed or removed (`retiredPending`,
 *    the newest RETIRED_PENDING_LIMIT, persisted with the chat) is refused naming why and the fix, so a message
 *    resent after a dropped connection never runs twice;
 *  - a resend of an ID still pending (or still on its way to the backend), with the same text, is idempotent:
 *    it gets the original's outcome, echoed with its own origin, and nothing is sent again. Other text under a
 *    pending ID is a new version on a managed route; elsewhere it is refused (`steer`/`follow_up` cannot
 *    replace what the runtime was given).
 */
import { clip } from "./inbound.js";
import { isManagedRoute } from "./managed-invocations.js";
import { managedFollowUp } from "./managed-actions.js";
import { Message } from "./ahp-message.js";
import { refusal, routeCommand } from "./ahp-requests.js";
import type { ChatModel, Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { NOT_CONNECTED_REFUSAL } from "./commands.js";

const MAX_PENDING_ID = 512;

type Kind = "steering" | "queued";
/** A `steer`/`follow_up` the backend has not answered yet, and the resends that wait for its answer. */
interface InFlight {
  kind: Kind;
  text: string;
  waiters: Array<{ origin: Origin; action: Json }>;
}
const inFlight = new WeakMap<ChatModel, Map<string, InFlight>>();

/** The message pending under `id` in this chat, with its kind. */
function pendingOf(chat: ChatModel, id: string): { kind: Kind; text: unknown } | undefined {
  if (chat.steeringMessage?.id === id) return { kind: "steering", text: chat.steeringMessage.message.text };
  const q = chat.queuedMessages.find((m) => m.id === id);
  return q ? { kind: "queued", text: q.message.text } : undefined;
}

export function pendingMessageSet(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const kind = action.kind;
  const id = action.id;
  if (kind !== "steering" && kind !== "queued") return reject("kind must be steering or queued");
  if (typeof id !== "string" || id.length === 0 || id.length > MAX_PENDING_ID) return reject("invalid pending message id");
  const m = Message.safeParse(action.message);
  if (!m.success) return reject("invalid message");
  if (m.data.origin.kind !== "user") return reject("clients may only send user messages");
  if (chat.interactivity === "read-only") return reject("chat is read-only");
  const text = m.data.text;
  const channel = chat.uri;
  const echo = (o: Origin) => st.publish(channel, { type: "chat/pendingMessageSet", kind, id, message: { text, origin: { kind: "user" } } }, o);
  const pending = pendingOf(chat, id);
  const flying = inFlight.get(chat)?.get(id);
  if (pending && pending.kind !== kind) return reject(`pending message ${clip(id)} is already pending as a ${pending.kind} message; send a new id for a new message`);
  if (!pending && !flying && chat.retiredPending?.has(id))
    return reject(`pending message ${clip(id)} was already consumed or removed in this chat (a resent message is not run twice); send a new id for a new message`);
  if (kind === "queued" && isManagedRoute(s.route)) return managedFollowUp(st, s, chat, id, text, origin, reject);
  if (flying) {
    if (flying.kind !== kind || flying.text !== text) return reject(`pending message ${clip(id)} is still on its way to the backend with other content; send a new id for a new message`);
    flying.waiters.push({ origin, action });
    return;
  }
  if (pending) {
    if (pending.text !== text) return reject(`pending message ${clip(id)} is already pending with other text, and this backend cannot replace it; send a new id for a new message`);
    echo(origin); // the resend of a message the backend has: the same state, nothing sent again
    return;
  }
  if (!s.route) return reject(NOT_CONNECTED_REFUSAL);
  let table = inFlight.get(chat);
  if (!table) inFlight.set(chat, (table = new Map<string, InFlight>()));
  const entry: InFlight = { kind, text, waiters: [] };
  table.set(id, entry);
  void routeCommand(st, s, channel, { type: kind === "steering" ? "steer" : "follow_up", text, id }, (o) => {
    if (table.get(id) === entry) table.delete(id);
    if (o.kind !== "accepted") {
      const reason = refusal(o);
      reject(reason);
      for (const w of entry.waiters) st.publish(channel, w.action, w.origin, reason);
      return;
    }
    if (!st.chatIndex.has(channel)) return;
    echo(origin);
    for (const w of entry.waiters) echo(w.origin);
  });
}
