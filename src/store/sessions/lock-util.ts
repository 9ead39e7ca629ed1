/** Small helpers shared by the session lock modules (locks.ts, lease.ts, append-keep.ts). */
import type * as dirlock from "./dirlock.js";

/** Retry options whose exponential backoff, bounded by `maxTimeout`, approximates a total wait of `waitMs`. */
export function retriesFor(waitMs: number): dirlock.RetryOptions {
  const maxTimeout = 25;
  return { retries: Math.max(0, Math.ceil(waitMs / maxTimeout)), minTimeout: 2, maxTimeout, factor: 1.5 };
}

/** True for dirlock's "held by someone else" failure. */
export function isLocked(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === "ELOCKED";
}

/** Runs `fn`, ignoring a failure (a lock part already gone or compromised: nothing left to release). */
export function safely(fn: () => void): void {
  try {
    fn();
  } catch {
    /* already gone or compromised: nothing left to release */
  }
}

/** `f()`, or false when it throws. */
export function safelyTrue(f: () => boolean): boolean {
  try {
    return f();
  } catch {
    return false;
  }
}
