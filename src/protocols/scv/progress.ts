/**
 * `tool.progress` shaping for SCV (docs/scv.md §Tool lifecycle). Per tool call:
 * - each reported line becomes one line (line breaks and control characters removed), credential-like values are
 *   replaced by `…` (the core redaction policy), and it is cut to at most 200 bytes;
 * - lines are held and joined with LF into one event, at most one event per 500 ms: the first line goes out at
 *   once, later ones when the 500 ms since the previous event are over;
 * - an event is at most 512 bytes: the oldest lines are dropped behind a leading `…` line;
 * - `complete(callId)` drops whatever is still held (lines within 500 ms of `tool.completed` may be dropped) and
 *   stops the call's timer, so no progress follows `tool.completed`.
 * The clock and timers are injected so the rules are tested without waiting.
 */
import { collapseBreaks } from "../../core/text-scan.js";
import { REDACTED, redactSecrets, sanitizeText } from "../../core/text-policy.js";
import { truncateUtf8, utf8Length } from "../../core/utf8.js";

export const PROGRESS_LINE_MAX_BYTES = 200;
export const PROGRESS_EVENT_MAX_BYTES = 512;
export const PROGRESS_INTERVAL_MS = 500;
const ELLIPSIS = "…";

export interface ProgressTimers {
  now(): number;
  setTimeout(f: () => void, ms: number): unknown;
  clearTimeout(t: unknown): void;
}

const REAL: ProgressTimers = {
  now: () => performance.now(),
  setTimeout: (f, ms) => setTimeout(f, ms),
  clearTimeout: (t) => clearTimeout(t as NodeJS.Timeout),
};

interface CallState {
  lines: string[];
  last: number;
  timer: unknown;
}

export function progressLine(raw: string): string {
  const one = collapseBreaks(sanitizeText(raw)).trim();
  return truncateUtf8(redactSecrets(one).split(REDACTED).join(ELLIPSIS), PROGRESS_LINE_MAX_BYTES);
}

/** Joins lines into one event text of at most 512 bytes, newest kept. */
export function joinProgress(lines: readonly string[]): string {
  let kept = [...lines];
  let text = kept.join("\n");
  if (utf8Length(text) <= PROGRESS_EVENT_MAX_BYTES) return text;
  while (kept.length > 1) {
    kept = kept.slice(1);
    text = [ELLIPSIS, ...kept].join("\n");
    if (utf8Length(text) <= PROGRESS_EVENT_MAX_BYTES) return text;
  }
  return [ELLIPSIS, ...kept].join("\n");
}

export class ProgressShaper {
  private readonly calls = new Map<string, CallState>();

  constructor(
    private readonly emit: (callId: string, text: string) => void,
    private readonly timers: ProgressTimers = REAL,
  ) {}

  line(callId: string, raw: string): void {
    const l = progressLine(raw);
    if (l === "") return;
    let c = this.calls.get(callId);
    if (c === undefined) {
      c = { lines: [], last: -Infinity, timer: null };
      this.calls.set(callId, c);
    }
    c.lines.push(l);
    if (c.timer !== null) return;
    const wait = c.last + PROGRESS_INTERVAL_MS - this.timers.now();
    if (wait <= 0) this.flush(callId, c);
    else c.timer = this.timers.setTimeout(() => this.flush(callId, c), wait);
  }

  private flush(callId: string, c: CallState): void {
    c.timer = null;
    if (c.lines.length === 0 || this.calls.get(callId) !== c) return;
    const text = joinProgress(c.lines);
    c.lines = [];
    c.last = this.timers.now();
    this.emit(callId, text);
  }

  /** The call completed: held lines are dropped, nothing more is emitted for it. */
  complete(callId: string): void {
    const c = this.calls.get(callId);
    if (c === undefined) return;
    if (c.timer !== null) this.timers.clearTimeout(c.timer);
    this.calls.delete(callId);
  }

  /** Drops every call (the turn ended or the session closed). */
  clear(): void {
    for (const id of [...this.calls.keys()]) this.complete(id);
  }
}
