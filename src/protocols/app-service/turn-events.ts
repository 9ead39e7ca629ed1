/**
 * The ordered event stream of one turn: `turn.started` (sequence 0), accepted `turn.assistant_delta` and attempted
 * `turn.activity` events sharing one counter, then exactly one `turn.terminal` with the next value.
 *
 * Contracts:
 * - Deltas are never dropped: `delta` returns `true` when the output can take more right now (the emit returned
 *   `WRITABLE_NOW`: no promise, no await per delta), else a promise resolving `true` once it can (backpressure).
 * - Terminal-size check: a delta is accepted only while the turn's accepted text stays ≤ max_string_bytes
 *   (16,384 UTF-8 bytes) AND the terminal payload carrying that text, JSON-escaped, still fits max_payload_bytes
 *   (32,768). The first delta that would exceed either is refused (`false`): it consumes no sequence number, is
 *   not emitted, and the runtime ends the turn `failed` with the text accepted so far. Nothing is split.
 * - Activity is non-blocking: at most `activityQueue` activity events may be waiting behind output backpressure;
 *   beyond that an activity is dropped. A dropped activity still consumes a sequence number and is counted in the
 *   terminal's authoritative `activity_dropped`. Excluded kinds (projection null) consume nothing.
 * - After `terminal`, nothing more is emitted (late activity, e.g. child callbacks, is ignored and not counted).
 */
import { LIMITS } from "./limits.js";
import { WRITABLE_NOW } from "../../transport/line-writer.js";
import { utf8Length } from "../../core/utf8.js";
import type { RuntimeEvent, TurnSink } from "../../runtime/session/index.js";
import type { EventName } from "./descriptor.js";
import { projectActivity } from "./activity.js";

/**
 * Emits one event. `payload` is either the payload object or, for the per-delta path, its compact JSON already
 * encoded exactly as `JSON.stringify` would write it (the emitter then encodes nothing but the envelope around it).
 */
export type Emit = (event: EventName, sessionId: string | null, payload: Record<string, unknown> | string) => Promise<void>;

export const DEFAULT_ACTIVITY_QUEUE = 64;
export type WireTerminalStatus = "completed" | "cancelled" | "failed";

/** Bytes `s` adds inside a JSON string literal as `JSON.stringify` writes it (UTF-8). */
export function jsonEscapedBytes(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c <= 0x7f) n += c === 0x22 || c === 0x5c ? 2 : 1;
    else if (c < 0x20) n += c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 6; // lone surrogate: \udXXX
    } else if (c >= 0xdc00 && c <= 0xdfff) n += 6;
    else n += 3;
  }
  return n;
}

const TRUE = (): boolean => true;

/** Text JSON writes verbatim (printable ASCII but `"` and `\\`, plus DEL): its UTF-8 and escaped sizes are its length. */
const NEEDS_CARE = /[^\x20\x21\x23-\x5b\x5d-\x7f]/;

export class TurnStream implements TurnSink {
  private seq = 0;
  private dropped = 0;
  private waiting = 0;
  private closed = false;
  private textBytes = 0;
  private escapedBytes = 0;
  private readonly terminalOverhead: number;
  /** `{"turn_id":…,"sequence":` — the constant head of every delta payload (key order as `JSON.stringify` writes it). */
  private readonly deltaHead: string;
  private readonly release = (): void => {
    this.waiting--;
  };

  constructor(
    private readonly emit: Emit,
    readonly turnId: string,
    readonly sessionId: string,
    private readonly activityQueue = DEFAULT_ACTIVITY_QUEUE,
    private readonly maxTextBytes: number = LIMITS.max_string_bytes,
    private readonly maxPayloadBytes: number = LIMITS.max_payload_bytes,
  ) {
    // The largest terminal payload with empty text: longest status, largest representable counters.
    this.terminalOverhead = Buffer.byteLength(
      JSON.stringify(this.terminalPayload("cancelled", "", Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)),
    );
    this.deltaHead = `{"turn_id":${JSON.stringify(turnId)},"sequence":`;
  }

  get sequence(): number {
    return this.seq;
  }

  get activityDropped(): number {
    return this.dropped;
  }

  started(): void {
    void this.emit("turn.started", this.sessionId, { turn_id: this.turnId, session_id: this.sessionId, status: "started", sequence: 0 });
  }

  /**
   * Per delta: one regular-expression test for plain ASCII text (sizes are its length, its JSON is itself in quotes);
   * anything else is measured and encoded as before. The payload is the bytes `JSON.stringify({ turn_id, sequence,
   * text })` writes, built from the cached head, so the emitter encodes no object per delta.
   */
  delta(text: string): boolean | Promise<boolean> {
    if (this.closed) return false;
    let bytes: number;
    let escaped: number;
    let json: string;
    if (!NEEDS_CARE.test(text)) {
      bytes = escaped = text.length;
      json = `"${text}"`;
    } else {
      bytes = utf8Length(text);
      escaped = jsonEscapedBytes(text);
      json = "";
    }
    if (this.textBytes + bytes > this.maxTextBytes) return false;
    if (this.terminalOverhead + this.escapedBytes + escaped > this.maxPayloadBytes) return false;
    this.textBytes += bytes;
    this.escapedBytes += escaped;
    if (json === "") json = JSON.stringify(text);
    const ready = this.emit("turn.assistant_delta", this.sessionId, `${this.deltaHead}${++this.seq},"text":${json}}`);
    return ready === WRITABLE_NOW ? true : ready.then(TRUE);
  }

  event(e: RuntimeEvent): void {
    if (this.closed) return;
    const activity = projectActivity(this.turnId, e);
    if (activity === null) return;
    const sequence = ++this.seq;
    if (this.waiting >= this.activityQueue) {
      this.dropped++;
      return;
    }
    this.waiting++;
    void this.emit("turn.activity", this.sessionId, { turn_id: this.turnId, sequence, activity }).then(this.release);
  }

  /** Emits the terminal event (once). `text` must be the accepted text (the runtime's outcome text). */
  terminal(status: WireTerminalStatus, text: string): void {
    if (this.closed) return;
    this.closed = true;
    void this.emit("turn.terminal", this.sessionId, this.terminalPayload(status, text, ++this.seq, this.dropped));
  }

  private terminalPayload(status: WireTerminalStatus, text: string, sequence: number, dropped: number): Record<string, unknown> {
    return {
      turn_id: this.turnId,
      session_id: this.sessionId,
      status,
      assistant_text: text,
      sequence,
      activity_dropped: dropped,
      activity_replay_available: false,
      replay_required: true,
    };
  }
}
