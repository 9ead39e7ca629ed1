/**
 * Backend protocol v10 managed invocations: the per-session ledger of managed commands and the
 * reduction of the connector's `invocation_*` events. Contracts (spec "Managed invocation
 * extension" and "Managed transcript continuity"):
 *  - a managed command's correlation outlives its `command_result`: the record stays until its
 *    terminal outcome is known and its turn has ended; at most MAX_UNRESOLVED_MANAGED records per
 *    session, admission past that is refused (records are never silently evicted);
 *  - a precreated turn the runtime handled without any user/model event settles only after both
 *    its terminal `invocation_outcome` and its ordered `invocation_boundary` retirement; only
 *    `succeeded` with `delivery.state = "delivered"` projects completed; an outcome never adds
 *    text or a turn, and an unknown outcome stays visible without replaying the input;
 *  - a follow-up's pending version is the command that carried it: only the unchanged version is
 *    retired, never an edited or replaced item with the same pending ID;
 *  - after a new backend incarnation an active managed turn is output-discontinuous: it ends with
 *    `source_observation_gap` (received parts kept) on a terminal outcome plus a fresh cut where
 *    its span is no longer active (a turn with no observed binding also needs `sourceIdle: true`),
 *    and a native `settled` after the discontinuity reports the same gap instead of success.
 */
import { randomUUID } from "node:crypto";
import { clip } from "./inbound.js";
import { ManagedEvent, OBSERVATION_GAP_MESSAGE, type InvocationObservationCut, type InvocationOutcome } from "./managed-schema.js";
import { zodMessage } from "./backend-schema.js";
import { chatErrorAction, durationSince, type ChatModel, type Json, type Origin, type SessionModel, type SessionRoute } from "./model.js";
import type { HostState } from "./state.js";

export interface ManagedRecord {
  kind: "prompt" | "follow_up";
  commandId: string;
  chat: string;
  /** prompt: the precreated turn; follow-up: the turn its user boundary started. */
  turnId?: string;
  /** follow-up: the AHP pending-message ID this version carried. */
  pendingId?: string;
  origin: Origin;
  outcome?: InvocationOutcome;
  retired: boolean;
  /** A native binding was observed (a boundary, the user message, or turn output). */
  bound: boolean;
  discontinuous: boolean;
  binding?: Json;
}

export interface Ledger {
  records: Map<string, ManagedRecord>;
  byTurn: Map<string, ManagedRecord>;
  /** chat + "\0" + pendingId -> the commandId of the current (newest accepted) version. */
  versions: Map<string, string>;
  /** The latest observation cut and the logical route that sent it (a cut is fresh only for its route). */
  cut?: { routeId: string; cut: InvocationObservationCut };
}

const ledgers = new WeakMap<SessionModel, Ledger>();

/**
 * The session's ledger. It is checkpointed with the session (`extra.managed`), so correlation
 * survives a host restart as well as backend reconnection; it is read back here on first use
 * (tolerantly: a malformed entry is skipped and logged by the caller's absence of a match).
 */
export function ledgerOf(s: SessionModel): Ledger {
  let l = ledgers.get(s);
  if (!l) {
    l = { records: new Map(), byTurn: new Map(), versions: new Map() };
    restoreLedger(s, l);
    ledgers.set(s, l);
  }
  return l;
}
export function peekLedger(s: SessionModel): Ledger | undefined {
  return ledgers.get(s) ?? (s.extra.managed !== undefined ? ledgerOf(s) : undefined);
}

function restoreLedger(s: SessionModel, l: Ledger): void {
  const saved = s.extra.managed as Json | undefined;
  if (!saved || typeof saved !== "object") return;
  if (Array.isArray(saved.records))
    for (const r of saved.records as Json[]) {
      if (!r || typeof r.commandId !== "string" || typeof r.chat !== "string" || (r.kind !== "prompt" && r.kind !== "follow_up")) continue;
      const rec: ManagedRecord = {
        kind: r.kind,
        commandId: r.commandId,
        chat: r.chat,
        origin: (r.origin as Origin | undefined) ?? { clientId: "", clientSeq: 0 },
        retired: r.retired === true,
        bound: r.bound === true,
        discontinuous: r.discontinuous === true,
      };
      if (typeof r.turnId === "string") rec.turnId = r.turnId;
      if (typeof r.pendingId === "string") rec.pendingId = r.pendingId;
      if (r.outcome && typeof r.outcome === "object") rec.outcome = r.outcome as InvocationOutcome;
      if (r.binding && typeof r.binding === "object") rec.binding = r.binding as Json;
      l.records.set(rec.commandId, rec);
      if (rec.turnId !== undefined) l.byTurn.set(rec.turnId, rec);
    }
  if (saved.versions && typeof saved.versions === "object")
    for (const [k, v] of Object.entries(saved.versions as Json)) if (typeof v === "string" && l.records.has(v)) l.versions.set(k, v);
}

/** Checkpoint the session's ledger (with the session row). */
export function saveLedger(st: HostState, s: SessionModel): void {
  const l = ledgers.get(s);
  if (!l) return;
  if (l.records.size === 0 && l.versions.size === 0) {
    if (s.extra.managed === undefined) return;
    delete s.extra.managed;
  } else s.extra.managed = { records: [...l.records.values()].map((r) => ({ ...r })), versions: Object.fromEntries(l.versions) };
  if (st.sessions.get(s.uri) === s) st.persistSession(s);
}
export const versionKey = (chat: string, pendingId: string): string => `${chat}\0${pendingId}`;

/** Whether a route negotiated the managed extension (v10+ with `chatCapabilities.managedInvocations`). */
export function isManagedRoute(r: SessionRoute | undefined): boolean {
  return r !== undefined && r.version >= 10 && r.chatCaps.managedInvocations === true;
}

export function addRecord(st: HostState, s: SessionModel, rec: ManagedRecord): void {
  const l = ledgerOf(s);
  l.records.set(rec.commandId, rec);
  if (rec.turnId !== undefined) l.byTurn.set(rec.turnId, rec);
  saveLedger(st, s);
}
export function dropRecord(st: HostState, s: SessionModel, rec: ManagedRecord): void {
  const l = ledgerOf(s);
  l.records.delete(rec.commandId);
  if (rec.turnId !== undefined && l.byTurn.get(rec.turnId) === rec) l.byTurn.delete(rec.turnId);
  if (rec.pendingId !== undefined && l.versions.get(versionKey(rec.chat, rec.pendingId)) === rec.commandId && !st.chatIndex.get(rec.chat)?.queuedMessages.some((m) => m.id === rec.pendingId))
    l.versions.delete(versionKey(rec.chat, rec.pendingId));
  saveLedger(st, s);
}

function turnActive(st: HostState, rec: ManagedRecord): ChatModel | undefined {
  const c = st.chatIndex.get(rec.chat);
  return c?.activeTurn && rec.turnId !== undefined && c.activeTurn.id === rec.turnId ? c : undefined;
}
const terminal = (o: InvocationOutcome | undefined): boolean => o !== undefined && o.outcome !== "unknown";

/** Drop a record once nothing can still depend on it: terminal outcome known and its turn (if any) ended. */
function maybePrune(st: HostState, s: SessionModel, rec: ManagedRecord): void {
  const o = rec.outcome;
  if (o === undefined || !terminal(o)) return; // an unknown outcome is not resolution: a terminal one may follow
  if (turnActive(st, rec)) return;
  if (rec.kind === "follow_up" && rec.turnId === undefined && !rec.retired && o.outcome === "succeeded") return;
  dropRecord(st, s, rec);
}

function endTurn(st: HostState, s: SessionModel, c: ChatModel, kind: "complete" | "cancelled" | "error", errorType = "", message = ""): void {
  const t = c.activeTurn!;
  const duration = durationSince(t);
  if (kind === "complete") st.publish(c.uri, { type: "chat/turnComplete", turnId: t.id, duration });
  else if (kind === "cancelled") st.publish(c.uri, { type: "chat/turnCancelled", turnId: t.id, duration });
  else st.publish(c.uri, chatErrorAction(t.id, duration, errorType, message));
  st.summaryChanged(s);
}

export function reportGap(st: HostState, s: SessionModel, c: ChatModel): void {
  endTurn(st, s, c, "error", "source_observation_gap", OBSERVATION_GAP_MESSAGE);
}

/** A precreated turn with an outcome and native retirement settles from the outcome alone. */
function trySettle(st: HostState, s: SessionModel, rec: ManagedRecord): void {
  const c = turnActive(st, rec);
  if (c && rec.outcome && rec.retired) {
    if (rec.discontinuous) reportGap(st, s, c);
    else {
      const o = rec.outcome;
      if (o.outcome === "succeeded" && o.delivery?.state === "delivered") endTurn(st, s, c, "complete");
      else if (o.outcome === "cancelled") endTurn(st, s, c, "cancelled");
      else if (o.outcome === "failed") endTurn(st, s, c, "error", "invocation_failed", o.error ?? "The runtime reported that this message failed. It was not resent.");
      else endTurn(st, s, c, "error", "invocation_outcome_unknown", "The runtime could not confirm that this message was delivered. It was not resent.");
    }
  }
  reconcileGap(st, s, rec);
  maybePrune(st, s, rec);
}

/** Continuity recovery: a discontinuous active turn ends with the gap once outcome and a fresh cut allow it. */
function reconcileGap(st: HostState, s: SessionModel, rec: ManagedRecord): void {
  const c = turnActive(st, rec);
  if (!c || !rec.discontinuous || !terminal(rec.outcome)) return;
  const l = ledgerOf(s);
  if (!l.cut || !s.route || l.cut.routeId !== s.route.logicalId) return; // no fresh cut from the current incarnation
  const cut = l.cut.cut;
  const span = cut.activeSpan ?? null;
  if (span !== null && span.commandId === rec.commandId) return; // still active: the live suffix continues
  if (!rec.bound && !(cut.sourceIdle === true && span === null)) return; // absence of a span alone is insufficient
  reportGap(st, s, c);
}

function retireVersion(st: HostState, rec: ManagedRecord): boolean {
  if (rec.pendingId === undefined) return false;
  const c = st.chatIndex.get(rec.chat);
  if (!c) return false;
  const s = st.sessions.get(c.sessionUri);
  if (!s) return false;
  const l = ledgerOf(s);
  const key = versionKey(rec.chat, rec.pendingId);
  if (l.versions.get(key) !== rec.commandId) return false; // edited or replaced: the newer version stays
  l.versions.delete(key);
  if (c.queuedMessages.some((m) => m.id === rec.pendingId)) st.publish(c.uri, { type: "chat/pendingMessageRemoved", kind: "queued", id: rec.pendingId });
  return true;
}

/**
 * Reduce one v10 managed event. Returns null on success or a semantic-rejection message
 * (nothing published in that case).
 */
export function applyManagedEvent(st: HostState, route: SessionRoute, s: SessionModel, chat: ChatModel, raw: Json): string | null {
  const err = reduceManagedEvent(st, route, s, chat, raw);
  if (err === null) saveLedger(st, s);
  return err;
}

function reduceManagedEvent(st: HostState, route: SessionRoute, s: SessionModel, chat: ChatModel, raw: Json): string | null {
  if (!isManagedRoute(route)) return `${clip(raw.type)} requires advertised chatCapabilities.managedInvocations`;
  const p = ManagedEvent.safeParse(raw);
  if (!p.success) return zodMessage(p.error);
  const ev = p.data;
  const l = ledgerOf(s);
  if (ev.type === "invocation_observation_cut") {
    l.cut = { routeId: route.logicalId, cut: ev };
    for (const rec of [...l.records.values()]) {
      reconcileGap(st, s, rec);
      maybePrune(st, s, rec); // a turn the gap ended resolves its record
    }
    return null;
  }
  const rec = l.records.get(ev.commandId);
  if (!rec || rec.chat !== chat.uri) return `unknown managed invocation ${clip(ev.commandId)} for this chat`;
  switch (ev.type) {
    case "invocation_boundary":
      rec.bound = true;
      if (ev.binding) rec.binding = ev.binding;
      if (ev.phase === "retired") {
        rec.retired = true;
        trySettle(st, s, rec);
      }
      return null;
    case "invocation_user_message": {
      rec.bound = true;
      if (ev.binding) rec.binding = ev.binding;
      if (rec.kind === "prompt") return null; // the precreated turn is this boundary: no second turn
      if (rec.turnId !== undefined) return `invocation ${clip(ev.commandId)} already started its turn`;
      if (chat.activeTurn) return "a turn is already active in this chat";
      const unchanged = rec.pendingId !== undefined && l.versions.get(versionKey(chat.uri, rec.pendingId)) === rec.commandId;
      if (unchanged) retireVersion(st, rec);
      const turnId = ev.turnId ?? randomUUID();
      rec.turnId = turnId;
      l.byTurn.set(turnId, rec);
      const act: Json = { type: "chat/turnStarted", turnId, startedAt: new Date().toISOString(), message: { text: ev.text, origin: { kind: "user" } } };
      if (unchanged) act.queuedMessageId = rec.pendingId;
      st.publish(chat.uri, act);
      st.summaryChanged(s);
      return null;
    }
    case "invocation_outcome": {
      const t = ev.target;
      if (rec.kind === "prompt" && t.turnId !== rec.turnId) return "invocation_outcome target does not match the original turn";
      if (rec.kind === "follow_up" && t.pendingId !== rec.pendingId) return "invocation_outcome target does not match the original pending message";
      if (terminal(rec.outcome)) return null; // the first terminal outcome stands
      rec.outcome = ev;
      if (rec.kind === "follow_up" && rec.turnId === undefined && ev.outcome !== "unknown") {
        // Delivered without a user boundary, or failed/cancelled: the unchanged version leaves the queue.
        if (ev.outcome !== "succeeded" || ev.delivery?.state === "delivered") {
          rec.retired = true;
          retireVersion(st, rec);
        }
      }
      trySettle(st, s, rec);
      return null;
    }
  }
}

/**
 * Native turn events seen before the ordinary reduction. A managed turn that produced output has
 * an observed binding; a native `settled` of a discontinuous managed turn reports the gap instead
 * of success (returns true: the event was handled here).
 */
export function managedNativeEvent(st: HostState, s: SessionModel, chat: ChatModel, type: string): boolean {
  const l = peekLedger(s);
  const t = chat.activeTurn;
  if (!l || !t) return false;
  const rec = l.byTurn.get(t.id);
  if (!rec) return false;
  if (type !== "settled") {
    rec.bound = true;
    return false;
  }
  if (!rec.discontinuous) return false;
  reportGap(st, s, chat);
  maybePrune(st, s, rec);
  return true;
}

/** A new backend incarnation: every active managed turn of the session is output-discontinuous. */
export function markDiscontinuous(st: HostState, s: SessionModel): ManagedRecord[] {
  const l = peekLedger(s);
  if (!l) return [];
  const out: ManagedRecord[] = [];
  for (const rec of l.records.values())
    if (turnActive(st, rec)) {
      rec.discontinuous = true;
      out.push(rec);
    }
  delete l.cut;
  return out;
}

/** Records of a session still unresolved (the admission bound counts these). */
export function unresolvedCount(s: SessionModel): number {
  return peekLedger(s)?.records.size ?? 0;
}
