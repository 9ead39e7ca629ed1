/**
 * Active turns across a host restart (spec "Managed transcript continuity": "On a new backend
 * incarnation or restored disconnected host, an existing active ... turn is marked
 * output-discontinuous"). Contracts:
 *  - a chat's active turn is checkpointed with the chat row (`chats.extra.activeTurn`): at once
 *    (next store commit) when it starts and on every structural change (a new response part, a
 *    tool call, an input request, usage), and at most every CHECKPOINT_TEXT_MS while only streamed
 *    text grows; `flushAll` (host shutdown) writes every pending checkpoint. So after a crash the
 *    restored turn holds every part that was announced and a prefix of the streamed text;
 *  - a restored turn is `restored` (output-discontinuous): its received parts are kept and it never
 *    ends as a success (reconcile.ts decides how it ends);
 *  - the checkpoint is dropped with the turn's end (the completed turn is then a turn row).
 */
import type { ChatModel, Json, TurnModel } from "./model.js";

/** How long streamed text may stay un-checkpointed while a turn runs. */
export const CHECKPOINT_TEXT_MS = 1000;

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
  return t;
}

/** The highest `p<N>` part ID of a turn (new parts of a restored turn continue after it). */
export function maxPartSeq(t: TurnModel): number {
  let n = 0;
  for (const p of t.responseParts) {
    const m = typeof p.id === "string" ? /^p(\d+)$/.exec(p.id) : null;
    if (m) n = Math.max(n, Number(m[1]));
  }
  return n;
}

/** Coalesces active-turn checkpoints: structural changes on the next tick, text at most every CHECKPOINT_TEXT_MS. */
export class TurnCheckpoints {
  private readonly dirty = new Set<ChatModel>();
  private soon: NodeJS.Immediate | undefined;
  private later: NodeJS.Timeout | undefined;

  constructor(private readonly write: (c: ChatModel) => void) {}

  /** The chat's active turn changed; `structural` changes are written on the next tick. */
  touch(c: ChatModel, structural: boolean): void {
    this.dirty.add(c);
    if (structural) {
      this.soon ??= setImmediate(() => this.flushAll());
    } else if (this.later === undefined && this.soon === undefined) {
      this.later = setTimeout(() => this.flushAll(), CHECKPOINT_TEXT_MS);
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
    for (const c of list) this.write(c);
  }
}
