/**
 * AHP session status flags `IsRead` (32) and `IsArchived` (64): orthogonal bits OR-ed onto the
 * exclusive activity value of `SessionSummary.status` / `SessionState.status` (1, 2, 8, 24).
 * Contracts:
 *  - the flags live in the session model (`extra.isRead` / `extra.isArchived`, persisted with the
 *    session row) and are OR-ed onto every status this host derives (`sessionStatus`);
 *  - `session/isReadChanged {isRead}` / `session/isArchivedChanged {isArchived}` are accepted from
 *    the backend (v6 `resource_action`) and from clients (`dispatchAction`); a client's change is
 *    host-owned: applied, persisted and echoed at once, never sent to the backend;
 *  - a new turn or a new input request (other than client execution) marks a read session unread
 *    with a server `session/isReadChanged {isRead: false}` (AHP: "viewed since its last
 *    modification");
 *  - every change of the status value reaches root subscribers as `root/sessionSummaryChanged
 *    {status}`;
 *  - every AHP version this host negotiates (0.9.x, 1.x) defines both flags (introduced with the
 *    actions in 0.1.0), so they are carried to every client; `flagsKnownTo` states the rule;
 *  - chats carry their own flags (AHP 0.9 `chat/isReadChanged` / `chat/isArchivedChanged`), OR-ed
 *    onto `ChatSummary.status` (so `session/chatUpdated` announces them) and persisted with the
 *    chat; a turn start or an opened input request clears the chat's IsRead, as the AHP chat
 *    reducer does on its own (nothing is published for it).
 */
import { z } from "zod";
import { clip } from "./inbound.js";
import { ROOT } from "./ahp-constants.js";
import { parseSemver } from "./ahp-version.js";
import type { ChatModel, Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";

export const STATUS_FLAG = { IsRead: 1 << 5, IsArchived: 1 << 6 } as const;
/** The exclusive activity bits (bits 0–4); a status is one activity value OR-ed with flags. */
export const STATUS_ACTIVITY_MASK = (1 << 5) - 1;
/** The AHP version that defined the flags (with `session/isReadChanged` / `isArchivedChanged`). */
export const STATUS_FLAGS_SINCE = "0.1.0";

const FlagActions = z.discriminatedUnion("type", [
  z.object({ type: z.literal("session/isReadChanged"), isRead: z.boolean() }).strict(),
  z.object({ type: z.literal("session/isArchivedChanged"), isArchived: z.boolean() }).strict(),
]);

export function isStatusFlagAction(type: unknown): boolean {
  return type === "session/isReadChanged" || type === "session/isArchivedChanged";
}

/** Whether a client that negotiated AHP `version` knows the status flags. */
export function flagsKnownTo(version: string): boolean {
  const a = parseSemver(STATUS_FLAGS_SINCE);
  const b = parseSemver(version);
  if (!a || !b) return false;
  return (a[0] - b[0] || a[1] - b[1] || a[2] - b[2]) <= 0;
}

/** The flag bits of session `s` (0 when neither is set). */
export function statusFlags(s: SessionModel): number {
  return (s.extra.isRead === true ? STATUS_FLAG.IsRead : 0) | (s.extra.isArchived === true ? STATUS_FLAG.IsArchived : 0);
}

/** Reducer: apply an accepted flag action to the model and persist it. */
export function reduceStatusFlag(st: HostState, s: SessionModel, a: Json): void {
  const key = a.type === "session/isReadChanged" ? "isRead" : "isArchived";
  if (a[key] === true) s.extra[key] = true;
  else delete s.extra[key];
  st.persistSession(s);
}

/** Publish a validated flag action (with the client's origin, if any) and tell root subscribers the new status. */
function publishFlag(st: HostState, s: SessionModel, action: Json, origin?: Origin): void {
  st.publish(s.uri, action, origin);
  announceStatus(st, s);
}

/** Root subscribers hear the session's status when it differs from what they last heard. */
export function announceStatus(st: HostState, s: SessionModel): void {
  const status = st.sessionStatus(s);
  if (status === s.lastStatus) return;
  s.lastStatus = status;
  st.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { status } });
}

/** A backend `resource_action` carrying a flag action: null when published, else why not. */
export function backendStatusFlag(st: HostState, s: SessionModel, action: Json): string | null {
  const p = FlagActions.safeParse(action);
  if (!p.success) return `invalid ${clip(action.type)}: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim();
  publishFlag(st, s, p.data);
  return null;
}

/** A client `dispatchAction` of a flag action: host-owned, applied and echoed at once. */
export function clientStatusFlag(st: HostState, s: SessionModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const p = FlagActions.safeParse(action);
  if (!p.success) return reject(action.type === "session/isReadChanged" ? "session/isReadChanged needs isRead: boolean (and nothing else)" : "session/isArchivedChanged needs isArchived: boolean (and nothing else)");
  publishFlag(st, s, p.data, origin);
}

/**
 * Session `s` changed (a new turn, or a new input request that asks the user): a read session
 * becomes unread, announced with a server `session/isReadChanged {isRead: false}`.
 */
export function markUnread(st: HostState, s: SessionModel): void {
  if (s.extra.isRead !== true) return;
  st.publish(s.uri, { type: "session/isReadChanged", isRead: false });
  st.summaryChanged(s); // a modification: root subscribers hear the status and modifiedAt
}

/**
 * Called before `action` is published on `channel`: the read session it modifies (a turn starts
 * in one of its chats, or a new input request asks its user), else undefined. Cheap for the
 * streaming hot path (two string comparisons).
 */
export function becomesUnread(st: HostState, channel: string, action: Json): SessionModel | undefined {
  const t = action.type;
  if (t === "chat/turnStarted") {
    const c = st.chatIndex.get(channel);
    const s = c ? st.sessions.get(c.sessionUri) : undefined;
    return s?.extra.isRead === true ? s : undefined;
  }
  if (t === "session/inputNeededSet") {
    const s = st.sessions.get(channel);
    const r = action.request as Json | undefined;
    if (s?.extra.isRead !== true || !r || r.kind === "toolClientExecution" || s.inputNeeded.has(r.id as string)) return undefined;
    return s;
  }
  return undefined;
}

// ── Chat-level flags (AHP 0.9 `chat/isReadChanged` / `chat/isArchivedChanged`) ─────────────────

const ChatFlagActions = z.discriminatedUnion("type", [
  z.object({ type: z.literal("chat/isReadChanged"), isRead: z.boolean() }).strict(),
  z.object({ type: z.literal("chat/isArchivedChanged"), isArchived: z.boolean() }).strict(),
]);

export function isChatFlagAction(type: unknown): boolean {
  return type === "chat/isReadChanged" || type === "chat/isArchivedChanged";
}

/** The flag bits of chat `c`, OR-ed onto its `ChatSummary.status` / `ChatState.status`. */
export function chatFlags(c: ChatModel): number {
  return c.flags ?? 0;
}

/** Reducer: apply an accepted chat flag action (persisted with the chat). */
export function reduceChatFlag(st: HostState, c: ChatModel, a: Json): void {
  const flag = a.type === "chat/isReadChanged" ? STATUS_FLAG.IsRead : STATUS_FLAG.IsArchived;
  const on = a.type === "chat/isReadChanged" ? a.isRead === true : a.isArchived === true;
  const next = on ? chatFlags(c) | flag : chatFlags(c) & ~flag;
  if (next === 0) delete c.flags;
  else c.flags = next;
  st.persistChat(c);
}

/**
 * The AHP chat reducer clears the chat's IsRead itself when a turn starts or an input request
 * part opens (no action says so): the host's model follows without publishing anything.
 */
export function chatModified(c: ChatModel): void {
  if (c.flags !== undefined && (c.flags & STATUS_FLAG.IsRead) !== 0) {
    const next = c.flags & ~STATUS_FLAG.IsRead;
    if (next === 0) delete c.flags;
    else c.flags = next;
  }
}

/** A backend `resource_action` on a chat carrying a chat flag action: null when published, else why not. */
export function backendChatFlag(st: HostState, c: ChatModel, action: Json): string | null {
  const p = ChatFlagActions.safeParse(action);
  if (!p.success) return `invalid ${clip(action.type)}: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim();
  st.publish(c.uri, p.data);
  return null;
}

/** A client `dispatchAction` of a chat flag action: host-owned like the session flags, echoed at once. */
export function clientChatFlag(st: HostState, c: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const p = ChatFlagActions.safeParse(action);
  if (!p.success) return reject(action.type === "chat/isReadChanged" ? "chat/isReadChanged needs isRead: boolean (and nothing else)" : "chat/isArchivedChanged needs isArchived: boolean (and nothing else)");
  st.publish(c.uri, p.data, origin);
}
