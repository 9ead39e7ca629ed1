/**
 * `dispose_session` and `dispose_chat` for the Berth backend (spec: the host removes the session "only after the
 * provider accepts disposal; rejection leaves the session intact", and likewise removes a chat only once
 * `dispose_chat` is accepted; so the answer must say what really happened here).
 *
 * Contracts:
 *  - The session is the one routed at the command's URI, or one whose creation was admitted and whose claim the
 *    host has not answered yet (`SessionTable.find`); anything else is refused `unknown session` with the reason.
 *  - Accepted only once the disposal is durable and the session's turns have stopped:
 *    1. the registry is written with the session marked disposed; a failed write refuses the command naming the
 *       write's error and the fix, and the session stays served exactly as before (routes, runtimes, running turn);
 *    2. only then is the session forgotten (out of the table and its routes; a registration of it still reading
 *       its history is dropped, a late answer is unregistered: `registrations.ts`);
 *    3. every chat's queue is dropped, its running turn cancelled, and its runtime closed; the answer waits until
 *       they stopped (provider request aborted, tool processes ended), at most `waitMs` (default
 *       `DISPOSE_WAIT_MS`): a tool that does not stop in time cannot hold the answer (and the host's command
 *       deadline) forever. Past the bound the disposal is accepted anyway, the log says so (and again once the
 *       runtime closed), and the runtime goes on closing; its events have nowhere to go (the session has no route).
 *  - Two `dispose_session`s of one session in flight at once (distinct command IDs) share one disposal and are
 *    answered alike.
 *  - `dispose_chat` follows the same order for one chat (the primary chat cannot be disposed): the registry is
 *    written with the chat marked disposed (a failed write refuses the command naming the error and the fix, and
 *    the chat stays served exactly as before); only then is the chat forgotten (`SessionTable.disposeChat`: its
 *    Berth session file is kept, and the mark keeps it from being listed as a session of its own), its queue
 *    dropped, its turn cancelled and its runtime closed. The answer waits for that turn within the same bound
 *    (spec: `dispose_chat` "is acknowledged only after the runtime has stopped producing" events); past it the
 *    disposal is accepted and logged, and the chat is marked `disposed`: whatever its turn still emits is dropped
 *    (`backend.ts` `emit`), so the host sees none of it after the acceptance, and never refuses an event of a chat
 *    it removed (which would end the session's registration). Two at once of one chat share one disposal.
 */
import type { Json } from "../../core/json-bounds.js";
import type { SessionHub } from "../../runtime/session/index.js";
import type { Registrations } from "./registrations.js";
import type { Lane } from "./chats.js";
import { lanesOf, registryWriteFailed, type LiveSession, type SessionTable } from "./sessions.js";

/** How long an accepted disposal waits for its turns to stop (well inside the host's 60 s command deadline). */
export const DISPOSE_WAIT_MS = 10_000;

export interface DisposalDeps {
  table: SessionTable;
  registrations: Registrations;
  hub: SessionHub;
  /** The registry file (named in the fix of a failed write). */
  registryPath: string;
  waitMs: number;
  answer(commandId: string, accepted: boolean, error?: string): void;
  log(msg: string): void;
}

type Outcome = { ok: true } | { ok: false; error: string };

/** The refusal of a disposal whose registry write failed: the cause, what it left, and the fix. */
function writeFailed(e: unknown, registryPath: string, what: "session" | "chat"): Outcome {
  return { ok: false, error: registryWriteFailed(e, registryPath, `the ${what} is kept and still served`, `dispose the ${what} again`) };
}

export class Disposals {
  private readonly running = new Map<LiveSession | Lane, Promise<Outcome>>();

  constructor(private readonly d: DisposalDeps) {}

  /** Handle one `dispose_session` command; always answers it. */
  run(commandId: string, cmd: Json): void {
    const uri = cmd.session;
    const s = typeof uri === "string" ? this.d.table.find(uri) : undefined;
    if (s === undefined || typeof uri !== "string")
      return this.d.answer(commandId, false, "unknown session: this backend serves no session (nor one being created) at that URI; it may be disposed already");
    this.once(commandId, s, () => this.dispose(s, uri));
  }

  /** Handle one `dispose_chat` command of session `s`; always answers it. */
  chat(commandId: string, s: LiveSession, cmd: Json): void {
    const uri = cmd.chat;
    const lane = typeof uri === "string" ? s.chats.get(uri) : undefined;
    if (typeof uri !== "string" || lane === undefined) return this.d.answer(commandId, false, uri === s.primaryChat ? "the primary chat cannot be disposed" : "unknown chat");
    this.once(commandId, lane, () => this.disposeChat(s, lane, uri));
  }

  /** Answer `commandId` with the disposal of `key` in flight, started by `start` if there is none. */
  private once(commandId: string, key: LiveSession | Lane, start: () => Promise<Outcome>): void {
    let disposal = this.running.get(key);
    if (disposal === undefined) {
      disposal = start();
      this.running.set(key, disposal);
      void disposal.then(() => this.running.delete(key));
    }
    void disposal.then((o) => (o.ok ? this.d.answer(commandId, true) : this.d.answer(commandId, false, o.error)));
  }

  private async dispose(s: LiveSession, uri: string): Promise<Outcome> {
    // Durable first: a session the registry still lists as served must stay served (the host keeps it on refusal).
    try {
      await this.d.table.dispose(s, uri);
    } catch (e) {
      return writeFailed(e, this.d.registryPath, "session");
    }
    this.d.registrations.disposed(s); // one still reading its history is not sent; a late answer is unregistered
    // The Berth session files are kept: disposal removes the session from the host, not the transcripts.
    await this.stop(lanesOf(s), "session");
    return { ok: true };
  }

  private async disposeChat(s: LiveSession, lane: Lane, uri: string): Promise<Outcome> {
    // Durable first: a chat the registry still lists must stay served (the host keeps it on refusal).
    try {
      await this.d.table.disposeChat(s, lane, uri);
    } catch (e) {
      return writeFailed(e, this.d.registryPath, "chat");
    }
    await this.stop([lane], "chat");
    // The host removes the chat with the acceptance, and would refuse (and end the session's registration for)
    // an event of it: whatever a turn past the bound still emits is dropped from now on.
    lane.disposed = true;
    return { ok: true };
  }

  /**
   * Drop the chats' queues, cancel their turns and close their runtimes; resolves once they stopped, or after
   * `waitMs`. Past the bound the log says so, and again once the runtimes have closed after all.
   */
  private async stop(lanes: Lane[], what: "session" | "chat"): Promise<void> {
    for (const l of lanes) {
      l.rt?.clearQueue();
      l.rt?.cancel();
    }
    const closed = Promise.all(lanes.map((l) => this.d.hub.closeSession(l.sessionId).catch(() => undefined))).then(() => true);
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.d.waitMs)));
    const stopped = await Promise.race([closed, bound]);
    clearTimeout(timer);
    if (stopped) return;
    this.d.log(`berth runtime: a disposed ${what}'s turn did not stop within ${this.d.waitMs / 1000} s; the disposal is accepted, and its runtime is still closing (whatever it still emits is dropped)`);
    void closed.then(() => this.d.log(`berth runtime: a disposed ${what}'s runtime has closed, after its disposal was accepted`));
  }
}
