/**
 * Consumer-side handles for long-lived requests: `Turn` (turn.start) and `Login` (auth.login.start).
 * Contract:
 * - Updates are queued in arrival order and iterated once; iteration ends after the terminal event, or throws the
 *   failure (ProtocolError / ConnectionClosedError) when the stream breaks first. A broken stream never becomes a
 *   terminal: `result` then rejects.
 * - `result` settles exactly once, with the terminal payload (any status — `failed`/`cancelled` are outcomes, not
 *   exceptions).
 * - The queue reports pressure (more than HIGH unread updates) so the client can stop reading the service's
 *   output until the consumer catches up.
 */
import type { Activity, LoginProgress, LoginTerminal, TurnTerminal } from "./events.js";

const HIGH = 512;

export class UpdateQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private done = false;
  private error: Error | null = null;
  private wake: (() => void) | null = null;
  private iterating = false;

  constructor(private readonly pressure: (high: boolean) => void) {}

  get high(): boolean {
    return this.items.length > HIGH;
  }

  push(item: T): void {
    const was = this.high;
    this.items.push(item);
    if (!was && this.high) this.pressure(true);
    this.notify();
  }

  /** Ends the queue. Nothing more can arrive, so pressure is released even if the consumer never reads on. */
  end(error: Error | null = null): void {
    if (this.done) return;
    if (this.high) this.pressure(false);
    this.done = true;
    this.error = error;
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.iterating) throw new Error("updates can be iterated once");
    this.iterating = true;
    for (;;) {
      if (this.items.length > 0) {
        const was = this.high;
        const item = this.items.shift() as T;
        if (was && !this.high && !this.done) this.pressure(false);
        yield item;
        continue;
      }
      if (this.done) {
        if (this.error !== null) throw this.error;
        return;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}

/** A settle-once promise whose rejection is never unhandled when nobody awaits it. */
export class Settle<T> {
  readonly promise: Promise<T>;
  private res!: (v: T) => void;
  private rej!: (e: Error) => void;
  settled = false;
  constructor() {
    this.promise = new Promise<T>((res, rej) => {
      this.res = res;
      this.rej = rej;
    });
    this.promise.catch(() => {});
  }
  resolve(v: T): void {
    if (this.settled) return;
    this.settled = true;
    this.res(v);
  }
  reject(e: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.rej(e);
  }
}

export type TurnUpdate =
  | { type: "delta"; sequence: number; text: string }
  | { type: "activity"; sequence: number; activity: Activity };

export class Turn implements AsyncIterable<TurnUpdate> {
  /** @internal */ readonly updates: UpdateQueue<TurnUpdate>;
  /** @internal */ readonly settle = new Settle<TurnTerminal>();
  /** @internal */ lastSequence = -1;
  /** @internal */ started = false;

  constructor(
    readonly requestId: string,
    readonly turnId: string,
    readonly sessionId: string,
    pressure: (high: boolean) => void,
    private readonly cancelFn: (turnId: string) => Promise<unknown>,
  ) {
    this.updates = new UpdateQueue(pressure);
  }

  /** The terminal payload. Rejects (never resolves) when the stream breaks before `turn.terminal`. */
  get result(): Promise<TurnTerminal> {
    return this.settle.promise;
  }

  [Symbol.asyncIterator](): AsyncIterator<TurnUpdate> {
    return this.updates[Symbol.asyncIterator]();
  }

  /** Requests cancellation (`turn.cancel`); the outcome still arrives as the terminal event. */
  cancel(): Promise<unknown> {
    return this.cancelFn(this.turnId);
  }
}

export class Login implements AsyncIterable<LoginProgress> {
  /** @internal */ readonly updates: UpdateQueue<LoginProgress>;
  /** @internal */ readonly settle = new Settle<LoginTerminal>();

  constructor(
    readonly requestId: string,
    readonly loginId: string,
    readonly providerId: string,
    pressure: (high: boolean) => void,
    private readonly ops: { callback(loginId: string, input: string): Promise<unknown>; cancel(loginId: string): Promise<unknown> },
  ) {
    this.updates = new UpdateQueue(pressure);
  }

  get result(): Promise<LoginTerminal> {
    return this.settle.promise;
  }

  [Symbol.asyncIterator](): AsyncIterator<LoginProgress> {
    return this.updates[Symbol.asyncIterator]();
  }

  /** Submits the final redirect URL or a bare code once. `submitted` does not mean it was valid. */
  submit(input: string): Promise<unknown> {
    return this.ops.callback(this.loginId, input);
  }

  cancel(): Promise<unknown> {
    return this.ops.cancel(this.loginId);
  }
}
