/**
 * Ordered, backpressure-aware line output over a Writable (stdout, a socket).
 * Contract:
 * - Lines are written in `enqueue` order; queued lines are coalesced into one `write` per flush.
 * - `flush()` hands everything queued to the stream now (unless the stream asked us to wait for 'drain').
 * - `writable()` resolves once the stream is not applying backpressure and the queue is below the high-water mark;
 *   producers await it to propagate backpressure (nothing is dropped). When the output can take more right now it
 *   returns `WRITABLE_NOW` (one shared, already resolved promise), so a hot producer may skip the await by identity.
 * - After a stream error the writer is `broken`: further lines are discarded and `onBroken` fires once.
 * - `close()` is idempotent: flushes, waits for drain, and resolves; it never ends the underlying stream
 *   (stdout belongs to the process).
 */
import type { Writable } from "node:stream";

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

  writable(): Promise<void> {
    if (!this.pressured || this.broken) return WRITABLE_NOW;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  close(): Promise<void> {
    this.closed ??= (async () => {
      this.flush();
      while (!this.broken && (this.waitingDrain || this.queue.length > 0)) {
        await new Promise<void>((r) => this.waiters.push(r));
        this.flush();
      }
      if (this.broken) return;
      // Wait until everything handed to the stream has been accepted by the OS.
      await new Promise<void>((resolve) => {
        if (this.stream.writableLength === 0) return resolve();
        this.stream.write("", () => resolve());
      });
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
