/**
 * Turn reconciliation across backend generations, and the handled-input receipt. Contracts:
 *  - `runtimeIdle` replacement: when a *different* native-Pi `instanceId` registers a session with
 *    `runtimeIdle: true`, only an exact empty active turn (no response part) of the primary chat
 *    ends as `backend_admission_indeterminate`, recording both instance identities; queued and
 *    uncertain inputs are kept and nothing is replayed. Same-instance reconnects, nonempty turns,
 *    other providers and replacements reporting active work are untouched;
 *  - `command_handled` (v2+): accepted only from the current exact backend instance and session
 *    for a retained prompt command-to-turn identity; it ends only that empty active turn as
 *    `backend_input_handled`. The identity is one-shot, retired by `agent_started` of its turn and
 *    by the turn's end, and dies with the registration;
 *  - a new managed (v10) incarnation marks active managed turns output-discontinuous and asks the
 *    connector to re-observe each (`observe_invocation`, read-only); so does the first registration
 *    after a host restart for the managed turns the host restored (turn-checkpoint.ts);
 *  - a restored (host-restart) turn that is not managed is output-discontinuous too: its native
 *    `settled` ends it with `source_observation_gap` (received parts kept) instead of success, and a
 *    different instance registering with `runtimeIdle: true` (it runs nothing, so the turn can never
 *    settle) ends it the same way at once. Nothing is resent. Before it ends, the text the backend's own
 *    ended record of that turn holds (its `hello.history` turn with the same ID: Berth's runtime's durable
 *    partial answer of a crash-cut turn) is published where it extends the restored (checkpointed) text,
 *    so the turn keeps what the runtime received rather than only the host's last checkpoint.
 */
import type { HistoryTurn } from "./backend-schema.js";
import { clip } from "./inbound.js";
import { isManagedRoute, markDiscontinuous, managedNativeEvent, peekLedger, reportGap, type ManagedRecord } from "./managed-invocations.js";
import { chatErrorAction, durationSince, type ChatModel, type Json, type SessionModel, type SessionRoute } from "./model.js";
import { extendLiveFromRecord } from "./source-events.js";
import type { HostState } from "./state.js";

interface PromptIdentity {
  chat: string;
  turnId: string;
  instanceId: string;
}
const promptTurns = new WeakMap<SessionModel, Map<string, PromptIdentity>>();

/** Retain the identity of a `prompt` command that started `turnId` (for `command_handled`). */
export function retainPrompt(s: SessionModel, commandId: string, chat: string, turnId: string): void {
  const route = s.route;
  if (!route || route.version < 2) return;
  let m = promptTurns.get(s);
  if (!m) promptTurns.set(s, (m = new Map<string, PromptIdentity>()));
  // Identities of turns that ended without agent_started/settled (cancelled or refused by the host) go now.
  for (const [id, p] of m) if (s.chats.get(p.chat)?.activeTurn?.id !== p.turnId) m.delete(id);
  m.set(commandId, { chat, turnId, instanceId: route.instanceId });
}

function retireTurn(s: SessionModel, chat: string, turnId: string): void {
  const m = promptTurns.get(s);
  if (!m) return;
  for (const [id, p] of m) if (p.chat === chat && p.turnId === turnId) m.delete(id);
}

/** Native events before ordinary reduction; true when the event was fully handled here. */
export function beforeNativeEvent(st: HostState, s: SessionModel, chat: ChatModel, type: string): boolean {
  const t = chat.activeTurn;
  if (t && (type === "agent_started" || type === "settled")) retireTurn(s, chat.uri, t.id);
  if (managedNativeEvent(st, s, chat, type)) return true;
  if (t?.restored === true && type === "settled") {
    reportGap(st, s, chat); // settlement after a host restart: the output is incomplete, not a success
    return true;
  }
  return false;
}

/** Sessions registered since this host started (the first registration re-observes restored managed turns). */
const registeredHere = new WeakSet<SessionModel>();

/** The `command_handled` frame; returns an error message for a refused receipt, or null. */
export function commandHandled(st: HostState, route: SessionRoute, s: SessionModel, f: Json): string | null {
  if (route.version < 2) return "command_handled requires protocol version 2";
  const commandId = f.commandId;
  if (typeof commandId !== "string" || commandId.length === 0 || commandId.length > 512) return "command_handled needs a commandId";
  if (f.backendInstanceId !== route.instanceId) return "command_handled names a backend instance that is not current";
  const reason = typeof f.reason === "string" ? f.reason.slice(0, 256) : undefined;
  const m = promptTurns.get(s);
  const p = m?.get(commandId);
  if (!m || !p || p.instanceId !== route.instanceId) return `no retained prompt identity for command ${clip(commandId)}`;
  const chat = st.chatIndex.get(p.chat);
  const t = chat?.activeTurn;
  if (!chat || !t || t.id !== p.turnId || t.responseParts.length > 0) {
    m.delete(commandId);
    return "the command's turn is no longer an empty active turn";
  }
  m.delete(commandId);
  const message = `The runtime handled this message without starting a reply${reason ? ` (${reason})` : ""}.`;
  st.publish(chat.uri, chatErrorAction(t.id, durationSince(t), "backend_input_handled", message));
  st.summaryChanged(s);
  return null;
}

/**
 * Called when `route` has just become the session's route (after fencing the previous one).
 * `prevInstanceId` is the backend instance that registered the session before, if any.
 */
export function onRegistered(st: HostState, s: SessionModel, route: SessionRoute, hello: { provider: string; runtimeIdle?: boolean | undefined; history?: HistoryTurn[] | undefined }, prevInstanceId: string | undefined): void {
  promptTurns.delete(s); // receipt identities die with the registration
  const newIncarnation = prevInstanceId !== undefined && prevInstanceId !== route.instanceId;
  if (newIncarnation && hello.runtimeIdle === true && hello.provider === "pi") {
    const chat = st.chatIndex.get(s.primaryChat);
    const t = chat?.activeTurn;
    if (chat && t && t.responseParts.length === 0) {
      const act = chatErrorAction(t.id, durationSince(t), "backend_admission_indeterminate", "The runtime restarted before this message was admitted; it may or may not have been received, and it was not resent.");
      const meta = { "paratenic.previousInstanceId": prevInstanceId, "paratenic.instanceId": route.instanceId };
      (act.error as Json)._meta = meta;
      ((act.part as Json).error as Json)._meta = { ...meta };
      st.publish(chat.uri, act);
      st.summaryChanged(s);
    }
  }
  const discontinuous: ManagedRecord[] = newIncarnation ? markDiscontinuous(st, s) : [];
  if (!registeredHere.has(s)) {
    registeredHere.add(s);
    // Restored managed turns were marked discontinuous at restore: this first route re-observes them.
    for (const rec of peekLedger(s)?.records.values() ?? [])
      if (rec.discontinuous && rec.turnId !== undefined && st.chatIndex.get(rec.chat)?.activeTurn?.id === rec.turnId && !discontinuous.includes(rec)) discontinuous.push(rec);
  }
  if (newIncarnation && hello.runtimeIdle === true) {
    // A restored unmanaged turn the new, idle incarnation cannot be running: it ends with the gap now.
    const ledger = peekLedger(s);
    for (const chat of s.chats.values()) {
      const t = chat.activeTurn;
      if (t?.restored !== true || ledger?.byTurn.has(t.id)) continue;
      // The backend's own ended record of this turn (registration history: the primary chat's) holds what the
      // runtime received: its text past the host's last checkpoint is published before the turn ends.
      const record = chat.uri === s.primaryChat ? hello.history?.find((h) => h.id === t.id) : undefined;
      if (record !== undefined) extendLiveFromRecord(st, chat, record);
      reportGap(st, s, chat);
    }
  }
  if (isManagedRoute(route)) {
    for (const rec of discontinuous) {
      const frame: Json = { type: "command", backendInstanceId: route.instanceId, session: s.uri, chat: rec.chat, command: { type: "observe_invocation", turnId: rec.turnId, invocationCommandId: rec.commandId } };
      st.sendCommand(route, frame, (o) => {
        if (o.kind !== "accepted") st.log(`observe_invocation for ${s.uri} was not accepted (${o.kind})`);
      });
    }
  }
  s.lastInstanceId = route.instanceId;
}
