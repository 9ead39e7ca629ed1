/**
 * Exponential backoff 1 s → 60 s with an injectable clock, so tests never wait on wall time.
 * `Clock.sleep` resolves early (false) when the signal aborts.
 */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<boolean>;
}

export const realClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<boolean>((resolve) => {
      if (signal?.aborted) return resolve(false);
      const t = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve(true);
      }, ms);
      const onAbort = (): void => {
        clearTimeout(t);
        resolve(false);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};

/**
 * A deadline on `clock`: `signal` aborts once `ms` passed (`expired()` then says so) or when `parent` aborts. Call
 * `done()` when the guarded work ends, so the clock's timer does not outlive it.
 */
export function deadline(clock: Clock, ms: number, parent?: AbortSignal): { signal: AbortSignal; expired: () => boolean; done: () => void } {
  const timeout = new AbortController();
  const finished = new AbortController();
  let expired = false;
  void clock.sleep(ms, finished.signal).then((fired) => {
    if (!fired) return;
    expired = true;
    timeout.abort(new Error(`no answer within ${ms} ms`));
  });
  return {
    signal: parent ? AbortSignal.any([parent, timeout.signal]) : timeout.signal,
    expired: () => expired,
    done: () => finished.abort(),
  };
}

/** One-shot timers (request deadlines, the Feishu link's ping and dead-link timers), injectable so tests move time by hand. */
export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

/**
 * `deadline` on one-shot timers: `signal` aborts once `ms` passed (`expired()` then says so) or when `parent` aborts.
 * Call `done()` when the guarded work ends.
 */
export function timerDeadline(timers: Timers, ms: number, parent?: AbortSignal): { signal: AbortSignal; expired: () => boolean; done: () => void } {
  const timeout = new AbortController();
  let expired = false;
  const handle = timers.set(() => {
    expired = true;
    timeout.abort(new Error(`no answer within ${ms} ms`));
  }, ms);
  return {
    signal: parent ? AbortSignal.any([parent, timeout.signal]) : timeout.signal,
    expired: () => expired,
    done: () => timers.clear(handle),
  };
}

/** Node's timers, unref'd (a timer alone never keeps the process alive). */
export const realTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms).unref(),
  clear: (h) => clearTimeout(h as NodeJS.Timeout),
};

export class Backoff {
  private failures = 0;
  constructor(
    private readonly minMs = 1000,
    private readonly maxMs = 60_000,
  ) {}
  /** Delay before the next attempt after one more failure. */
  next(): number {
    const d = Math.min(this.maxMs, this.minMs * 2 ** Math.min(this.failures, 16));
    this.failures++;
    return d;
  }
  reset(): void {
    this.failures = 0;
  }
  get count(): number {
    return this.failures;
  }
}
