/**
 * What the editor sent, in the order it was read: the opens (`session/load`, `session/resume`) still unanswered, and
 * the `session/cancel`s, so a request can wait for the opens read before it and tell a cancel read before it from one
 * read after it, whichever order the handlers run in. (The SDK runs handlers concurrently and reaches a method's
 * handler only after awaiting each handler registered before it: it does not promise read order among methods.)
 *
 * Contracts:
 * - `observe(s)` sees every message the SDK is handed, in order, before any handler runs for it, and every answer as
 *   it is written. Requests reaching it have ids unique among those in flight (request-ids.ts runs before it).
 * - An open is pending from its request's read until its answer is written (result or error, whether or not its
 *   handler ran): `markOf(requestId).opens` is the opens of that request's session pending when it was read, and
 *   `settled` of them gives the one answered last (the one that decides the session's state, opens of a session
 *   being answered in arrival order but for a load refused at once) with its error, if any.
 * - A `session/cancel` is noted as it is read (`onCancel` runs then, in read order) for a session open or being
 *   opened; `cancelledSince(sessionId, mark)` says whether one was read after the request whose `mark` that is.
 * - Memory: the pending opens and the marks of requests in flight, and one number per session open or being opened
 *   (`forget` drops a closed session's).
 */
import type { AnyMessage, Stream } from "@agentclientprotocol/sdk";

export type OpenMethod = "session/load" | "session/resume";

/** An open's answer: which method, and its error if it failed. */
export interface OpenOutcome {
  method: OpenMethod;
  error: { code: number; message: string } | null;
}

export interface PendingOpen {
  readonly method: OpenMethod;
  readonly answered: Promise<void>;
  outcome: (OpenOutcome & { at: number }) | null;
}

/** What was true when a request naming a session was read. */
export interface ReadMark {
  /** Opens of its session read before it and not yet answered then. */
  readonly opens: readonly PendingOpen[];
  /** The count of cancels read before it. */
  readonly cancels: number;
}

const OPENS = new Set<string>(["session/load", "session/resume"]);
const WAITERS = new Set<string>(["session/prompt", "session/set_mode", "session/set_config_option"]);

const key = (id: unknown): string => JSON.stringify(id);
const sessionOf = (msg: AnyMessage): string | undefined => {
  const p = (msg as { params?: unknown }).params;
  const id = typeof p === "object" && p !== null ? (p as { sessionId?: unknown }).sessionId : undefined;
  return typeof id === "string" ? id : undefined;
};

export class ReadOrder {
  /** Opens read and not answered, per session, in read order. */
  private readonly opens = new Map<string, PendingOpen[]>();
  /** Pending opens by request id, to settle at their answer. */
  private readonly openById = new Map<string, { sessionId: string; open: PendingOpen; settle: (error: OpenOutcome["error"]) => void }>();
  /** Requests in flight that name a session, by id: what held when each was read. */
  private readonly marks = new Map<string, ReadMark>();
  /** The number of the last cancel read, per session open or being opened. */
  private readonly lastCancel = new Map<string, number>();
  private cancels = 0;
  private answers = 0;

  /** `isKnown`: whether a session is open on this connection (a cancel of one nobody opens is not noted). */
  constructor(
    private readonly isKnown: (sessionId: string) => boolean,
    private readonly onCancel: (sessionId: string) => void,
  ) {}

  observe(s: Stream): Stream {
    const readable = s.readable.pipeThrough(
      new TransformStream<AnyMessage, AnyMessage>({
        transform: (msg, ctl) => {
          this.read(msg);
          ctl.enqueue(msg);
        },
      }),
    );
    const writer = s.writable.getWriter();
    const writable = new WritableStream<AnyMessage>({
      write: (msg) => {
        this.written(msg);
        return writer.write(msg);
      },
      close: () => writer.close(),
      abort: (reason) => writer.abort(reason),
    });
    return { readable, writable };
  }

  private read(msg: AnyMessage): void {
    if (!("method" in msg)) return;
    const sessionId = sessionOf(msg);
    if (sessionId === undefined) return;
    if (!("id" in msg)) {
      if (msg.method !== "session/cancel") return;
      if (this.isKnown(sessionId) || this.opens.has(sessionId)) this.lastCancel.set(sessionId, ++this.cancels);
      this.onCancel(sessionId);
      return;
    }
    if (WAITERS.has(msg.method)) this.marks.set(key(msg.id), { opens: [...(this.opens.get(sessionId) ?? [])], cancels: this.cancels });
    else if (OPENS.has(msg.method)) this.pendOpen(key(msg.id), sessionId, msg.method as OpenMethod);
  }

  private pendOpen(id: string, sessionId: string, method: OpenMethod): void {
    let settle!: (error: OpenOutcome["error"]) => void;
    const answered = new Promise<void>((resolve) => {
      settle = (error) => {
        open.outcome = { method, error, at: ++this.answers };
        resolve();
      };
    });
    const open: PendingOpen = { method, answered, outcome: null };
    const list = this.opens.get(sessionId) ?? [];
    list.push(open);
    this.opens.set(sessionId, list);
    this.openById.set(id, { sessionId, open, settle });
  }

  private written(msg: AnyMessage): void {
    if ("method" in msg || !("id" in msg)) return;
    const id = key(msg.id);
    this.marks.delete(id);
    const open = this.openById.get(id);
    if (open === undefined) return;
    this.openById.delete(id);
    const e = (msg as { error?: { code?: unknown; message?: unknown } }).error;
    const error = e === undefined ? null : { code: typeof e.code === "number" ? e.code : -32603, message: typeof e.message === "string" ? e.message : "" };
    open.settle(error);
    const left = (this.opens.get(open.sessionId) ?? []).filter((p) => p !== open.open);
    if (left.length === 0) {
      this.opens.delete(open.sessionId);
      if (!this.isKnown(open.sessionId)) this.lastCancel.delete(open.sessionId);
    } else this.opens.set(open.sessionId, left);
  }

  /** What held when the request with this JSON-RPC id was read (undefined for one that named no session). */
  markOf(requestId: unknown): ReadMark | undefined {
    return this.marks.get(key(requestId));
  }

  /** Whether a `session/cancel` of `sessionId` was read after the request marked `mark`. */
  cancelledSince(sessionId: string, mark: ReadMark | undefined): boolean {
    return mark !== undefined && (this.lastCancel.get(sessionId) ?? 0) > mark.cancels;
  }

  /** Session `sessionId` was closed on this connection. */
  forget(sessionId: string): void {
    if (!this.opens.has(sessionId)) this.lastCancel.delete(sessionId);
  }

  /** Waits for `opens` to be answered; the one answered last, or null when there were none. */
  static async settled(opens: readonly PendingOpen[]): Promise<OpenOutcome | null> {
    await Promise.all(opens.map((o) => o.answered));
    let last: PendingOpen["outcome"] = null;
    for (const o of opens) if (o.outcome !== null && (last === null || o.outcome.at > last.at)) last = o.outcome;
    return last === null ? null : { method: last.method, error: last.error };
  }
}
