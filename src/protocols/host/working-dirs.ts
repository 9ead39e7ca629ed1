/**
 * AHP `session/workingDirectorySet` / `session/workingDirectoryRemoved` (membership of
 * `SessionState.workingDirectories`, keyed by the directory URI). Contracts:
 *  - AHP makes them valid only when the agent advertises `multipleWorkingDirectories`; a backend
 *    advertises it in its v6+ session `hello` as `multipleWorkingDirectories:
 *    {immutablePrimary?}` (this host's addition; no earlier frame carried it). Without it both
 *    are refused with a fixed message naming the missing capability;
 *  - from the backend (v6 `resource_action`): validated against the current set (adding a
 *    member or removing a non-member is refused, as the official reducer would ignore it),
 *    reduced, published, persisted with the session, announced to root subscribers;
 *  - from a client: the same checks, then sent as `apply_resource_action {channel: <session>,
 *    action}` (the backend must really grant or revoke tool access) and reduced and echoed only
 *    after the backend accepts; a refusal or an indeterminate outcome is the action's rejection;
 *  - `session/workingDirectoryReplaced {directory, replacement}` (AHP 0.8) swaps one entry in
 *    place; `immutablePrimary`: the first directory is the backend's fixed root and can be
 *    neither removed nor replaced; `primaryReplacement`: it cannot be removed, only replaced;
 *  - at most MAX_WORKING_DIRECTORIES directories, each a URI of at most 4,096 characters;
 *  - a chat's subset (AHP 0.7 `chat/workingDirectorySet` / `Removed`): same gate and forwarding,
 *    members of the session's set only, announced with `session/chatUpdated {workingDirectories}`;
 *    a directory the session loses or replaces leaves or moves in every chat subset.
 */
import { z } from "zod";
import { clip } from "./inbound.js";
import { ROOT } from "./ahp-constants.js";
import { forwardResourceAction } from "./ahp-requests.js";
import type { ChatModel, Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { NOT_CONNECTED_REFUSAL } from "./commands.js";

export const MAX_WORKING_DIRECTORIES = 64;
const MIN_VERSION = 6;

const directory = z.string().min(1).max(4096).regex(/^[A-Za-z][A-Za-z0-9+.-]*:\S+$/, "must be an absolute URI");
const WorkingDirActions = z.discriminatedUnion("type", [
  z.object({ type: z.literal("session/workingDirectorySet"), directory }).strict(),
  z.object({ type: z.literal("session/workingDirectoryRemoved"), directory }).strict(),
  // AHP 0.8: an atomic replacement at the same position.
  z.object({ type: z.literal("session/workingDirectoryReplaced"), directory, replacement: directory }).strict(),
]);
type WorkingDirAction = z.infer<typeof WorkingDirActions>;

export function isWorkingDirAction(type: unknown): boolean {
  return type === "session/workingDirectorySet" || type === "session/workingDirectoryRemoved" || type === "session/workingDirectoryReplaced";
}

/** The session's working directories (AHP `SessionState.workingDirectories`). */
function directories(s: SessionModel): string[] {
  return Array.isArray(s.extra.workingDirectories) ? (s.extra.workingDirectories as string[]) : [];
}

/** The capability message: fixed, naming what is missing and where a backend advertises it. */
export function missingCapability(type: string): string {
  return `${type} needs the multipleWorkingDirectories capability, which this session's backend did not advertise (hello.multipleWorkingDirectories, backend protocol 6 or later)`;
}

function parse(action: Json): { ok: WorkingDirAction } | { error: string } {
  const p = WorkingDirActions.safeParse(action);
  if (p.success) return { ok: p.data };
  return { error: `invalid ${clip(action.type)}: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim() };
}

/** Whether `a` applies to the current set and the route's capability; null, or why not. */
function check(s: SessionModel, a: WorkingDirAction): string | null {
  const caps = s.route?.workingDirs;
  if (!caps) return missingCapability(a.type);
  const dirs = directories(s);
  if (a.type === "session/workingDirectorySet") {
    if (dirs.includes(a.directory)) return `${a.type}: ${clip(a.directory)} is already a working directory of this session`;
    if (dirs.length >= MAX_WORKING_DIRECTORIES) return `${a.type}: a session has at most ${MAX_WORKING_DIRECTORIES} working directories`;
    return null;
  }
  if (!dirs.includes(a.directory)) return `${a.type}: ${clip(a.directory)} is not a working directory of this session`;
  const primary = dirs[0] === a.directory;
  if (a.type === "session/workingDirectoryReplaced") {
    if (dirs.includes(a.replacement)) return `${a.type}: ${clip(a.replacement)} is already a working directory of this session`;
    if (caps.immutablePrimary && primary) return `${a.type}: the first working directory is the backend's fixed primary (multipleWorkingDirectories.immutablePrimary) and cannot be replaced`;
    return null;
  }
  if (caps.immutablePrimary && primary) return `${a.type}: the first working directory is the backend's fixed primary (multipleWorkingDirectories.immutablePrimary) and cannot be removed`;
  if (caps.primaryReplacement && primary) return `${a.type}: the first working directory is the backend's primary slot (multipleWorkingDirectories.primaryReplacement): replace it with session/workingDirectoryReplaced instead`;
  return null;
}

/** Publish an accepted change (with the client's origin, if any) and tell root subscribers the new set. */
function publish(st: HostState, s: SessionModel, a: WorkingDirAction, origin?: Origin): void {
  st.publish(s.uri, a, origin);
  st.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { workingDirectories: [...directories(s)] } });
  if (a.type === "session/workingDirectorySet") return;
  // A chat's subset stays within the session's set (AHP): a directory that left, or moved, leaves or moves there too.
  for (const c of s.chats.values()) {
    if (!c.workingDirectories?.includes(a.directory)) continue;
    publishChat(st, s, c, { type: "chat/workingDirectoryRemoved", directory: a.directory });
    if (a.type === "session/workingDirectoryReplaced") publishChat(st, s, c, { type: "chat/workingDirectorySet", directory: a.replacement });
  }
}

// ── A chat's subset (AHP `chat/workingDirectorySet` / `chat/workingDirectoryRemoved`) ─────────

const ChatWorkingDirActions = z.discriminatedUnion("type", [
  z.object({ type: z.literal("chat/workingDirectorySet"), directory }).strict(),
  z.object({ type: z.literal("chat/workingDirectoryRemoved"), directory }).strict(),
]);
type ChatWorkingDirAction = z.infer<typeof ChatWorkingDirActions>;

export function isChatWorkingDirAction(type: unknown): boolean {
  return type === "chat/workingDirectorySet" || type === "chat/workingDirectoryRemoved";
}

/** Whether `a` applies to chat `c` now; null, or why not. */
function checkChat(s: SessionModel, c: ChatModel, a: ChatWorkingDirAction): string | null {
  if (!s.route?.workingDirs) return missingCapability(a.type);
  const mine = c.workingDirectories;
  if (a.type === "chat/workingDirectorySet") {
    if (!directories(s).includes(a.directory)) return `${a.type}: ${clip(a.directory)} is not a working directory of this session (add it to the session first)`;
    if (mine?.includes(a.directory)) return `${a.type}: ${clip(a.directory)} is already one of this chat's working directories`;
    return null;
  }
  if (!mine?.includes(a.directory)) return `${a.type}: ${clip(a.directory)} is not one of this chat's working directories`;
  return null;
}

/** Publish a chat subset change and tell the session's catalogue (`session/chatUpdated`). */
function publishChat(st: HostState, s: SessionModel, c: ChatModel, a: ChatWorkingDirAction, origin?: Origin): void {
  st.publish(c.uri, a, origin);
  st.publish(s.uri, { type: "session/chatUpdated", chat: c.uri, changes: { workingDirectories: [...(c.workingDirectories ?? [])] } });
}

/** Reducer: membership semantics on the chat's subset (created by the first set), persisted with the chat. */
export function reduceChatWorkingDir(st: HostState, c: ChatModel, a: Json): void {
  const mine = c.workingDirectories ?? [];
  const dir = a.directory as string;
  if (a.type === "chat/workingDirectorySet") {
    if (!mine.includes(dir)) c.workingDirectories = [...mine, dir];
  } else if (c.workingDirectories) c.workingDirectories = mine.filter((d) => d !== dir);
  st.persistChat(c);
}

/** A backend `resource_action` on a chat carrying a chat working-directory action: null when published, else why not. */
export function backendChatWorkingDir(st: HostState, s: SessionModel, c: ChatModel, action: Json): string | null {
  const p = ChatWorkingDirActions.safeParse(action);
  if (!p.success) return `invalid ${clip(action.type)}: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim();
  const why = checkChat(s, c, p.data);
  if (why) return why;
  publishChat(st, s, c, p.data);
  return null;
}

/** A client `dispatchAction` of a chat working-directory action: checked, sent to the backend, echoed once accepted. */
export function clientChatWorkingDir(st: HostState, s: SessionModel, c: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const p = ChatWorkingDirActions.safeParse(action);
  if (!p.success) return reject(`invalid ${clip(action.type)}: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim());
  if (!s.route) return reject(NOT_CONNECTED_REFUSAL);
  const why = checkChat(s, c, p.data);
  if (why) return reject(why);
  if (s.route.version < MIN_VERSION) return reject("the session's backend does not accept resource actions (needs backend protocol 6)");
  const a = p.data;
  forwardResourceAction(st, s, c.uri, a, reject, () => {
    if (st.chatIndex.get(c.uri) !== c) return;
    const now = checkChat(s, c, a);
    if (now) return reject(`the working directories changed meanwhile: ${now}`);
    publishChat(st, s, c, a, origin);
  });
}

/** Reducer: membership semantics, persisted with the session. */
export function reduceWorkingDir(st: HostState, s: SessionModel, a: Json): void {
  const dirs = directories(s);
  const dir = a.directory as string;
  if (a.type === "session/workingDirectorySet") {
    if (!dirs.includes(dir)) s.extra.workingDirectories = [...dirs, dir];
  } else if (a.type === "session/workingDirectoryReplaced") {
    const by = a.replacement as string;
    if (!dirs.includes(by)) s.extra.workingDirectories = dirs.map((d) => (d === dir ? by : d));
  } else s.extra.workingDirectories = dirs.filter((d) => d !== dir);
  st.persistSession(s);
}

/** A backend `resource_action` carrying a working-directory action: null when published, else why not. */
export function backendWorkingDir(st: HostState, s: SessionModel, action: Json): string | null {
  const p = parse(action);
  if ("error" in p) return p.error;
  const why = check(s, p.ok);
  if (why) return why;
  publish(st, s, p.ok);
  return null;
}

/** A client `dispatchAction` of a working-directory action: checked, sent to the backend, echoed once accepted. */
export function clientWorkingDir(st: HostState, s: SessionModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const p = parse(action);
  if ("error" in p) return reject(p.error);
  if (!s.route) return reject(NOT_CONNECTED_REFUSAL);
  const why = check(s, p.ok);
  if (why) return reject(why);
  if (s.route.version < MIN_VERSION) return reject("the session's backend does not accept resource actions (needs backend protocol 6)");
  const a = p.ok;
  forwardResourceAction(st, s, undefined, a, reject, () => {
    if (!st.sessions.has(s.uri)) return;
    const now = check(s, a);
    if (now) return reject(`the working directories changed meanwhile: ${now}`);
    publish(st, s, a, origin);
  });
}
