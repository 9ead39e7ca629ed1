/**
 * The SCV connection writer: one ordered, bounded frame queue in front of a Writable (stdout or a socket).
 *
 * Contract:
 * - Capacity: at most `maxFrames` frames and `maxBytes` bytes are held (queued here plus the batch the stream has not
 *   drained yet). A frame is admitted when both bounds hold after adding it, or when nothing is held (a single frame
 *   larger than `maxBytes` cannot exist: the server-frame limit is checked before emission).
 * - Order: frames leave in `emit` order. `emit` waits (FIFO) for capacity; once one caller waits, later callers wait
 *   behind it even if a smaller frame would fit, so nothing overtakes. The frame text is built only when admitted,
 *   so a builder may assign a sequence number then (`seq` order equals wire order).
 * - Nothing admitted is dropped unless the output broke. A waiting `emit` whose `signal` aborts leaves the queue and
 *   resolves `false` (its frame is never written); every other waiter keeps its place.
 * - Stall: when someone has waited for capacity and the stream made no progress for `stallMs`, `onStall` fires once
 *   (the connection then enters bounded cleanup).
 * - `close()` waits until everything admitted was handed to the OS (or the output broke); `destroy()` drops all and
 *   releases every waiter with `false`.
 */
import type { Writable } from "node:stream";

export interface WriterOptions {
  maxFrames: number;
  maxBytes: number;
  stallMs: number;
  onStall?: () => void;
  onBroken?: (err: unknown) => void;
}

interface Waiter {
  build: () => string | null;
  resolve: (ok: boolean) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

export class FrameWriter {
  private queue: string[] = [];
  private queuedBytes = 0;
  /** Frames/bytes of the batches handed to the stream since it last drained. */
  private inFlightFrames = 0;
  private inFlightBytes = 0;
  private waitingDrain = false;
  private scheduled = false;
  private waiters: Waiter[] = [];
  private stallTimer: NodeJS.Timeout | null = null;
  private stalled = false;
  private closeWaiters: Array<() => void> = [];
  broken = false;

  constructor(
    private readonly stream: Writable,
    private readonly o: WriterOptions,
  ) {
    stream.on("drain", this.onDrain);
    stream.on("error", (err) => this.fail(err));
    stream.on("close", () => this.fail(new Error("output closed")));
  }

  private readonly onDrain = (): void => {
    this.waitingDrain = false;
    this.inFlightFrames = 0;
    this.inFlightBytes = 0;
    if (this.queue.length > 0) this.flush(); // flush() ends with progress()
    else this.progress();
  };

  private fits(bytes: number): boolean {
    const frames = this.queue.length + this.inFlightFrames;
    const held = this.queuedBytes + this.inFlightBytes;
    if (frames === 0) return true;
    return frames + 1 <= this.o.maxFrames && held + bytes <= this.o.maxBytes;
  }

  /** Held frames (queued plus in flight): for tests and diagnostics. */
  get heldFrames(): number {
    return this.queue.length + this.inFlightFrames;
  }

  /**
   * Emits a frame built by `build` (called once, when admitted; returning null skips it). Resolves true once admitted,
   * false when `signal` aborted first or the output broke. Synchronous admission when there is room and no waiter.
   */
  emit(build: () => string | null, signal?: AbortSignal): boolean | Promise<boolean> {
    if (this.broken) return false;
    if (this.waiters.length === 0 && this.pendingBig === null && this.fitsSoon()) {
      const f = build();
      if (f !== null) this.admit(f);
      return true;
    }
    if (signal?.aborted) return false;
    return new Promise<boolean>((resolve) => {
      const w: Waiter = { build, resolve, signal, onAbort: undefined };
      if (signal !== undefined) {
        w.onAbort = () => {
          const i = this.waiters.indexOf(w);
          if (i >= 0) this.waiters.splice(i, 1);
          resolve(false);
          this.progress();
        };
        signal.addEventListener("abort", w.onAbort, { once: true });
      }
      this.waiters.push(w);
      this.armStall();
    });
  }

  /** Whether a typical frame fits now (the exact size is known only after building). */
  private fitsSoon(): boolean {
    return this.queue.length + this.inFlightFrames < this.o.maxFrames && this.queuedBytes + this.inFlightBytes < this.o.maxBytes;
  }

  private admit(frame: string): void {
    this.queue.push(frame);
    this.queuedBytes += Buffer.byteLength(frame);
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
    this.inFlightFrames += q.length;
    this.inFlightBytes += this.queuedBytes;
    this.queue = [];
    this.queuedBytes = 0;
    let ok: boolean;
    try {
      ok = this.stream.write(text);
    } catch (err) {
      this.fail(err);
      return;
    }
    if (!ok) this.waitingDrain = true;
    else {
      this.inFlightFrames = 0;
      this.inFlightBytes = 0;
    }
    this.progress();
  }

  /** Admits waiters in order while they fit; re-arms or clears the stall timer. */
  private progress(): void {
    if (this.stallTimer !== null) {
      clearTimeout(this.stallTimer);
      this.stallTimer = null;
    }
    const big = this.pendingBig;
    if (big !== null && !this.broken && this.fits(Buffer.byteLength(big.frame))) {
      this.pendingBig = null;
      this.admit(big.frame);
      big.w.resolve(true);
    }
    while (!this.broken && this.pendingBig === null && this.waiters.length > 0 && this.fitsSoon()) {
      const w = this.waiters.shift()!;
      if (w.onAbort !== undefined) w.signal?.removeEventListener("abort", w.onAbort);
      const f = w.build();
      if (f !== null) {
        if (!this.fits(Buffer.byteLength(f))) {
          // Too big for the room left: hold it until the stream drains further (order kept).
          this.pendingBig = { frame: f, w };
          break;
        }
        this.admit(f);
      }
      w.resolve(true);
    }
    if (this.waiters.length > 0 || this.pendingBig !== null) this.armStall();
    if (!this.waitingDrain && this.queue.length === 0 && this.pendingBig === null) {
      const c = this.closeWaiters;
      this.closeWaiters = [];
      for (const f of c) f();
    }
  }

  /** A built frame that did not fit the room left; admitted first once it fits. */
  private pendingBig: { frame: string; w: Waiter } | null = null;

  private armStall(): void {
    if (this.stallTimer !== null || this.stalled || this.broken) return;
    this.stallTimer = setTimeout(() => {
      this.stallTimer = null;
      if (this.waiters.length === 0 && this.pendingBig === null) return;
      this.stalled = true;
      this.o.onStall?.();
    }, this.o.stallMs);
  }

  /** Resolves once every admitted frame was handed to the OS, or the output broke. */
  close(): Promise<void> {
    this.flush();
    if (this.broken || (!this.waitingDrain && this.queue.length === 0 && this.pendingBig === null && this.waiters.length === 0)) {
      return new Promise((resolve) => {
        if (this.broken || this.stream.writableLength === 0) return resolve();
        this.stream.write("", () => resolve());
      });
    }
    return new Promise<void>((resolve) => this.closeWaiters.push(resolve)).then(() => this.close());
  }

  /** Drops everything and releases every waiter (cleanup after the grace period). */
  destroy(): void {
    this.fail(new Error("writer destroyed"));
  }

  private fail(err: unknown): void {
    if (this.broken) return;
    this.broken = true;
    if (this.stallTimer !== null) clearTimeout(this.stallTimer);
    this.queue = [];
    this.queuedBytes = 0;
    const w = this.waiters;
    this.waiters = [];
    for (const x of w) {
      if (x.onAbort !== undefined) x.signal?.removeEventListener("abort", x.onAbort);
      x.resolve(false);
    }
    if (this.pendingBig !== null) {
      this.pendingBig.w.resolve(false);
      this.pendingBig = null;
    }
    const c = this.closeWaiters;
    this.closeWaiters = [];
    for (const f of c) f();
    this.o.onBroken?.(err);
  }
}
