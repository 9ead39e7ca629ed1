/**
 * The AHP 0.9 chat families: `chat/turnResume`, `chat/backgroundWorkSet`,
 * `chat/backgroundWorkRemoved` and `chat/changesetsChanged` (upstream registry: introduced in
 * 0.9.0). Contracts:
 *  - from a backend (v6 `resource_action` on one of its chats; view-families.ts routes them here):
 *    each is validated against the official shape and the chat's state, a transition the official
 *    reducer would ignore is refused (never published as a silent no-op), then reduced and published;
 *  - `chat/turnResume {turnId}` reopens the chat's latest turn only when no turn runs, it ended in
 *    `error` and its last response part is an error part marked `resumable` (the backend marks it
 *    with `settled.resumable`, v6). The reopened turn is the active turn again with its message,
 *    parts (the error part included), usage and start; the backend then continues it with its
 *    usual events and ends it with `settled`. Clients may dispatch it: it is sent as
 *    `apply_resource_action` and reduced and echoed only after the backend accepts;
 *  - `chat/backgroundWorkSet {work}` upserts by `work.id`, at most MAX_BACKGROUND_WORK entries per
 *    chat, each at most MAX_BACKGROUND_WORK_BYTES encoded; `chat/backgroundWorkRemoved {id}` needs
 *    a listed id. Host-emitted only (clients are refused);
 *  - `chat/changesetsChanged {changesets?}` replaces the chat's catalogue (absent clears it), at
 *    most MAX_CHAT_CHANGESETS entries, each at most MAX_CHAT_CHANGESET_BYTES encoded. Host-emitted only;
 *  - background work and the catalogue persist with the chat (its metadata row, like drafts) and
 *    survive route loss and a host restart: the backend removes what ended;
 *  - `session/chatsReordered {chats}` (backend, on the session): an authoritative full order that
 *    must name every chat of the session exactly once; persisted with the session (`extra.chatOrder`)
 *    and announced to root subscribers. Host-emitted only;
 *  - a client whose negotiated version predates an action never receives it (ahp-version.ts) and
 *    its snapshots carry neither field (`gateChatSnapshot`).
 */
import { z } from "zod";
import { forwardResourceAction } from "./ahp-requests.js";
import { actionKnownTo } from "./ahp-version.js";
import { clip } from "./inbound.js";
import type { ChatModel, Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { restoreTurn } from "./turn-checkpoint.js";
import { NOT_CONNECTED_REFUSAL } from "./commands.js";

/** The most background-work entries one chat lists, and the largest entry (encoded JSON bytes). */
export const MAX_BACKGROUND_WORK = 64;
export const MAX_BACKGROUND_WORK_BYTES = 16 * 1024;
/** The most entries in a chat's changeset catalogue (as a session's), and the largest entry (encoded JSON bytes). */
export const MAX_CHAT_CHANGESETS = 64;
export const MAX_CHAT_CHANGESET_BYTES = 16 * 1024;
const MIN_VERSION = 6;

const id = z.string().min(1).max(512);
const uri = z.string().min(1).max(4096);
const meta = z.record(z.string(), z.unknown()).optional();
const base = { id, label: z.string().max(4096), startedAt: z.string().max(64).optional(), _meta: meta };
/** AHP `BackgroundShellWork`, `BackgroundSubagentWork`, or a kind a newer peer added (kept as sent). */
export const BackgroundWork = z.union([
  z.object({ ...base, kind: z.literal("shell"), command: z.string().max(MAX_BACKGROUND_WORK_BYTES), terminal: uri.optional() }).strict(),
  z.object({ ...base, kind: z.literal("subagent"), chat: uri }).strict(),
  z.object({ ...base, kind: z.string().min(1).max(64).refine((k) => k !== "shell" && k !== "subagent", "a shell needs command, a subagent needs chat") }).passthrough(),
]);
const Changeset = z.object({ label: z.string().max(4096), uriTemplate: uri, changeKind: z.string().max(256), description: z.string().max(4096).optional() }).passthrough();

const Actions = z.discriminatedUnion("type", [
  z.object({ type: z.literal("chat/turnResume"), turnId: id }).strict(),
  z.object({ type: z.literal("chat/backgroundWorkSet"), work: BackgroundWork }).strict(),
  z.object({ type: z.literal("chat/backgroundWorkRemoved"), id }).strict(),
  z.object({ type: z.literal("chat/changesetsChanged"), changesets: z.array(Changeset).max(MAX_CHAT_CHANGESETS).optional() }).strict(),
]);

export const CHAT_09_ACTIONS: ReadonlySet<string> = new Set(["chat/turnResume", "chat/backgroundWorkSet", "chat/backgroundWorkRemoved", "chat/changesetsChanged"]);

const bytes = (v: unknown): number => Buffer.byteLength(JSON.stringify(v));
const invalid = (type: unknown, e: z.ZodError): string => `invalid ${clip(type)}: ${e.issues[0]?.path.join(".") ?? ""} ${e.issues[0]?.message ?? ""}`.trim();

/** Why `chat/turnResume` for `turnId` does not apply to the chat now; null when it reopens the latest turn. */
export function resumeProblem(chat: ChatModel, turnId: string): string | null {
  if (chat.activeTurn) return "chat/turnResume: a turn is already running in this chat";
  if (chat.draining) return "chat/turnResume: the backend is still finishing the chat's last turn";
  const last = chat.turns.at(-1);
  if (!last || last.id !== turnId) return "chat/turnResume: turnId does not name the chat's latest turn";
  if (last.state !== "error") return "chat/turnResume: the latest turn did not end in error";
  const part = (last.responseParts as Json[] | undefined)?.at(-1);
  if (part?.kind !== "error" || part.resumable !== true) return "chat/turnResume: the latest turn's error is not resumable";
  return null;
}

/** A backend `resource_action` of one of the four families on `chat`: null when published, else why not. */
export function backendChat09(st: HostState, chat: ChatModel, action: Json): string | null {
  const p = Actions.safeParse(action);
  if (!p.success) return invalid(action.type, p.error);
  const a = p.data;
  switch (a.type) {
    case "chat/turnResume": {
      const why = resumeProblem(chat, a.turnId);
      if (why) return why;
      break;
    }
    case "chat/backgroundWorkSet": {
      const list = chat.backgroundWork ?? [];
      if (bytes(a.work) > MAX_BACKGROUND_WORK_BYTES) return `chat/backgroundWorkSet: the entry exceeds ${MAX_BACKGROUND_WORK_BYTES} bytes encoded`;
      if (!list.some((w) => w.id === a.work.id) && list.length >= MAX_BACKGROUND_WORK) return `chat/backgroundWorkSet: a chat lists at most ${MAX_BACKGROUND_WORK} background work entries (remove one first)`;
      break;
    }
    case "chat/backgroundWorkRemoved":
      if (!(chat.backgroundWork ?? []).some((w) => w.id === a.id)) return `chat/backgroundWorkRemoved: no background work ${clip(a.id)} in this chat`;
      break;
    case "chat/changesetsChanged": {
      // Entries keep unknown fields (passthrough) and persist with the chat: each is bounded, so the catalogue is too.
      const big = (a.changesets ?? []).findIndex((c) => bytes(c) > MAX_CHAT_CHANGESET_BYTES);
      if (big !== -1) return `chat/changesetsChanged: changesets.${big} exceeds ${MAX_CHAT_CHANGESET_BYTES} bytes encoded`;
      break;
    }
  }
  st.publish(chat.uri, a);
  return null;
}

/** A client `chat/turnResume`: forwarded to the backend, reduced and echoed once it accepts. */
export function clientTurnResume(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const p = Actions.safeParse(action);
  if (!p.success || p.data.type !== "chat/turnResume") return reject("chat/turnResume needs turnId: the chat's latest turn");
  const a = p.data;
  const why = resumeProblem(chat, a.turnId);
  if (why) return reject(why);
  if (!s.route) return reject(NOT_CONNECTED_REFUSAL);
  if (s.route.version < MIN_VERSION) return reject("the session's backend does not accept resource actions (needs backend protocol 6)");
  forwardResourceAction(st, s, chat.uri, a, reject, () => {
    const now = st.chatIndex.get(chat.uri) === chat ? resumeProblem(chat, a.turnId) : "the chat is gone";
    if (now) return reject(now);
    st.publish(chat.uri, a, origin);
  });
}

/** The client-dispatchable family here is `chat/turnResume`; the others are the host's to emit. */
export function clientChat09(st: HostState, s: SessionModel, chat: ChatModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  if (action.type === "chat/turnResume") return clientTurnResume(st, s, chat, action, origin, reject);
  reject(`${clip(action.type)} is emitted by the host, not dispatched by clients`);
}

/** Reducer for the four actions (upstream chat reducer semantics). */
export function reduceChat09(st: HostState, c: ChatModel, type: string, a: Json): void {
  switch (type) {
    case "chat/turnResume": {
      if (resumeProblem(c, a.turnId as string)) return;
      const last = c.turns.pop()!;
      const t = restoreTurn({ id: last.id, startedAt: last.startedAt, message: last.message, responseParts: last.responseParts, ...(last.usage ? { usage: last.usage } : {}) })!;
      delete t.restored;
      c.activeTurn = t;
      // A running turn's chat is modified at its start (as after turnStarted, and as a restart restores it).
      c.modifiedAt = t.startedAt;
      c.lastError = false;
      st.persistChat(c); // the turn row leaves, the active-turn checkpoint takes its place
      return;
    }
    case "chat/backgroundWorkSet": {
      const w = a.work as Json;
      const list = c.backgroundWork ?? [];
      const i = list.findIndex((x) => x.id === w.id);
      c.backgroundWork = i === -1 ? [...list, w] : list.map((x, j) => (j === i ? w : x));
      break;
    }
    case "chat/backgroundWorkRemoved":
      if (!c.backgroundWork?.some((x) => x.id === a.id)) return;
      c.backgroundWork = c.backgroundWork.filter((x) => x.id !== a.id);
      break;
    case "chat/changesetsChanged":
      if (Array.isArray(a.changesets)) c.changesets = a.changesets as Json[];
      else delete c.changesets;
      break;
    default:
      return;
  }
  st.persistChat(c);
}

const Reordered = z.object({ type: z.literal("session/chatsReordered"), chats: z.array(uri).max(10_000) }).strict();

/** Why `chats` is not exactly the session's chats, each once; null when it is. */
function orderProblem(s: SessionModel, chats: string[]): string | null {
  if (new Set(chats).size !== chats.length || chats.length !== s.chats.size || chats.some((c) => !s.chats.has(c)))
    return `session/chatsReordered must name every chat of the session exactly once (${s.chats.size} chats now)`;
  return null;
}

/** A backend `session/chatsReordered` on session `s`: null when published, else why not. */
export function backendChatsReordered(st: HostState, s: SessionModel, action: Json): string | null {
  const p = Reordered.safeParse(action);
  if (!p.success) return invalid(action.type, p.error);
  const why = orderProblem(s, p.data.chats);
  if (why) return why;
  st.publish(s.uri, p.data);
  st.chatsChanged(s); // root subscribers' SessionSummary.chats follow the order
  return null;
}

/** Reducer: a full permutation reorders the catalogue (upstream: anything else is a no-op). */
export function reduceChatsReordered(st: HostState, s: SessionModel, a: Json): void {
  const chats = a.chats as string[];
  if (orderProblem(s, chats)) return;
  s.chats = new Map(chats.map((c) => [c, s.chats.get(c)!]));
  s.extra.chatOrder = chats;
  st.persistSession(s);
}

/** A chat snapshot for a client that negotiated `version`: without the fields its version does not know. */
export function gateChatSnapshot(st: HostState, snap: Json | undefined, version: string | null): Json | undefined {
  const state = snap?.state as Json | undefined;
  if (!snap || !state || version === null || !st.chatIndex.has(snap.resource as string)) return snap;
  const drop: string[] = [];
  if (state.backgroundWork !== undefined && !actionKnownTo("chat/backgroundWorkSet", version)) drop.push("backgroundWork");
  if (state.changesets !== undefined && !actionKnownTo("chat/changesetsChanged", version)) drop.push("changesets");
  if (drop.length === 0) return snap;
  const next = { ...state };
  for (const k of drop) delete next[k];
  return { ...snap, state: next };
}
