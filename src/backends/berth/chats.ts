/**
 * The chats of a Berth session served to the host (protocol v3 `create_chat` / `dispose_chat` / `fetch_turns`).
 * Contracts:
 *  - Every chat is a Berth session of its own; the primary chat is the session's own Berth session. A created
 *    chat is a new Berth session in the session's working directory; a fork is a new Berth session holding a copy
 *    of the source chat's records through the fork turn (`forkSession`). The chat → Berth session map is in the
 *    registry (`chats`), written before the command is accepted, so a chat survives a restart.
 *  - `create_chat` is accepted before any event of the chat; its initial turn (when given) is then run without a
 *    second `user_message` (the host already holds it). A side chat (`source.kind: "sideChat"`) is a new Berth
 *    session holding the source's records through the newest completed turn at or before the source turn
 *    (`sideChatSession`); the excerpt it was opened on (`selection.text`) is quoted into its first prompt.
 *  - `dispose_chat` is in `disposal.ts` (durable first, then the chat's turn stopped).
 *  - `fetch_turns` sends `turns_loaded` (the page of turns before the cursor, oldest first, with the next cursor)
 *    and then accepts; an unknown cursor is refused. Pages reach back to the session's first turn however long it
 *    is (`pageHistory`: each page one bounded read before its cursor).
 */
import type { SessionHub, SessionRuntime } from "../../runtime/session/index.js";
import { forkSession, pageHistory, RECENT_WINDOW, sideChatSession } from "../../runtime/session/transcript.js";
import { SessionError, type SessionManager } from "../../store/sessions/index.js";
import { historyTurn } from "./parse.js";
import type { HostProjection } from "./projection.js";
import { registryWriteFailed, type LiveSession } from "./sessions.js";
import type { Json } from "../../core/json-bounds.js";

/** One chat of a served session. */
export interface Lane {
  /** Its Berth session. */
  sessionId: string;
  /** The host's chat URI (unset: the primary chat, whose events are unqualified). */
  chatUri?: string;
  rt?: SessionRuntime;
  projection?: HostProjection;
  /** Events held while a prompt is being admitted (they follow its command result). */
  held: Json[] | null;
  /** A side chat's excerpt (AHP `selection.text`), quoted into its first turn's prompt. */
  selection?: string;
  /** Admissions in progress that share `held`. */
  admitting?: number;
  /** Its disposal's registry write is in flight: snapshots write it as disposed, while it is still served. */
  disposing?: true;
  /**
   * Its disposal was accepted (the host removed the chat): nothing of it is sent any more. Its runtime may still be
   * closing, when its turn outlived the disposal's bounded wait.
   */
  disposed?: true;
}

/** The longest side-chat excerpt kept (characters). */
export const MAX_SELECTION = 16 * 1024;

/** A side chat's first prompt: the excerpt it was opened on, quoted, then the user's text. */
export function withSelection(selection: string, text: string): string {
  const quoted = selection.split("\n").map((l) => `> ${l}`).join("\n");
  return `About this excerpt of the conversation:\n${quoted}\n\n${text}`;
}

export interface ChatDeps {
  manager: SessionManager;
  hub: SessionHub;
  page: number;
  /** Bytes one `fetch_turns` page reads at most (default: `pageHistory`'s, the 64 MiB transcript window). */
  windowBytes?: number;
  emit: (s: LiveSession, lane: Lane, ev: Json) => void | Promise<void>;
  runtimeOf: (s: LiveSession, lane: Lane) => SessionRuntime;
  save: () => Promise<void>;
  /** The registry file `save` writes (named in the fix of a failed write). */
  registryPath: string;
  answer: (commandId: string, ok: boolean, error?: string) => void;
  admitTurn: (s: LiveSession, lane: Lane, text: string, turnId: string, reply: (ok: boolean, error?: string) => void) => Promise<void>;
}

const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const MAX_TITLE = 4096;

export class ChatCommands {
  constructor(private readonly d: ChatDeps) {}

  /**
   * The newest history page of a chat within its newest 1 MiB (for `hello.history`): its ended turns only (the
   * spec's registration history is "completed history turns"; a running turn is not one). A last turn left open by
   * a writer that died (kill -9 of another door) is closed first, as any door's open closes it, so it is shown
   * settled (not finished: `historyTurn`) rather than left out with its prompt and partial answer; one a live
   * process is running (it holds the session's lease) stays out.
   */
  async newestPage(lane: Lane): Promise<{ turns: Json[]; next: string | null }> {
    const read = () => pageHistory(this.d.manager, lane.sessionId, null, this.d.page, RECENT_WINDOW.maxBytes);
    let p = await read();
    const last = p?.turns.at(-1);
    if (last !== undefined && !last.ended && (await this.d.manager.settleInterrupted(lane.sessionId))) p = await read();
    return { turns: (p?.turns ?? []).filter((t) => t.ended).map(historyTurn), next: p?.next ?? null };
  }

  async create(commandId: string, s: LiveSession, cmd: Json): Promise<void> {
    const uri = cmd.chat;
    if (typeof uri !== "string" || uri === "") return this.d.answer(commandId, false, "create_chat needs chat");
    if (s.chats.has(uri) || uri === s.primaryChat || (s.entry.chats ?? []).some((c) => c.uri === uri)) return this.d.answer(commandId, false, "that chat already exists");
    const title = typeof cmd.title === "string" && cmd.title !== "" ? cmd.title.slice(0, MAX_TITLE) : "Chat";
    let sessionId: string;
    let selection: string | undefined;
    try {
      if (cmd.source !== undefined) {
        const src = cmd.source;
        if (!isObj(src) || (src.kind !== "fork" && src.kind !== "sideChat")) return this.d.answer(commandId, false, "a chat's source must be a fork or a side chat");
        const from = src.chat === s.primaryChat ? s.primary : typeof src.chat === "string" ? s.chats.get(src.chat) : undefined;
        if (from === undefined || typeof src.turnId !== "string") return this.d.answer(commandId, false, `${src.kind === "fork" ? "fork" : "side-chat"} source must be a chat of this session and a turn ID`);
        const cwd = s.entry.cwd === "" ? ((await this.d.hub.cwdOf(s.entry.sessionId)) ?? "/") : s.entry.cwd;
        const f = src.kind === "fork" ? await forkSession(this.d.manager, from.sessionId, src.turnId, cwd) : await sideChatSession(this.d.manager, from.sessionId, src.turnId, cwd);
        if (!f.ok) return this.d.answer(commandId, false, f.error);
        sessionId = f.sessionId;
        const sel = isObj(src.selection) && typeof src.selection.text === "string" && src.selection.text !== "" ? src.selection.text : undefined;
        if (src.kind === "sideChat" && sel !== undefined) selection = sel.slice(0, MAX_SELECTION);
      } else {
        const cwd = s.entry.cwd !== "" ? s.entry.cwd : ((await this.d.hub.cwdOf(s.entry.sessionId)) ?? "/");
        const h = await this.d.manager.store.create(cwd);
        sessionId = h.id;
        await h.release();
      }
    } catch (e) {
      return this.d.answer(commandId, false, e instanceof SessionError ? `session store: ${e.code}` : "could not create the chat");
    }
    const lane: Lane = { sessionId, chatUri: uri, held: null, ...(selection !== undefined ? { selection } : {}) };
    s.chats.set(uri, lane);
    s.entry.chats = [...(s.entry.chats ?? []), { uri, sessionId, title, ...(selection !== undefined ? { selection } : {}) }];
    try {
      await this.d.save();
    } catch (e) {
      s.chats.delete(uri);
      s.entry.chats = s.entry.chats.filter((c) => c.uri !== uri);
      return this.d.answer(commandId, false, registryWriteFailed(e, this.d.registryPath, "no chat was created", "create the chat again"));
    }
    this.d.answer(commandId, true);
    const text = cmd.initialText;
    const turnId = cmd.initialTurnId;
    if (typeof text === "string" && typeof turnId === "string") {
      this.d.runtimeOf(s, lane);
      lane.projection?.silentTurns.add(turnId);
      await this.d.admitTurn(s, lane, text, turnId, (ok, err) => {
        if (ok) return;
        lane.projection?.silentTurns.delete(turnId);
        void this.d.emit(s, lane, { type: "settled", cancelled: false, error: `the initial turn could not start: ${err ?? "refused"}` });
      });
    }
  }

  async fetch(commandId: string, s: LiveSession, lane: Lane, cmd: Json): Promise<void> {
    const cursor = cmd.cursor;
    if (typeof cursor !== "string") return this.d.answer(commandId, false, "fetch_turns needs a cursor");
    let page;
    try {
      page = await pageHistory(this.d.manager, lane.sessionId, cursor, this.d.page, this.d.windowBytes);
    } catch (e) {
      return this.d.answer(commandId, false, e instanceof SessionError ? `session store: ${e.code}` : "history unavailable");
    }
    if (page === null) return this.d.answer(commandId, false, "unknown history cursor");
    const ev: Json = { type: "turns_loaded", turns: page.turns.map(historyTurn) };
    if (page.next !== null) ev.nextCursor = page.next;
    void this.d.emit(s, lane, ev);
    this.d.answer(commandId, true);
  }
}
