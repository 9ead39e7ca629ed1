/**
 * A session's `session/update`s waiting to be written, one at a time, in order.
 *
 * Contracts:
 * - Updates are written one after another in push order; `push` resolves once its update (or the queued update it
 *   was folded into) was written, or failed to be: it never rejects. `flush` resolves once everything pushed so far
 *   was.
 * - While at most `COALESCE_AFTER` updates wait (an editor that reads), every update is written as it was pushed.
 *   Past that (the editor holds stdout open without reading it), an update that supersedes one still waiting is
 *   folded into it instead of queued: a `tool_call_update` into the waiting `tool_call` / `tool_call_update` of the
 *   same call (its fields replace the earlier ones, as ACP's update semantics say), a `plan` or `usage_update` replaces
 *   the waiting one, a `session_info_update` merges into the waiting one, and a text chunk (message or thought) is
 *   appended to a waiting chunk of the same kind right before it. The editor then reads each call's final state once,
 *   where the call first appeared, so what waits is bounded by the calls of the running turn (the runtime's step and
 *   per-response bounds), not by every status change; a turn's answer waits for the queue to drain, so no more than
 *   one turn's calls wait per session.
 * - An update being written is never changed: a later one for the same call is queued behind it.
 */
import type { SessionUpdate } from "@agentclientprotocol/sdk";

/** How many updates may wait before superseded ones are folded together. */
export const COALESCE_AFTER = 32;

interface Entry {
  update: SessionUpdate;
  done: Promise<void>;
  resolve: () => void;
  key: string | null;
}

/** What a later update may be folded into: the same call, the plan, usage, session info. */
function keyOf(u: SessionUpdate): string | null {
  if (u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") return `tool:${u.toolCallId}`;
  if (u.sessionUpdate === "plan" || u.sessionUpdate === "usage_update" || u.sessionUpdate === "session_info_update") return u.sessionUpdate;
  return null;
}

/** `later` folded into `earlier` (both of one key), or null when it cannot be. */
function fold(earlier: SessionUpdate, later: SessionUpdate): SessionUpdate | null {
  if (later.sessionUpdate === "tool_call_update") {
    if (earlier.sessionUpdate !== "tool_call" && earlier.sessionUpdate !== "tool_call_update") return null;
    const merged: Record<string, unknown> = { ...earlier };
    for (const [k, v] of Object.entries(later)) if (v !== undefined && k !== "sessionUpdate") merged[k] = v;
    return merged as SessionUpdate;
  }
  if (later.sessionUpdate === "session_info_update") return earlier.sessionUpdate === "session_info_update" ? { ...earlier, ...later } : null;
  // A whole new state: a plan replaces the plan, usage the usage, a call's announcement whatever waited of it.
  if (later.sessionUpdate === "plan" || later.sessionUpdate === "usage_update" || later.sessionUpdate === "tool_call") return later;
  return null;
}

/** `later` appended to `earlier` when both are text chunks of one kind, else null. */
function append(earlier: SessionUpdate, later: SessionUpdate): SessionUpdate | null {
  if (earlier.sessionUpdate !== later.sessionUpdate) return null;
  if (later.sessionUpdate !== "agent_message_chunk" && later.sessionUpdate !== "agent_thought_chunk") return null;
  const a = (earlier as { content: { type: string; text?: string } }).content;
  const b = later.content;
  if (a.type !== "text" || b.type !== "text" || typeof a.text !== "string") return null;
  return { ...later, content: { ...b, text: a.text + b.text } };
}

export class UpdateQueue {
  private readonly waiting: Entry[] = [];
  /** Waiting entries by key (an entry being written is not here). */
  private readonly byKey = new Map<string, Entry>();
  private writing: Entry | null = null;

  constructor(private readonly write: (update: SessionUpdate) => Promise<void>) {}

  /** How many updates wait to be written (the one being written not counted). */
  get size(): number {
    return this.waiting.length;
  }

  push(update: SessionUpdate): Promise<void> {
    if (this.waiting.length >= COALESCE_AFTER) {
      const folded = this.foldIn(update);
      if (folded !== null) return folded;
    }
    let resolve!: () => void;
    const done = new Promise<void>((r) => (resolve = r));
    const key = keyOf(update);
    const e: Entry = { update, done, resolve, key };
    this.waiting.push(e);
    if (key !== null) this.byKey.set(key, e);
    if (this.writing === null) void this.pump();
    return done;
  }

  flush(): Promise<void> {
    return (this.waiting.at(-1) ?? this.writing)?.done ?? Promise.resolve();
  }

  private foldIn(update: SessionUpdate): Promise<void> | null {
    const last = this.waiting.at(-1);
    const appended = last !== undefined ? append(last.update, update) : null;
    if (last !== undefined && appended !== null) {
      last.update = appended;
      return last.done;
    }
    const key = keyOf(update);
    const e = key !== null ? this.byKey.get(key) : undefined;
    const folded = e !== undefined ? fold(e.update, update) : null;
    if (e === undefined || folded === null) return null;
    e.update = folded;
    return e.done;
  }

  private async pump(): Promise<void> {
    for (let e = this.waiting.shift(); e !== undefined; e = this.waiting.shift()) {
      if (e.key !== null && this.byKey.get(e.key) === e) this.byKey.delete(e.key);
      this.writing = e;
      try {
        await this.write(e.update);
      } catch {
        // The connection is gone: the SDK settles what is left as it closes; nothing waits on this update.
      }
      e.resolve();
    }
    this.writing = null;
  }
}
