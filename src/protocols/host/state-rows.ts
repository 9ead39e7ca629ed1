/**
 * Host state ↔ store rows: how a session and a chat's metadata are written to the host database and read back at
 * start (state.ts persists and restores through these; the turn rows themselves are handled there).
 */
import type { SessionRow } from "../../store/host/store.js";
import { maxPartSeq, restoreTurn, turnCheckpoint } from "./turn-checkpoint.js";
import { retirePending, STATUS, type ChatModel, type Json, type PendingMessage, type SessionModel } from "./model.js";

/** A stored session as a model (no chats yet: the caller adds its primary chat). */
export function sessionFromRow(row: SessionRow): SessionModel {
  const extra = JSON.parse(row.extra) as Json;
  const s: SessionModel = {
    uri: row.uri,
    sourceId: row.sourceId,
    provider: row.provider,
    providerRoute: row.providerRoute === 1,
    title: row.title,
    createdAt: row.createdAt,
    modifiedAt: row.modifiedAt,
    continuity: row.continuity,
    lifecycle: row.lifecycle as SessionModel["lifecycle"],
    primaryChat: row.chatUri,
    chats: new Map(),
    activeClients: [],
    inputNeeded: new Map(),
    inputAvailable: true,
    extra,
    lastStatus: STATUS.Idle,
  };
  if (extra.creationError) s.creationError = extra.creationError as Json;
  if (typeof extra.lastInstanceId === "string") s.lastInstanceId = extra.lastInstanceId;
  return s;
}

export function sessionRow(s: SessionModel): SessionRow {
  const extra: Json = { ...s.extra };
  if (s.creationError) extra.creationError = s.creationError;
  return {
    uri: s.uri,
    sourceId: s.sourceId,
    provider: s.provider,
    providerRoute: s.providerRoute ? 1 : 0,
    title: s.title,
    createdAt: s.createdAt,
    modifiedAt: s.modifiedAt,
    continuity: s.continuity,
    chatUri: s.primaryChat,
    lifecycle: s.lifecycle,
    extra: JSON.stringify(extra),
  };
}

/** A chat's metadata beyond its row's columns (origin, directories, pending messages, the active turn's checkpoint). */
export function chatExtra(c: ChatModel): Json {
  // The chat's own modifiedAt (its creation or its last turn's end): restored as it was, not the session's.
  const extra: Json = { modifiedAt: c.modifiedAt };
  if (c.origin) extra.origin = c.origin;
  if (c.workingDirectories) extra.workingDirectories = c.workingDirectories;
  if (c.steeringMessage) extra.steeringMessage = c.steeringMessage;
  if (c.queuedMessages.length > 0) extra.queuedMessages = c.queuedMessages;
  if (c.retiredPending?.size) extra.retiredPending = [...c.retiredPending];
  if (c.draft) extra.draft = c.draft;
  if (c.flags) extra.flags = c.flags;
  if (c.backgroundWork) extra.backgroundWork = c.backgroundWork;
  if (c.changesets) extra.changesets = c.changesets;
  if (c.activeTurn) extra.activeTurn = turnCheckpoint(c.activeTurn);
  return extra;
}

/**
 * Applies a stored chat's metadata to its restored model. A turn that was running when the host stopped comes back
 * as the active turn (output-discontinuous); `false` when its checkpoint was unreadable or already completed.
 */
export function applyChatExtra(chat: ChatModel, extra: Json): boolean {
  if (typeof extra.modifiedAt === "string") chat.modifiedAt = extra.modifiedAt;
  if (extra.origin) chat.origin = extra.origin as Json;
  if (Array.isArray(extra.workingDirectories)) chat.workingDirectories = extra.workingDirectories as string[];
  if (extra.steeringMessage) chat.steeringMessage = extra.steeringMessage as PendingMessage;
  if (Array.isArray(extra.queuedMessages)) chat.queuedMessages = extra.queuedMessages as PendingMessage[];
  if (Array.isArray(extra.retiredPending)) for (const id of extra.retiredPending) if (typeof id === "string") retirePending(chat, id);
  if (extra.draft && typeof extra.draft === "object") chat.draft = extra.draft as Json;
  if (typeof extra.flags === "number" && (extra.flags & ~96) === 0 && extra.flags !== 0) chat.flags = extra.flags;
  if (Array.isArray(extra.backgroundWork)) chat.backgroundWork = extra.backgroundWork as Json[];
  if (Array.isArray(extra.changesets)) chat.changesets = extra.changesets as Json[];
  if (extra.activeTurn === undefined) return true;
  const active = restoreTurn(extra.activeTurn);
  if (!active || chat.turns.some((t) => t.id === active.id)) return false;
  chat.activeTurn = active;
  chat.partSeq = maxPartSeq(active);
  chat.modifiedAt = active.startedAt;
  return true;
}

/** A session's stored chat order (`extra.chatOrder`, AHP `session/chatsReordered`): named chats first, the rest after in their order. */
export function applyChatOrder(s: SessionModel): void {
  const order = s.extra.chatOrder;
  if (!Array.isArray(order)) return;
  const next = new Map<string, ChatModel>();
  for (const uri of order) {
    const c = typeof uri === "string" ? s.chats.get(uri) : undefined;
    if (c) next.set(uri as string, c);
  }
  for (const [uri, c] of s.chats) if (!next.has(uri)) next.set(uri, c);
  s.chats = next;
}
