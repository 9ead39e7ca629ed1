/**
 * Per-process attachments: which sessions this service holds a writer lease for, and why.
 *
 * Contracts (app-service §Attachments, protocol-neutral here):
 * - At most `maxAttachments` (16) explicit + implicit attachments, counting acquisitions in progress;
 *   one more throws `SessionError("limit")`. List/replay never attach.
 * - `create`/`open` make an explicit attachment; reopening reuses it; opening an implicit (turn-held) one makes it
 *   explicit. Opening a closing attachment throws `busy`.
 * - `beginTurn` reuses the attachment or acquires an implicit one; a second active turn, or a closing attachment,
 *   throws `busy`. The caller must call `TurnLease.end()` exactly once, after the terminal record's write attempt
 *   and worker cleanup (also on failure/cancellation). `end()` releases an implicit attachment, and a closing one.
 * - `close(id)`: not attached here → "closed" (never touches another process's lease; valid for missing sessions);
 *   attached and idle → flush, release → "closed"; active turn → mark closing, invoke the turn's cancel callback once,
 *   → "closing" (repeatable) until `end()`.
 * - `settleInterrupted(id)` takes and releases the lease at once, closing a dead writer's open turn on the way.
 * - `settledHistory(id, bounds)` is the history a door shows when it opens a session without keeping its lease (ACP's
 *   `session/load`): a last turn left open is settled first, as by `settleInterrupted`, when no live process holds
 *   the lease; when one does, it is running that turn (`running: "elsewhere"`, or `"here"` for this process), and the
 *   history is returned as it is. Settling needs an attachment slot for its moment: none free throws `limit`.
 *   Settling takes the lease as a settle-only one (store `acquire` `settleOnly`), and waits for another process's
 *   settle (any door's open) rather than taking it for a running turn: once the lease is found held by a live
 *   process that is not settling, the history is read again, and a turn ended by now is not reported running.
 * - `drain()` (EOF/output failure, after turns were cancelled and drained) releases every attachment.
 * - A lease found lost detaches its idle attachment, so a later open re-acquires it.
 */
import { SessionError } from "./errors.js";
import { isValidSessionId } from "./ids.js";
import { openTurnOf } from "./interrupted.js";
import type { History, HistoryBounds, SessionHandle, SessionStore } from "./store.js";
import type { SessionWriter } from "./writer.js";

export type CloseStatus = "closed" | "closing";

export interface TurnLease {
  readonly sessionId: string;
  readonly writer: SessionWriter;
  /** True when this turn created the session (no `session_id` given). */
  readonly created: boolean;
  /** Call once after the terminal write attempt and cleanup. Idempotent. */
  end(): Promise<void>;
}

export interface BeginTurnOptions {
  /** Existing session, or null to create one (implicitly attached). */
  sessionId: string | null;
  /** Working directory recorded in the header when a session is created. */
  cwd: string;
  /** Invoked (once) when `close` is requested during this turn: the turn loop should cancel. */
  onCloseRequested: () => void;
}

interface Attachment {
  handle: SessionHandle;
  explicit: boolean;
  closing: boolean;
  turn: { onCloseRequested: () => void; cancelRequested: boolean } | null;
}

export class SessionManager {
  private readonly attached = new Map<string, Attachment>();
  /** IDs whose lease acquisition is in progress (they hold a slot). */
  private readonly pending = new Set<string>();
  private pendingAnonymous = 0;

  constructor(
    readonly store: SessionStore,
    private readonly maxAttachments = 16,
  ) {}

  get attachmentCount(): number {
    return this.attached.size + this.pending.size + this.pendingAnonymous;
  }

  isAttached(id: string): boolean {
    return this.attached.has(id);
  }

  private reserveSlot(): void {
    if (this.attachmentCount >= this.maxAttachments) throw new SessionError("limit");
  }

  private adopt(handle: SessionHandle, explicit: boolean): Attachment {
    const a: Attachment = { handle, explicit, closing: false, turn: null };
    this.attached.set(handle.id, a);
    handle.lease.onLost(() => {
      if (this.attached.get(handle.id) === a && a.turn === null) {
        this.attached.delete(handle.id);
        void handle.release();
      }
    });
    return a;
  }

  /** Creates a session durably and attaches it explicitly. */
  async create(cwd: string): Promise<string> {
    this.reserveSlot();
    this.pendingAnonymous++;
    let handle: SessionHandle;
    try {
      handle = await this.store.create(cwd);
    } finally {
      this.pendingAnonymous--;
    }
    this.adopt(handle, true);
    return handle.id;
  }

  /** Attaches an existing session explicitly (reuse in this process; `busy` if another holds it). */
  async open(id: string): Promise<void> {
    if (!isValidSessionId(id)) throw new SessionError("invalid_id");
    const a = await this.attach(id);
    a.explicit = true;
  }

  private async attach(id: string): Promise<Attachment> {
    const existing = this.attached.get(id);
    if (existing) {
      if (existing.closing) throw new SessionError("busy");
      if (!existing.handle.lease.lost) return existing;
      if (existing.turn) throw new SessionError("busy");
      this.attached.delete(id);
      await existing.handle.release();
    }
    if (this.pending.has(id)) throw new SessionError("busy");
    this.reserveSlot();
    this.pending.add(id);
    let handle: SessionHandle;
    try {
      handle = await this.store.acquire(id, { closeInterrupted: true }); // docs/sessions.md, "Crash and resume"
    } finally {
      this.pending.delete(id);
    }
    return this.adopt(handle, false);
  }

  async beginTurn(opts: BeginTurnOptions): Promise<TurnLease> {
    let a: Attachment;
    let created = false;
    if (opts.sessionId === null) {
      this.reserveSlot();
      this.pendingAnonymous++;
      let handle: SessionHandle;
      try {
        handle = await this.store.create(opts.cwd);
      } finally {
        this.pendingAnonymous--;
      }
      a = this.adopt(handle, false);
      created = true;
    } else {
      if (!isValidSessionId(opts.sessionId)) throw new SessionError("invalid_id");
      a = await this.attach(opts.sessionId);
      if (a.turn !== null) throw new SessionError("busy");
    }
    const turn = { onCloseRequested: opts.onCloseRequested, cancelRequested: false };
    a.turn = turn;
    let ended: Promise<void> | null = null;
    return {
      sessionId: a.handle.id,
      writer: a.handle.writer,
      created,
      end: () =>
        (ended ??= (async () => {
          if (a.turn === turn) a.turn = null;
          if (this.attached.get(a.handle.id) !== a) return;
          if (!a.explicit || a.closing || a.handle.lease.lost) {
            this.attached.delete(a.handle.id);
            await a.handle.release();
          } else {
            await a.handle.writer.flush().catch(() => undefined);
          }
        })()),
    };
  }

  /**
   * Closes the turn a dead writer left open in session `id`, as any attach does (docs/sessions.md, "Crash and
   * resume"), without keeping the session attached. True when this call took the lease (and so settled whatever was
   * open); false when this process holds it already (its attach settled it; its own turn may be running), another
   * live process holds it (its turn is running, not interrupted), no attachment slot is free, or the session cannot
   * be opened or written now. Never throws.
   */
  async settleInterrupted(id: string): Promise<boolean> {
    if (!isValidSessionId(id) || this.attached.has(id) || this.pending.has(id) || this.attachmentCount >= this.maxAttachments) return false;
    this.pending.add(id);
    try {
      const handle = await this.store.acquire(id, { closeInterrupted: true, settleOnly: true });
      await handle.release();
      return true;
    } catch {
      return false;
    } finally {
      this.pending.delete(id);
    }
  }

  /**
   * The history of session `id` (`store.readHistory` within `bounds`) for a door about to show it without keeping
   * its lease, its last turn settled when a dead writer left it open (the lease taken and released at once, as
   * `settleInterrupted`). `running` names who runs a last turn that is still open: this process (`"here"`: it holds
   * or is taking the lease) or another live one (`"elsewhere"`: it holds the lease); null once every turn ended.
   * Throws the store's errors (`unavailable` for a missing session, a storage cause), and `limit` when settling needs
   * a slot and none is free.
   */
  async settledHistory(id: string, bounds: HistoryBounds): Promise<{ history: History; running: "here" | "elsewhere" | null }> {
    const read = async (): Promise<{ history: History; open: boolean }> => {
      const history = await this.store.readHistory(id, bounds);
      // A checkpoint after a turn's terminal (a compaction between turns) leaves no turn open.
      return { history, open: openTurnOf(history.records) !== null };
    };
    const here = (): boolean => this.attached.has(id) || this.pending.has(id);
    const { history, open } = await read();
    if (!open) return { history, running: null };
    if (here()) return { history, running: "here" };
    this.reserveSlot();
    this.pending.add(id);
    try {
      const handle = await this.store.acquire(id, { closeInterrupted: true, settleOnly: true });
      await handle.release();
    } catch (e) {
      if (!(e instanceof SessionError && e.code === "busy")) throw e;
      // A live holder that is not settling (a holder settling was waited for): it may have settled the turn itself
      // (another door's open) and keeps the lease with every turn ended, or it runs the turn.
      const again = await read();
      return { history: again.history, running: again.open ? "elsewhere" : null };
    } finally {
      this.pending.delete(id);
    }
    // Settled; a turn open now was started after the release (by this process or another).
    const again = await read();
    return { history: again.history, running: !again.open ? null : here() ? "here" : "elsewhere" };
  }

  /** See the module contract. Throws only `invalid_id`. */
  async close(id: string): Promise<CloseStatus> {
    if (!isValidSessionId(id)) throw new SessionError("invalid_id");
    const a = this.attached.get(id);
    if (!a) return "closed";
    if (a.turn !== null) {
      a.closing = true;
      if (!a.turn.cancelRequested) {
        a.turn.cancelRequested = true;
        a.turn.onCloseRequested();
      }
      return "closing";
    }
    this.attached.delete(id);
    await a.handle.release();
    return "closed";
  }

  /** Releases every attachment (call after active turns have ended). Idempotent. */
  async drain(): Promise<void> {
    const all = [...this.attached.values()];
    this.attached.clear();
    await Promise.all(all.map((a) => a.handle.release()));
  }
}
