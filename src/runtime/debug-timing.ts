/**
 * Env-gated first-turn timing marks for profiling (issue 19): with `BERTH_DEBUG_TIMING=1` every `mark` writes
 * `berth-timing <ms since process start> <label>` to stderr; otherwise `mark` is a no-op (one boolean test).
 * Labels never carry prompt text, provider payloads or credentials.
 */
const enabled = process.env["BERTH_DEBUG_TIMING"] === "1";

/** Whether marks are written (for a mark that needs a listener of its own). */
export const timingEnabled = enabled;

export function mark(label: string): void {
  if (enabled) process.stderr.write(`berth-timing ${performance.now().toFixed(2)} ${label}\n`);
}
