/**
 * Persist-as-you-go for one turn through the session writer.
 *
 * Contracts:
 * - `user()` resolves once the user record is written and fsynced (call it before any provider request).
 * - Assistant text is written as consecutive segment records (`message_id` = `<message>.<n>`, `partial:true`;
 *   the message's last segment `partial:false`). Each segment holds only new text, so total writes stay linear in
 *   the text. A segment is written once `flushBytes` of new text accumulated, at most `flushMs` after the first
 *   unwritten character (a timer, so a stalled stream is persisted too; a streaming one writes a little earlier,
 *   right after a delta), and before every tool call record. `text()` itself never writes: persistence stays off
 *   the delta → output path. A kill -9 loses at most the unwritten slice. Replay concatenates a turn's segments (in order) until the terminal record
 *   supplies the authoritative text.
 * - A message's final segment (shorter than `flushBytes`) is held when the message ends and written with the turn's
 *   next record: the terminal record (one batch: one append lock, one write, one fsync), the next message's records
 *   or a tool result. Its `flushMs` bound still holds (the timer armed for its first character writes it alone).
 * - `checkpoint()` (turn-start compaction) and `checkpointMidTurn()` (compaction between steps: checkpoint, then
 *   this turn's user record and accepted text again) resolve once written and fsynced.
 * - `terminal()` writes the terminal record with the accepted text and fsyncs everything.
 * - Writes other than `user`/`checkpoint`/`terminal` are not awaited by the caller; the first write failure is
 *   kept in `failure` (the loop checks it and fails the turn) and never rejects unobserved.
 */
import type { NewRecord, SessionWriter, StoredRecord, TerminalStatus, UserAttachment } from "../store/sessions/index.js";
import { StreamedText } from "./streamed-text.js";

export interface RecorderTiming {
  flushBytes: number;
  flushMs: number;
}

/**
 * 32 KiB: on a fast stream (a 215 KB answer in about 100 ms) a 4 KiB cadence meant ~50 appends (each an append-lock
 * mkdir/rmdir, a record encode and a write) on the turn's event loop; 32 KiB keeps it to ~7. A model streaming at
 * human speed reaches the 250 ms bound long before the byte bound, so the crash window there is unchanged.
 */
export const DEFAULT_RECORDER_TIMING: RecorderTiming = { flushBytes: 32 * 1024, flushMs: 250 };
/** Fraction of `flushMs` after which the next delta writes the segment (see `text`). */
const EARLY_FLUSH = 0.8;

export class TurnRecorder {
  failure: Error | null = null;
  private messages = 0;
  private messageId: string | null = null;
  private segment = 0;
  private pending = new StreamedText();
  /** Fires at `EARLY_FLUSH` of `flushMs` after the first unwritten character (sets `early`), then at `flushMs`. */
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  /** `EARLY_FLUSH` of `flushMs` has passed since the first unwritten character (no clock read per delta). */
  private early = false;
  private last: Promise<unknown> = Promise.resolve();
  private prompt = "";
  /** The ended message's final segment, not yet appended (see the module contract). */
  private held: NewRecord | null = null;

  constructor(
    private readonly writer: SessionWriter,
    readonly turnId: string,
    private readonly timing: RecorderTiming = DEFAULT_RECORDER_TIMING,
  ) {}

  /** The seq of the user record once written (compaction cutoffs are taken relative to it). */
  userSeq = 0;

  async user(text: string, attachments?: UserAttachment[]): Promise<StoredRecord> {
    this.prompt = text;
    const rec: NewRecord = { kind: "user", turn_id: this.turnId, text, ...(attachments !== undefined && attachments.length > 0 ? { attachments } : {}) };
    const r = await this.writer.append(rec, { sync: true });
    this.userSeq = r.seq;
    return r;
  }

  /** A steering message injected between steps: one more user record of this turn (written and fsynced). */
  async steering(text: string): Promise<void> {
    this.writeHeld();
    await this.writer.append({ kind: "user", turn_id: this.turnId, text }, { sync: true });
  }

  /** Starts one provider response; returns its message ID. */
  startMessage(): string {
    this.writeHeld();
    this.messageId = `m${++this.messages}`;
    this.segment = 0;
    this.pending.take();
    return this.messageId;
  }

  /**
   * Adds accepted text. Never writes synchronously: a due segment is written in the check phase of this event-loop
   * turn (after the output of the delta that made it due was handed on). Due: `flushBytes` unwritten, or — from
   * `EARLY_FLUSH` of `flushMs` on — at the next delta, so on a streaming answer the write follows an output
   * instead of landing between deltas; the `flushMs` timer covers a stalled stream.
   */
  text(delta: string): void {
    this.pending.add(delta);
    if (this.timer === null) {
      this.early = false;
      this.timer = setTimeout(this.onEarly, EARLY_FLUSH * this.timing.flushMs);
      this.timer.unref();
    }
    if (this.immediate === null && (this.early || this.pending.length >= this.timing.flushBytes)) {
      this.immediate = setImmediate(this.flushSoon);
    }
  }

  /** The early mark passed: the next delta writes the segment; the timer now covers the rest of `flushMs`. */
  private readonly onEarly = (): void => {
    this.early = true;
    this.timer = setTimeout(this.flushSoon, this.timing.flushMs - EARLY_FLUSH * this.timing.flushMs);
    this.timer.unref();
  };

  /** Timer / immediate callback (flushText clears both handles; clearing a fired one is a no-op). */
  private readonly flushSoon = (): void => this.flushText(true);

  /** Writes the unwritten text as a segment (partial unless `last`); a held final segment first. */
  flushText(partial: boolean): void {
    this.stopTimers();
    this.writeHeld();
    const rec = this.takeSegment(partial);
    if (rec !== null) this.track(this.writer.append(rec));
  }

  private stopTimers(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.immediate !== null) {
      clearImmediate(this.immediate);
      this.immediate = null;
    }
    this.early = false;
  }

  /** The unwritten text as the next segment record (partial unless `last`), or null when there is none to write. */
  private takeSegment(partial: boolean): NewRecord | null {
    if (this.messageId === null) return null;
    if (this.pending.length === 0 && partial) return null;
    if (this.pending.length === 0 && this.segment === 0) return null; // an empty message has no text record
    const text = this.pending.take();
    return { kind: "assistant", turn_id: this.turnId, message_id: `${this.messageId}.${this.segment++}`, text, partial };
  }

  /** Appends the held final segment, if any (its timer, armed while no message is open, is stopped). */
  private writeHeld(): void {
    const rec = this.held;
    if (rec === null) return;
    this.held = null;
    if (this.messageId === null) this.stopTimers();
    this.track(this.writer.append(rec));
  }

  toolCall(callId: string, name: string, args: Record<string, unknown>): void {
    this.flushText(true);
    if (this.messageId === null) return;
    this.track(this.writer.append({ kind: "tool_call", turn_id: this.turnId, message_id: this.messageId, call_id: callId, name, arguments: args }));
  }

  /**
   * Ends the current message: its remaining text becomes the final (`partial:false`) segment, held for the turn's next
   * record (see the module contract) unless it reached `flushBytes`.
   */
  endMessage(): void {
    if (this.messageId !== null && this.pending.length < this.timing.flushBytes) {
      this.writeHeld();
      const rec = this.takeSegment(false);
      this.messageId = null;
      if (this.immediate !== null) {
        clearImmediate(this.immediate);
        this.immediate = null;
      }
      if (rec === null) return this.stopTimers();
      this.held = rec;
      // The timer armed for its first character keeps its deadline; an empty final segment gets a full `flushMs`.
      if (this.timer === null) {
        this.timer = setTimeout(this.flushSoon, this.timing.flushMs);
        this.timer.unref();
      }
      return;
    }
    this.flushText(false);
    this.messageId = null;
  }

  toolResult(callId: string, name: string, content: string, isError: boolean): void {
    this.writeHeld();
    this.track(this.writer.append({ kind: "tool_result", turn_id: this.turnId, call_id: callId, name, content, is_error: isError }));
  }

  async checkpoint(summary: string, cutoffSeq: number): Promise<void> {
    this.writeHeld();
    await this.settled();
    await this.writer.append({ kind: "checkpoint", summary, cutoff_seq: cutoffSeq }, { sync: true });
  }

  /**
   * Mid-turn compaction: a checkpoint covering every record written so far (this turn's included), then this
   * turn's user record and its accepted text so far (`acceptedText`, one final segment of a new message) again,
   * so the projection after the cutoff — replay, and the next turn's history — still holds the whole turn.
   * Resolves once all three are written and fsynced; rejects on a write failure (or an earlier one).
   */
  async checkpointMidTurn(summary: string, acceptedText: string): Promise<void> {
    if (this.messageId !== null) this.endMessage();
    this.stopTimers();
    this.writeHeld();
    await this.settled();
    if (this.failure !== null) throw this.failure;
    const turn_id = this.turnId;
    // One batch (one append lock, one write, one fsync): the checkpoint never lands without what it carries over
    // but for a write cut short by a crash, which readers tell apart (kept-history.ts `lastValidCheckpoint`).
    const recs: NewRecord[] = [
      { kind: "checkpoint", summary, cutoff_seq: this.writer.peekNextSeq - 1 },
      { kind: "user", turn_id, text: this.prompt },
    ];
    if (acceptedText !== "") recs.push({ kind: "assistant", turn_id, message_id: `m${++this.messages}.0`, text: acceptedText, partial: false });
    await Promise.all(this.writer.appendMany(recs, { sync: true }));
  }

  /**
   * Writes the terminal record (with a held final segment before it, in one batch) and fsyncs. Rejects when the
   * terminal record could not be written.
   */
  async terminal(status: TerminalStatus, assistantText: string): Promise<void> {
    if (this.messageId !== null) this.endMessage();
    this.stopTimers();
    const term: NewRecord = { kind: "terminal", turn_id: this.turnId, status, assistant_text: assistantText };
    const held = this.held;
    this.held = null;
    if (held === null) {
      await this.writer.append(term, { sync: true });
      return;
    }
    const [segment, terminal] = this.writer.appendMany([held, term], { sync: true }) as [Promise<StoredRecord>, Promise<StoredRecord>];
    this.track(segment);
    await terminal;
  }

  /** Waits for every tracked write (never rejects). */
  async settled(): Promise<void> {
    await this.last;
  }

  private track(p: Promise<unknown>): void {
    const guarded = p.catch((e: unknown) => {
      this.failure ??= e instanceof Error ? e : new Error(`session write failed: ${String(e)}`);
    });
    this.last = Promise.all([this.last, guarded]);
  }
}
