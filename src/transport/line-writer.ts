/**
 * Ordered, backpressure-aware line output over a Writable (stdout, a socket).
 * Contract:
 * - Lines are written in `enqueue` order; queued lines are coalesced into one `write` per flush.
 * - `flush()` hands everything queued to the stream now (unless the stream asked us to wait for 'drain').
 * - `writable()` resolves once the stream is not applying backpressure and the queue is below the high-water mark;
 *   producers await it to propagate backpressure (nothing is dropped). When the output can take more right now it
 *   returns `WRITABLE_NOW` (one shared, already resolved promise), so a hot producer may skip the await by identity.
 *   After `unthrottle()` (the connection is ending) it always does.
 * - After a stream error the writer is `broken`: further lines are discarded and `onBroken` fires once.
 * - `close(graceMs)` is idempotent: flushes, waits until the stream has taken everything, and resolves; it never ends
 *   the underlying stream (stdout belongs to the process). With `graceMs` it stops waiting once nothing queued or
 *   pending in the stream moved for that long (a peer that holds the stream open without reading it); `abandoned`
 *   then says output was left behind.
 */
import type { Writable } from "node:stream";

/**
 * How long a closing writer waits for output that makes no progress before it leaves it behind (`close(graceMs)`):
 * long enough for a client that still reads, short enough that one holding the stream open unread does not keep a
 * process (and what it holds) alive.
 */
export const OUTPUT_GRACE_MS = 2000;

/**
 * Resolves true once `stream` has handed every pending write to the OS (or cannot take one: destroyed), false once its
 * pending bytes did not fall for `graceMs` (a peer that holds the stream open without reading it).
 */
export async function writesSettled(stream: Writable, graceMs = Infinity): Promise<boolean> {
  for (;;) {
    const pending = stream.writableLength;
    if (pending === 0 || stream.destroyed) return true;
    // An empty write's callback runs once every write queued before it is done (or the stream failed).
    const flushed = await new Promise<boolean>((resolve) => {
      const timer = Number.isFinite(graceMs) ? setTimeout(() => resolve(false), graceMs) : undefined;
      stream.write("", () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    if (flushed) return true;
    if (stream.writableLength >= pending) return false;
  }
}

/** What `writable()` returns whenever the output can take more right now. */
export const WRITABLE_NOW: Promise<void> = Promise.resolve();

export class LineWriter {
  private queue: string[] = [];
  private queuedBytes = 0;
  private waitingDrain = false;
  private scheduled = false;
  private waiters: Array<() => void> = [];
  private closed: Promise<void> | null = null;
  broken = false;
  private unthrottled = false;
  /** `close` stopped waiting for a stream that took nothing for its grace period; output was left behind. */
  abandoned = false;

  constructor(
    private readonly stream: Writable,
    /** Undefined members take their defaults. */
    private readonly opts: { highWaterBytes?: number | undefined; onBroken?: ((err: unknown) => void) | undefined } = {},
  ) {
    stream.on("drain", () => {
      this.waitingDrain = false;
      this.flush();
      this.wake();
    });
    stream.on("error", (err) => this.fail(err));
  }

  /** Queues one complete line (the caller includes no trailing LF). Flushes on the next turn of the event loop. */
  enqueue(line: string): void {
    if (this.broken) return;
    this.queue.push(line);
    this.queuedBytes += line.length;
    if (!this.scheduled && !this.waitingDrain) {
      this.scheduled = true;
      setImmediate(this.scheduledFlush);
    }
  }

  private readonly scheduledFlush = (): void => {
    this.scheduled = false;
    this.flush();
  };

  flush(): void {
    if (this.broken || this.waitingDrain || this.queue.length === 0) return;
    const q = this.queue;
    const text = q.length === 1 ? q[0] + "\n" : q.join("\n") + "\n";
    q.length = 0;
    this.queuedBytes = 0;
    let ok: boolean;
    try {
      ok = this.stream.write(text);
    } catch (err) {
      this.fail(err);
      return;
    }
    if (!ok) this.waitingDrain = true;
    else this.wake();
  }

  get pressured(): boolean {
    return this.waitingDrain || this.queuedBytes > (this.opts.highWaterBytes ?? 1 << 20);
  }

  /**
   * Producers stop waiting for backpressure from now on (`writable()` resolves at once; waiters are woken): for the
   * end of a connection, when what is left to write is bounded and a stalled peer must not hold the producers (and
   * so `close`) for ever. Lines are still written in order, as the stream takes them.
   */
  unthrottle(): void {
    this.unthrottled = true;
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  writable(): Promise<void> {
    if (!this.pressured || this.broken || this.unthrottled) return WRITABLE_NOW;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  close(graceMs = Infinity): Promise<void> {
    this.closed ??= (async () => {
      this.flush();
      // The queue waits for 'drain'; then what the stream holds must reach the OS (`writesSettled`).
      while (!this.broken && (this.waitingDrain || this.queue.length > 0)) {
        const left = this.queuedBytes + this.stream.writableLength;
        const moved = await new Promise<boolean>((resolve) => {
          const timer = Number.isFinite(graceMs) ? setTimeout(() => resolve(false), graceMs) : undefined;
          this.waiters.push(() => {
            clearTimeout(timer);
            resolve(true);
          });
        });
        this.flush();
        if (!moved && !this.broken && this.queuedBytes + this.stream.writableLength >= left) {
          this.abandoned = true;
          return;
        }
      }
      if (!this.broken && !(await writesSettled(this.stream, graceMs))) this.abandoned = true;
    })();
    return this.closed;
  }

  private wake(): void {
    if (this.pressured) return;
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private fail(err: unknown): void {
    if (this.broken) return;
    this.broken = true;
    this.queue = [];
    this.queuedBytes = 0;
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
    this.opts.onBroken?.(err);
  }
}
