/**
 * The end of `berth acp`'s input (the editor closed stdin), held back from the SDK until the requests read before it
 * have been answered. The SDK, the moment its input ends, aborts every request it is still handling and refuses every
 * write: a `session/new` read just before the end stored a session whose id the editor never learned.
 *
 * Contracts:
 * - When the input ends, the `onEnd` listeners run at once, in the order they were added (the connection cancels its
 *   running turns; Berth's requests to the editor still waited for are withdrawn: wire.ts).
 * - The SDK is handed the end only once every request read before it (a JSON-RPC 2.0 request with an id, as it
 *   reaches this stage: duplicates are refused before it) has been answered, i.e. its answer was handed past the SDK
 *   to the output, where the SDK's close no longer drops it.
 * - Bounded, so that nothing keeps the process alive for ever: the end is handed on anyway once `END_IDLE_MS` pass
 *   in which no frame is written and none is being written (a wedged handler), or once one frame's write has been
 *   pending for `END_STALL_MS` (an editor holding stdout open without reading it: no answer can reach it). Every
 *   written frame restarts the count (a replay or a cancelled turn's last updates are progress).
 * - Messages are never reordered, dropped or changed.
 */
import type { AnyMessage, Stream } from "@agentclientprotocol/sdk";
import { OUTPUT_GRACE_MS } from "../../transport/line-writer.js";

/** How long the end waits while nothing is written or being written. */
export const END_IDLE_MS = 10_000;
/** How long the end waits on one frame's pending write: the output grace of every stdio door. */
export const END_STALL_MS = OUTPUT_GRACE_MS;

/** Why the end was handed on with requests unanswered, and how many. */
export interface GaveUp {
  why: "idle" | "stalled";
  unanswered: number;
}

/** The timer functions the hold uses (tests inject a clock). */
export interface EndTimers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const realTimers: EndTimers = {
  set: (fn, ms) => setTimeout(fn, ms).unref(),
  clear: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface HeldEnd {
  stream: Stream;
  /** Runs `listener` when the input ends, before the wait for the answers starts. */
  onEnd(listener: () => void): void;
}

type Id = string | number | null;
const isId = (v: unknown): v is Id => v === null || typeof v === "string" || (typeof v === "number" && Number.isFinite(v));
const isRequest = (m: AnyMessage): m is AnyMessage & { id: Id; method: string } =>
  (m as { jsonrpc?: unknown }).jsonrpc === "2.0" && "method" in m && typeof m.method === "string" && "id" in m && isId(m.id);

export interface EndOptions {
  idleMs?: number;
  stallMs?: number;
  timers?: EndTimers;
  /** Called when a bound hands the end on with requests still unanswered. */
  onGiveUp?: (g: GaveUp) => void;
}

export function holdInputEnd(s: Stream, o: EndOptions = {}): HeldEnd {
  const idleMs = o.idleMs ?? END_IDLE_MS;
  const stallMs = o.stallMs ?? END_STALL_MS;
  const timers = o.timers ?? realTimers;
  /** Requests read and not yet answered. */
  const open = new Set<Id>();
  const listeners: Array<() => void> = [];
  /** Frames whose write through this stage has not finished. */
  let writing = 0;
  /** While the end is held: re-decides after anything was written. */
  let recheck: (() => void) | null = null;
  const readable = s.readable.pipeThrough(
    new TransformStream<AnyMessage, AnyMessage>({
      transform(msg, ctl) {
        if (isRequest(msg)) open.add(msg.id);
        ctl.enqueue(msg);
      },
      flush() {
        for (const listener of listeners) listener();
        return new Promise<void>((resolve) => {
          let timer: unknown = null;
          const release = (): void => {
            if (timer !== null) timers.clear(timer);
            timer = null;
            recheck = null;
            resolve();
          };
          recheck = () => {
            if (timer !== null) timers.clear(timer);
            timer = null;
            if (open.size === 0) return release();
            const why = writing > 0 ? "stalled" : "idle";
            timer = timers.set(() => {
              timer = null;
              o.onGiveUp?.({ why, unanswered: open.size });
              release();
            }, why === "stalled" ? stallMs : idleMs);
          };
          recheck();
        });
      },
    }),
  );
  const writer = s.writable.getWriter();
  const writable = new WritableStream<AnyMessage>({
    async write(msg) {
      if (!("method" in msg) && "id" in msg && isId(msg.id)) open.delete(msg.id);
      writing++;
      recheck?.();
      try {
        await writer.write(msg);
      } finally {
        writing--;
        recheck?.();
      }
    },
    close: () => writer.close(),
    abort: (reason) => writer.abort(reason),
  });
  return { stream: { readable, writable }, onEnd: (listener) => void listeners.push(listener) };
}
