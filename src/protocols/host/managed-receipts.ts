/**
 * `paratenic/dispatchOutcome` for managed (v10) dispatches (spec "Managed invocation extension":
 * "Existing dispatch receipts expose terminal removal or rejection; receipt lookups may enqueue a
 * coalesced original-ticket GET, never a wake POST"). Contracts:
 *  - every client action sent as a managed command (`chat/turnStarted` → `managed_prompt`, a queued
 *    `chat/pendingMessageSet` → `managed_follow_up`, `chat/turnCancelled` → `abort_invocation`) leaves a
 *    receipt keyed by the client's `clientId`/`clientSeq` on the chat channel: the command's outcome
 *    (`pending`, `accepted`, `rejected`, `indeterminate`), the published envelope's `serverSeq`, and
 *    `invocation {commandId, resolved, outcome?}`: `resolved` once the invocation left the ledger (its
 *    terminal outcome is known and its turn ended or its queued item left), `outcome` the connector's;
 *  - a lookup of an accepted or indeterminate, unresolved invocation asks the current managed route to
 *    re-observe it (`observe_invocation`, read-only), at most one in flight per invocation; it never
 *    sends `managed_prompt`/`managed_follow_up` again;
 *  - receipts live in memory (the newest OUTCOME_HISTORY); after a restart an invocation still in the
 *    checkpointed ledger answers from it (`indeterminate` until a native binding or outcome proves
 *    acceptance).
 */
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { isManagedRoute, peekLedger, type ManagedRecord } from "./managed-invocations.js";
import type { CommandOutcome, Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";

/** Receipts kept per host (oldest settled dropped first). */
export const RECEIPT_HISTORY = 4096;

type Outcome = "pending" | "accepted" | "rejected" | "indeterminate";
export interface Receipt {
  chat: string;
  action: Json;
  rec: ManagedRecord;
  outcome: Outcome;
  serverSeq?: number;
}

const receipts = new WeakMap<HostState, Map<string, Receipt>>();
const observing = new WeakSet<ManagedRecord>();

function table(st: HostState): Map<string, Receipt> {
  let m = receipts.get(st);
  if (!m) receipts.set(st, (m = new Map<string, Receipt>()));
  return m;
}
const keyOf = (clientId: string, clientSeq: number) => `${clientId}\0${clientSeq}`;

/** A managed dispatch was sent for the client's action. */
export function recordReceipt(st: HostState, chat: string, origin: Origin, action: Json, rec: ManagedRecord): Receipt {
  const m = table(st);
  const r: Receipt = { chat, action, rec, outcome: "pending" };
  m.set(keyOf(origin.clientId, origin.clientSeq), r);
  if (m.size > RECEIPT_HISTORY)
    for (const [k, v] of m) {
      if (m.size <= RECEIPT_HISTORY) break;
      if (v.outcome !== "pending") m.delete(k);
    }
  return r;
}

/** The command's outcome (and the envelope published for it, if any). */
export function settleReceipt(r: Receipt, o: CommandOutcome, serverSeq?: number): void {
  r.outcome = o.kind;
  if (serverSeq !== undefined) r.serverSeq = serverSeq;
}

const Params = z.object({ channel: z.string(), clientSeq: z.number().int(), clientId: z.string().max(512).optional() });

/** The receipt of a managed dispatch, or undefined when the lookup is not one (the caller tries other dispatch kinds). */
export function managedReceipt(st: HostState, callerId: string, params: Json): Json | undefined {
  const p = Params.safeParse(params);
  if (!p.success) return undefined;
  const clientId = p.data.clientId ?? callerId;
  const chat = st.chatIndex.get(p.data.channel);
  if (!chat) return undefined;
  const s = st.sessions.get(chat.sessionUri);
  if (!s) return undefined;
  let r = table(st).get(keyOf(clientId, p.data.clientSeq));
  if (r && r.chat !== chat.uri) r = undefined;
  r ??= fromLedger(s, chat.uri, clientId, p.data.clientSeq);
  if (!r) return undefined;
  const ledger = peekLedger(s);
  const resolved = r.outcome === "accepted" && ledger?.records.get(r.rec.commandId) !== r.rec;
  const invocation: Json = { commandId: r.rec.commandId, resolved };
  if (r.rec.outcome) invocation.outcome = r.rec.outcome.outcome;
  const out: Json = { outcome: r.outcome, action: r.action, invocation };
  if (r.serverSeq !== undefined) out.serverSeq = r.serverSeq;
  if ((r.outcome === "accepted" || r.outcome === "indeterminate") && !resolved) observe(st, s, r.rec);
  return out;
}

/** After a restart: an invocation still in the checkpointed ledger, found by its client origin. */
function fromLedger(s: SessionModel, chat: string, clientId: string, clientSeq: number): Receipt | undefined {
  const l = peekLedger(s);
  if (!l) return undefined;
  for (const rec of l.records.values()) {
    if (rec.chat !== chat || rec.origin.clientId !== clientId || rec.origin.clientSeq !== clientSeq) continue;
    const action: Json = rec.kind === "prompt" ? { type: "chat/turnStarted", turnId: rec.turnId } : { type: "chat/pendingMessageSet", kind: "queued", id: rec.pendingId };
    return { chat, action, rec, outcome: rec.bound || rec.outcome !== undefined ? "accepted" : "indeterminate" };
  }
  return undefined;
}

/** A coalesced, read-only re-observation of the original invocation (never a new managed command). */
function observe(st: HostState, s: SessionModel, rec: ManagedRecord): void {
  const route = s.route;
  if (!isManagedRoute(route) || observing.has(rec) || !route) return;
  if (rec.outcome !== undefined && rec.outcome.outcome !== "unknown") return; // the terminal outcome is known
  const command: Json = { type: "observe_invocation", invocationCommandId: rec.commandId };
  if (rec.turnId !== undefined) command.turnId = rec.turnId;
  else if (rec.pendingId !== undefined) command.pendingId = rec.pendingId;
  observing.add(rec);
  st.sendCommand(route, { type: "command", backendInstanceId: route.instanceId, session: s.uri, chat: rec.chat, command }, () => observing.delete(rec), randomUUID());
}
