/**
 * History resync after a registration (spec `registered.sourceCursor` / `sourceCursors`): every idle chat whose
 * host cursor (the last turn the host holds) is a turn of its Berth session gets the completed turns after it as
 * v11 `source_turn` snapshots (closed), in order, so turns another door ran while the host held the session reach
 * it. A cursor the Berth session does not hold exports nothing (the registration's `history` is the page a host
 * without the session gets); each chat is resynced at most once per cursor, so a refusal can never loop.
 */
import { readTurns, RECENT_WINDOW } from "../../runtime/session/transcript.js";
import type { SessionManager } from "../../store/sessions/index.js";
import type { Lane } from "./chats.js";
import { historyTurn } from "./parse.js";
import { lanesOf, type LiveSession } from "./sessions.js";
import type { Json } from "../../core/json-bounds.js";

export interface ResyncDeps {
  manager: SessionManager;
  /** Send one sequenced event for a chat (resolves once the socket took it). */
  emit(s: LiveSession, lane: Lane, event: Json): void | Promise<void>;
  sourceOf(sessionId: string): string;
}

export class HistoryResync {
  /** Chats already resynced, by `<Berth session id>\0<host cursor>` (at most once each: never a refusal loop). */
  private readonly resynced = new Set<string>();
  private resyncs: Promise<void> = Promise.resolve();

  constructor(private readonly d: ResyncDeps) {}

  /** Queue the resync of registration `logicalId` of `s` (one at a time, in registration order). */
  begin(s: LiveSession, cursors: Record<string, unknown>, logicalId: string | undefined): void {
    this.resyncs = this.resyncs.then(() => this.resync(s, cursors, logicalId)).catch(() => undefined);
  }

  /** Resolves once every resync begun so far has finished. */
  settled(): Promise<void> {
    return this.resyncs;
  }

  /** Export the completed turns each idle chat has after the host's cursor (see the module contract). */
  private async resync(s: LiveSession, cursors: Record<string, unknown>, logicalId: string | undefined): Promise<void> {
    for (const lane of lanesOf(s)) {
      const chat = lane === s.primary ? s.primaryChat : lane.chatUri;
      const cursor = chat !== undefined ? cursors[chat] : undefined;
      const busy = (): boolean => lane.rt?.busy === true || lane.held !== null;
      if (typeof cursor !== "string" || busy()) continue;
      const key = `${lane.sessionId}\0${cursor}`;
      if (this.resynced.has(key)) continue;
      this.resynced.add(key);
      let turns;
      let at = -1;
      try {
        // The cursor is usually the newest turn: the recent tail answers; the whole window only when needed.
        turns = await readTurns(this.d.manager, lane.sessionId, RECENT_WINDOW);
        at = turns.findIndex((t) => t.id === cursor);
        if (at === -1) {
          turns = await readTurns(this.d.manager, lane.sessionId);
          at = turns.findIndex((t) => t.id === cursor);
        }
      } catch {
        continue; // unreadable now: the next registration tries again with its own cursor
      }
      if (at === -1) continue;
      for (const t of turns.slice(at + 1)) {
        if (!t.ended || s.logicalId !== logicalId || busy()) break; // in order, and only while this registration stands
        // Not history-only: a closed snapshot of the turn the host still shows live (the runtime ended it while the
        // host was away) closes it authoritatively; any other turn is placed the same either way.
        await this.d.emit(s, lane, { type: "source_turn", sourceId: this.d.sourceOf(s.entry.sessionId), active: false, historyOnly: false, turn: historyTurn(t) });
      }
    }
  }
}
