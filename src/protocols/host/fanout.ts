/**
 * Fan-out framing. Contracts:
 *  - every envelope is framed once as a WebSocket text frame (RFC 6455 §5.2: FIN,
 *    opcode 0x1, no mask) straight into a shared tape; the tape's bytes are never rewritten;
 *  - a subscriber collects the tape ranges meant for it, in publication order; a range that
 *    continues the previous one merges with it, so a client that receives every envelope of a
 *    burst holds one slice of the tape, and a delivery allocates nothing;
 *  - the collected frames leave in one socket write per client at the end of the event-loop turn,
 *    or earlier when anything else is about to be written to that client (so order is kept).
 * Which clients receive an envelope (the negotiated-version filter) is decided by the caller; the
 * replay ring (action-log.ts) reads envelopes back from their frames, so a chunk lives as long as a
 * ring entry or a pending socket write points into it (at worst about twice the ring's byte bound).
 */

/** Bytes of a tape chunk; a larger frame gets a chunk of its own size. */
const CHUNK_BYTES = 256 * 1024;

export class FrameTape {
  private chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  private used = 0;
  /** Where `frame` put the last message (valid until the next `frame`). */
  lastChunk: Buffer = this.chunk;
  lastStart = 0;
  lastEnd = 0;
  /** Bytes of the last frame's header (its payload starts at `lastStart + lastHeader`). */
  lastHeader = 0;

  /**
   * Frame one message, `prefix` + `text` (as UTF-8) + `suffix`, onto the tape; its bytes are
   * `lastChunk[lastStart, lastEnd)`. (The parts are written apart: the joined string is never made.)
   */
  frame(prefix: Buffer, text: string, suffix: Buffer): void {
    const n = prefix.length + Buffer.byteLength(text, "utf8") + suffix.length;
    const h = n < 126 ? 2 : n < 65536 ? 4 : 10;
    if (this.used + h + n > this.chunk.length) {
      // Bytes already framed stay where they are: clients may still be writing them, the ring reads them.
      this.chunk = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, h + n));
      this.used = 0;
    }
    const b = this.chunk;
    const at = this.used;
    b[at] = 0x81;
    if (h === 2) b[at + 1] = n;
    else if (h === 4) {
      b[at + 1] = 126;
      b.writeUInt16BE(n, at + 2);
    } else {
      b[at + 1] = 127;
      b.writeUInt32BE(Math.floor(n / 2 ** 32), at + 2);
      b.writeUInt32BE(n >>> 0, at + 6);
    }
    let p = at + h;
    p += prefix.copy(b, p);
    p += b.write(text, p, "utf8");
    suffix.copy(b, p);
    this.used = at + h + n;
    this.lastChunk = b;
    this.lastStart = at;
    this.lastEnd = at + h + n;
    this.lastHeader = h;
  }
}

/** One client's frames waiting for the end of the turn. */
export class PendingFrames {
  private done: Buffer[] = [];
  private chunk: Buffer | null = null;
  private start = 0;
  private end = 0;

  /** Queue a tape range; true when it is the first one since the last `take` (the caller schedules the write). */
  add(chunk: Buffer, start: number, end: number): boolean {
    const cur = this.chunk;
    if (cur === chunk && this.end === start) {
      this.end = end;
      return false;
    }
    const first = cur === null;
    if (!first) this.done.push(cur.subarray(this.start, this.end));
    this.chunk = chunk;
    this.start = start;
    this.end = end;
    return first;
  }

  get empty(): boolean {
    return this.chunk === null;
  }

  /** The queued frames in order (empty when none), and the queue emptied. */
  take(): Buffer[] {
    const cur = this.chunk;
    if (cur === null) return [];
    const out = this.done;
    out.push(cur.subarray(this.start, this.end));
    this.done = [];
    this.chunk = null;
    return out;
  }
}
