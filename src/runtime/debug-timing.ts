/**
 * Env-gated first-turn timing marks for profiling (issue 19): with `BERTH_DEBUG_TIMING=1` every `mark` writes
 * `berth-timing <ms since process start> <label>` to stderr; otherwise `mark` is a no-op (one boolean test).
 * With `BERTH_DEBUG_TIMING=buffered` the same lines are kept in memory and written every 30 ms and at exit: a
 * synchronous stderr write costs ~20–30 µs, which inflates the sub-millisecond intervals of a warm turn that the
 * marks measure (docs/scv.md "Ninth wave"). Labels never carry prompt text, provider payloads or credentials.
 */
import { writeSync } from "node:fs";

const mode = process.env["BERTH_DEBUG_TIMING"];
const enabled = mode === "1" || mode === "buffered";
const buffered = mode === "buffered";
let pending: string[] = [];
let timer: NodeJS.Timeout | null = null;

function flush(): void {
  timer = null;
  const lines = pending;
  pending = [];
  if (lines.length > 0) process.stderr.write(lines.join(""));
}

if (buffered) {
  process.on("exit", () => {
    if (pending.length > 0) writeSync(2, pending.join(""));
  });
}

/** Whether marks are written (for a mark that needs a listener of its own). */
export const timingEnabled = enabled;

export function mark(label: string): void {
  if (!enabled) return;
  const line = `berth-timing ${performance.now().toFixed(buffered ? 3 : 2)} ${label}\n`;
  if (!buffered) {
    process.stderr.write(line);
    return;
  }
  pending.push(line);
  if (timer === null) {
    timer = setTimeout(flush, 30);
    timer.unref();
  }
}
