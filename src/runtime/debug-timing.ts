/**
 * Env-gated first-turn timing marks for profiling (issue 19): with `BERTH_DEBUG_TIMING=1` every `mark` writes
 * `berth-timing <ms since process start> <label>` to stderr; otherwise `mark` is a no-op (one boolean test).
 * With `BERTH_DEBUG_TIMING=buffered` the same lines are kept in memory and written every 30 ms and at exit: a
 * synchronous stderr write costs ~20–30 µs, which inflates the sub-millisecond intervals of a warm turn that the
 * marks measure (docs/scv.md "Ninth wave"). With `BERTH_DEBUG_TIMING=faults` each line also ends with the process's
 * minor page faults so far (`faults=N`): on a virtual machine each first touch of a page costs ~10–20 µs, so memory
 * touched before the handshake is time (docs/runtime.md "Page faults"). Labels never carry prompt text, provider
 * payloads or credentials.
 */
import { writeSync } from "node:fs";

const mode = process.env["BERTH_DEBUG_TIMING"];
const enabled = mode === "1" || mode === "buffered" || mode === "faults";
const faults = mode === "faults";
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
  const at = performance.now().toFixed(buffered ? 3 : 2);
  const line = faults ? `berth-timing ${at} ${label} faults=${process.resourceUsage().minorPageFault} heap=${process.memoryUsage().heapUsed >> 10}K\n` : `berth-timing ${at} ${label}\n`;
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
