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
 * - Cost: admission counts UTF-16 units, not bytes (a frame's UTF-8 size is 1–3× its length); exact byte counts are
 *   taken only when held text could be near `maxBytes` (three times its length reaches it), so the common small
 *   frame costs no encoding pass before the batch's single `write`.
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
  /**
   * The queued frames as pieces, each frame followed by its "\n" (so a flush is one `join("")` of flat strings, and a
   * frame made of a fixed head and a variable tail is never concatenated on its own: `pushParts`).
   */
  private queue: string[] = [];
  /** Frames in `queue`. */
  private queuedFrames = 0;
  /** UTF-16 units of the queued frames (their UTF-8 bytes are between this and three times it). */
  private queuedUnits = 0;
  /** Frames, units and texts of the batches handed to the stream since it last drained. */
  private inFlightFrames = 0;
  private inFlightUnits = 0;
  private inFlightTexts: string[] = [];
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
    this.inFlightUnits = 0;
    this.inFlightTexts = [];
    if (this.queuedFrames > 0) this.flush(); // flush() ends with progress()
    else this.progress();
  };

  /** Exact UTF-8 bytes held (queued frames plus in-flight batches, newlines excluded): O(held), rarely needed. */
  private heldBytes(): number {
    let n = 0;
    for (const f of this.queue) n += Buffer.byteLength(f);
    for (const t of this.inFlightTexts) n += Buffer.byteLength(t);
    return n - this.inFlightFrames - this.queuedFrames;
  }

  /** Whether the held bytes plus a frame of `units` UTF-16 units (`frame` when built) stay within `limit` (`<` when strict). */
  private bytesWithin(limit: number, units: number, frame: string | null, strict: boolean): boolean {
    const u = this.queuedUnits + this.inFlightUnits + units;
    if (strict ? u * 3 < limit : u * 3 <= limit) return true;
    if (strict ? u >= limit : u > limit) return false;
    const total = this.heldBytes() + (frame !== null ? Buffer.byteLength(frame) : 0);
    return strict ? total < limit : total <= limit;
  }

  private fits(frame: string): boolean {
    const frames = this.queuedFrames + this.inFlightFrames;
    if (frames === 0) return true;
    return frames + 1 <= this.o.maxFrames && this.bytesWithin(this.o.maxBytes, frame.length, frame, false);
  }

  /** Held frames (queued plus in flight): for tests and diagnostics. */
  get heldFrames(): number {
    return this.queuedFrames + this.inFlightFrames;
  }

  /**
   * Emits a frame built by `build` (called once, when admitted; returning null skips it). Resolves true once admitted,
   * false when `signal` aborted first or the output broke. Synchronous admission when there is room and no waiter.
   */
  emit(build: () => string | null, signal?: AbortSignal): boolean | Promise<boolean> {
    if (this.broken) return false;
    if (this.canAdmit()) {
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

  /**
   * Whether `emit` would admit a frame synchronously now (not broken, nobody waiting, room left). A caller that
   * checks this may then build its frame and `push` it in the same synchronous step (no builder closure).
   */
  canAdmit(): boolean {
    if (this.broken || this.waiters.length > 0 || this.pendingBig !== null) return false;
    if (this.fitsSoon()) return true;
    // Full with frames not yet handed to the stream: hand them over now instead of waiting for the scheduled flush
    // (one write of up to `maxFrames` frames either way); room is made unless the stream asks for a drain.
    if (this.waitingDrain || this.queuedFrames === 0) return false;
    this.flush();
    return this.fitsSoon();
  }

  /** Admits a frame right after `canAdmit()` returned true (same synchronous step). */
  push(frame: string): void {
    this.admit(frame);
  }

  /**
   * `push` of the frame `head + body + ',"seq":' + seq + "}"`, queued as its pieces: no string is concatenated per
   * frame (the flush's single `join` copies each piece once). `seq` is a non-negative integer.
   */
  pushSeqFrame(head: string, body: string, seq: number): void {
    const n = String(seq);
    this.queue.push(head, body, ',"seq":', n, "}\n");
    this.queuedFrames++;
    this.queuedUnits += head.length + body.length + n.length + 8;
    this.schedule();
  }

  /** Whether a typical frame fits now (the exact size is known only after building). */
  private fitsSoon(): boolean {
    return this.queuedFrames + this.inFlightFrames < this.o.maxFrames && this.bytesWithin(this.o.maxBytes, 0, null, true);
  }

  private admit(frame: string): void {
    this.queue.push(frame, "\n");
    this.queuedFrames++;
    this.queuedUnits += frame.length;
    this.schedule();
  }

  private schedule(): void {
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
    if (this.broken || this.waitingDrain || this.queuedFrames === 0) return;
    const q = this.queue;
    const text = q.join("");
    this.inFlightFrames += this.queuedFrames;
    this.inFlightUnits += this.queuedUnits;
    this.inFlightTexts.push(text);
    this.queue = [];
    this.queuedFrames = 0;
    this.queuedUnits = 0;
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
      this.inFlightUnits = 0;
      this.inFlightTexts = [];
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
    if (big !== null && !this.broken && this.fits(big.frame)) {
      this.pendingBig = null;
      this.admit(big.frame);
      big.w.resolve(true);
    }
    while (!this.broken && this.pendingBig === null && this.waiters.length > 0 && this.fitsSoon()) {
      const w = this.waiters.shift()!;
      if (w.onAbort !== undefined) w.signal?.removeEventListener("abort", w.onAbort);
      const f = w.build();
      if (f !== null) {
        if (!this.fits(f)) {
          // Too big for the room left: hold it until the stream drains further (order kept).
          this.pendingBig = { frame: f, w };
          break;
        }
        this.admit(f);
      }
      w.resolve(true);
    }
    if (this.waiters.length > 0 || this.pendingBig !== null) this.armStall();
    if (!this.waitingDrain && this.queuedFrames === 0 && this.pendingBig === null) {
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
    if (this.broken || (!this.waitingDrain && this.queuedFrames === 0 && this.pendingBig === null && this.waiters.length === 0)) {
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
    this.queuedFrames = 0;
    this.queuedUnits = 0;
    this.inFlightTexts = [];
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
