/**
 * A session's prompt queue with revisions. Contracts:
 * - IDs are fresh UUIDs, never reused; a new entry has revision 1; `update` and `move` add one.
 * - `update`/`move`/`remove` apply only to queued entries and check the caller's revision: an unknown ID is
 *   `not_found`, a stale revision `conflict` carrying the current entry (nothing changes).
 * - Order is FIFO except for moves; `shift` takes the head.
 * - `update` drops an entry's `origin`: a server-started prompt a client rewrote is the client's prompt now (a
 *   report turn's `origin.jobs` would otherwise claim jobs whose results its prompt no longer shows).
 * The queue emits nothing itself: `SessionRuntime` reports each change as an event.
 */
import { randomUUID } from "../../store/random.js";
import type { QueueEntry, QueueResult, TurnOrigin, UserAttachment } from "./types.js";

/** A queued entry plus what it needs to run but the wire does not show. */
export interface Queued {
  entry: QueueEntry;
  noTools: boolean;
  turnId?: string;
  origin?: TurnOrigin;
}

const copy = (e: QueueEntry): QueueEntry => ({ ...e, ...(e.attachments !== undefined ? { attachments: e.attachments.map((a) => ({ ...a })) } : {}) });

export class SessionQueue {
  private items: Queued[] = [];

  constructor(private readonly newId: () => string = randomUUID) {}

  get length(): number {
    return this.items.length;
  }

  snapshot(): QueueEntry[] {
    return this.items.map((q) => copy(q.entry));
  }

  /** Appends (or, with `front`, puts at the head) a new entry. */
  add(prompt: string, submitter: string, attachments: UserAttachment[] | undefined, noTools: boolean, turnId?: string, front = false, origin?: TurnOrigin): Queued {
    const entry: QueueEntry = { queue_id: this.newId(), revision: 1, prompt, submitter, ...(attachments !== undefined && attachments.length > 0 ? { attachments } : {}) };
    const q: Queued = { entry, noTools, ...(turnId !== undefined ? { turnId } : {}), ...(origin !== undefined ? { origin } : {}) };
    if (front) this.items.unshift(q);
    else this.items.push(q);
    return q;
  }

  shift(): Queued | undefined {
    return this.items.shift();
  }

  private check(id: string, revision: number): QueueResult & { index?: number } {
    const index = this.items.findIndex((q) => q.entry.queue_id === id);
    const q = this.items[index];
    if (q === undefined) return { ok: false, error: "not_found" };
    if (q.entry.revision !== revision) return { ok: false, error: "conflict", current: copy(q.entry) };
    return { ok: true, entry: q.entry, index };
  }

  update(id: string, revision: number, prompt: string): QueueResult {
    const r = this.check(id, revision);
    if (!r.ok) return r;
    delete (this.items[r.index as number] as Queued).origin;
    r.entry.prompt = prompt;
    r.entry.revision++;
    return { ok: true, entry: copy(r.entry) };
  }

  /** Moves the entry before `beforeId` (null: to the end). `beforeId` must be another queued entry. */
  move(id: string, revision: number, beforeId: string | null): QueueResult {
    const r = this.check(id, revision);
    if (!r.ok) return r;
    if (beforeId !== null && (beforeId === id || !this.items.some((q) => q.entry.queue_id === beforeId))) return { ok: false, error: "not_found" };
    const [q] = this.items.splice(r.index as number, 1) as [Queued];
    const at = beforeId === null ? this.items.length : this.items.findIndex((x) => x.entry.queue_id === beforeId);
    this.items.splice(at, 0, q);
    q.entry.revision++;
    return { ok: true, entry: copy(q.entry) };
  }

  remove(id: string, revision: number): QueueResult {
    const r = this.check(id, revision);
    if (!r.ok) return r;
    this.items.splice(r.index as number, 1);
    return { ok: true, entry: copy(r.entry) };
  }

  /** The entry after `id` (null when last). */
  nextOf(id: string): string | null {
    const i = this.items.findIndex((q) => q.entry.queue_id === id);
    return this.items[i + 1]?.entry.queue_id ?? null;
  }

  clear(): QueueEntry[] {
    const all = this.items.map((q) => q.entry);
    this.items = [];
    return all;
  }
}
