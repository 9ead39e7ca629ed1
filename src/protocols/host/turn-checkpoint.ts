/**
 * Active turns across a host restart (spec "Managed transcript continuity": "On a new backend
 * incarnation or restored disconnected host, an existing active ... turn is marked
 * output-discontinuous"). Contracts:
 *  - a chat's active turn is checkpointed with the chat row (`chats.extra.activeTurn`): at once
 *    (next store commit) when it starts, then after changes at most every CHECKPOINT_MS, and less
 *    often for a large turn (at most about CHECKPOINT_BYTES_PER_MS of checkpoint text on average, so
 *    a long turn near the 4 MiB text bound cannot multiply disk writes); `flushAll` (host shutdown)
 *    writes every pending checkpoint. After a crash the restored turn holds a prefix of what was
 *    announced (everything up to the last checkpoint); after a clean stop, all of it;
 *  - a restored turn is `restored` (output-discontinuous): its received parts are kept and it never
 *    ends as a success (reconcile.ts decides how it ends);
 *  - the checkpoint is dropped with the turn's end (the completed turn is then a turn row).
 */
import { REFUSED_NOTE_SUFFIX, type ChatModel, type Json, type TurnModel } from "./model.js";

/** A part ID the host assigns: `p<N>`, or a refused-delta note's `p<N>-refused`. */
const PART_ID = new RegExp(`^p(\\d+)(?:${REFUSED_NOTE_SUFFIX})?$`);

/** The shortest interval between checkpoints of running turns. */
export const CHECKPOINT_MS = 1000;
/** Checkpoint text written per millisecond, on average, at most (≈ 1 MiB/s). */
export const CHECKPOINT_BYTES_PER_MS = 1024;

/** The durable form of an active turn (no monotonic clock). */
export function turnCheckpoint(t: TurnModel): Json {
  const out: Json = { id: t.id, startedAt: t.startedAt, message: t.message, responseParts: t.responseParts };
  if (t.usage !== undefined) out.usage = t.usage;
  if (t.textChars !== undefined) out.textChars = t.textChars;
  if (t.truncated !== undefined) out.truncated = t.truncated;
  return out;
}

/** A checkpointed active turn read back after a restart; undefined when malformed. */
export function restoreTurn(saved: unknown, nowMs = Date.now()): TurnModel | undefined {
  if (!saved || typeof saved !== "object") return undefined;
  const j = saved as Json;
  if (typeof j.id !== "string" || typeof j.startedAt !== "string" || !j.message || typeof j.message !== "object" || !Array.isArray(j.responseParts)) return undefined;
  const started = Date.parse(j.startedAt);
  const elapsed = Number.isFinite(started) ? Math.max(0, nowMs - started) : 0;
  const t: TurnModel = { id: j.id, startedAt: j.startedAt, startedMono: performance.now() - elapsed, message: j.message as Json, responseParts: j.responseParts as Json[], restored: true };
  if (j.usage && typeof j.usage === "object") t.usage = j.usage as Json;
  if (typeof j.textChars === "number") t.textChars = j.textChars;
  if (j.truncated === true || j.truncated === "announced") t.truncated = j.truncated;
  const last = t.responseParts[t.responseParts.length - 1];
  if (last && typeof last.id === "string" && last.id.endsWith(REFUSED_NOTE_SUFFIX)) t.noteAt = t.responseParts.length - 1;
  return t;
}

/** The highest `p<N>` part ID of a turn, notes' `p<N>-refused` included (new parts of a restored turn continue after it). */
export function maxPartSeq(t: TurnModel): number {
  let n = 0;
  for (const p of t.responseParts) {
    const m = typeof p.id === "string" ? PART_ID.exec(p.id) : null;
    if (m) n = Math.max(n, Number(m[1]));
  }
  return n;
}

/** Coalesces active-turn checkpoints: a new turn on the next tick, later changes at a bounded rate. */
export class TurnCheckpoints {
  private readonly dirty = new Set<ChatModel>();
  private soon: NodeJS.Immediate | undefined;
  private later: NodeJS.Timeout | undefined;
  private delayMs = CHECKPOINT_MS;

  /** `write` persists the chat (its active turn with it) and returns the checkpoint's size in characters. */
  constructor(private readonly write: (c: ChatModel) => number) {}

  /** The chat's active turn changed; a turn that just `started` is written on the next tick. */
  touch(c: ChatModel, started: boolean): void {
    this.dirty.add(c);
    if (started) {
      this.soon ??= setImmediate(() => this.flushAll());
    } else if (this.later === undefined && this.soon === undefined) {
      this.later = setTimeout(() => this.flushAll(), this.delayMs);
      this.later.unref();
    }
  }

  /** The chat was written anyway (its turn started or ended): nothing pending for it. */
  written(c: ChatModel): void {
    this.dirty.delete(c);
  }

  /** Write every pending checkpoint now. */
  flushAll(): void {
    if (this.soon !== undefined) clearImmediate(this.soon);
    if (this.later !== undefined) clearTimeout(this.later);
    this.soon = undefined;
    this.later = undefined;
    const list = [...this.dirty];
    this.dirty.clear();
    let size = 0;
    for (const c of list) size += this.write(c);
    this.delayMs = Math.max(CHECKPOINT_MS, Math.round(size / CHECKPOINT_BYTES_PER_MS));
  }
}
