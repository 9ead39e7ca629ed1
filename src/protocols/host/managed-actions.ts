/**
 * Client actions on a managed (v10) route and the managed commands they map to. Contracts:
 *  - `chat/turnStarted` is reduced at once and sent as `managed_prompt {text, turnId}`; a refusal
 *    ends the turn (`backend_rejected`), an indeterminate outcome keeps it open for the
 *    connector's outcome and observation cut (never replayed);
 *  - a queued `chat/pendingMessageSet` is sent as `managed_follow_up` with an immutable pending
 *    version (original command UUID, pending ID, chat, client origin/sequence); re-setting the
 *    same ID is a new version, and the queue shows the newest accepted version;
 *  - `chat/turnCancelled` is sent as `abort_invocation` with the original turn and binding, never
 *    as raw `abort`; acceptance publishes the non-reducing `paratenic/invocationStopRequested`
 *    receipt with the client's origin, and the native settlement still ends the turn;
 *  - admission stops at MAX_UNRESOLVED_MANAGED unresolved records per session.
 */
import { randomUUID } from "node:crypto";
import { MAX_UNRESOLVED_MANAGED } from "./managed-schema.js";
import { addRecord, dropRecord, ledgerOf, saveLedger, unresolvedCount, versionKey, type ManagedRecord } from "./managed-invocations.js";
import { chatErrorAction, durationSince, type ChatModel, type CommandOutcome, type Json, type Origin, type SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { recordReceipt, settleReceipt } from "./managed-receipts.js";
import { hostRefused, refusal } from "./commands.js";

let seq = 0;
const versionSeq = new WeakMap<ManagedRecord, number>();

/** The refusal text when a session cannot admit another managed invocation, or null. */
export function managedAdmission(s: SessionModel): string | null {
  return unresolvedCount(s) >= MAX_UNRESOLVED_MANAGED ? `too many unresolved managed invocations (${MAX_UNRESOLVED_MANAGED}); wait for earlier ones to finish` : null;
}

function send(st: HostState, s: SessionModel, chat: string, command: Json, commandId: string, onOutcome: (o: CommandOutcome) => void): void {
  const route = s.route!;
  st.sendCommand(route, { type: "command", backendInstanceId: route.instanceId, session: s.uri, chat, command }, onOutcome, commandId);
}

/** `managed_prompt` for a turn the caller has already reduced. */
export function managedPrompt(st: HostState, s: SessionModel, chat: ChatModel, text: string, turnId: string, origin: Origin): void {
  const commandId = randomUUID();
  const rec: ManagedRecord = { kind: "prompt", commandId, chat: chat.uri, turnId, origin, retired: false, bound: false, discontinuous: false };
  addRecord(st, s, rec);
  const receipt = recordReceipt(st, chat.uri, origin, { type: "chat/turnStarted", turnId }, rec);
  send(st, s, chat.uri, { type: "managed_prompt", text, turnId }, commandId, (o) => {
    settleReceipt(receipt, o);
    if (o.kind !== "rejected") return; // indeterminate: the connector's outcome and cut decide, nothing is resent
    dropRecord(st, s, rec);
    const cur = st.chatIndex.get(chat.uri);
    if (!cur?.activeTurn || cur.activeTurn.id !== turnId) return;
    settleReceipt(receipt, o, st.publish(chat.uri, chatErrorAction(turnId, durationSince(cur.activeTurn), "backend_rejected", o.notSent ? hostRefused(o.error) : o.error)).serverSeq);
    st.summaryChanged(s);
  });
}

/** `managed_follow_up`: a new immutable version of queued message `id`. */
export function managedFollowUp(st: HostState, s: SessionModel, chat: ChatModel, id: string, text: string, origin: Origin, reject: (r: string) => void): void {
  const refused = managedAdmission(s);
  if (refused) return reject(refused);
  const commandId = randomUUID();
  const rec: ManagedRecord = { kind: "follow_up", commandId, chat: chat.uri, pendingId: id, origin, retired: false, bound: false, discontinuous: false };
  versionSeq.set(rec, ++seq);
  addRecord(st, s, rec);
  const receipt = recordReceipt(st, chat.uri, origin, { type: "chat/pendingMessageSet", kind: "queued", id }, rec);
  const version = { commandId, pendingId: id, chat: chat.uri, clientId: origin.clientId, clientSeq: origin.clientSeq };
  send(st, s, chat.uri, { type: "managed_follow_up", text, id, version }, commandId, (o) => {
    settleReceipt(receipt, o);
    if (o.kind !== "accepted") {
      // This version's NACK touches only this version: a newer same-ID item stays.
      if (o.kind === "rejected") dropRecord(st, s, rec);
      return reject(refusal(o));
    }
    if (!st.chatIndex.has(chat.uri)) return;
    const l = ledgerOf(s);
    const key = versionKey(chat.uri, id);
    const current = l.versions.get(key);
    const cur = current !== undefined ? l.records.get(current) : undefined;
    if (cur && (versionSeq.get(cur) ?? 0) > (versionSeq.get(rec) ?? 0)) return reject("a newer version of this queued message was accepted");
    l.versions.set(key, commandId);
    saveLedger(st, s);
    settleReceipt(receipt, o, st.publish(chat.uri, { type: "chat/pendingMessageSet", kind: "queued", id, message: { text, origin: { kind: "user" } } }, origin).serverSeq);
  });
}

/** Scoped Stop: `abort_invocation` for the managed turn, answered by a non-reducing receipt. */
export function managedStop(st: HostState, s: SessionModel, chat: ChatModel, turnId: string, origin: Origin, reject: (r: string) => void): void {
  const rec = ledgerOf(s).byTurn.get(turnId);
  if (!rec || rec.chat !== chat.uri) return reject("no managed invocation owns this turn (scoped Stop never falls back to abort)");
  const command: Json = { type: "abort_invocation", turnId, invocationCommandId: rec.commandId };
  if (rec.binding) command.binding = rec.binding;
  const receipt = recordReceipt(st, chat.uri, origin, { type: "chat/turnCancelled", turnId }, rec);
  send(st, s, chat.uri, command, randomUUID(), (o) => {
    settleReceipt(receipt, o);
    if (o.kind !== "accepted") return reject(refusal(o));
    if (!st.chatIndex.has(chat.uri)) return;
    settleReceipt(receipt, o, st.publish(chat.uri, { type: "paratenic/invocationStopRequested", turnId }, origin).serverSeq);
  });
}
