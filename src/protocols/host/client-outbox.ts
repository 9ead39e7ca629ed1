/**
 * What waits to be written to one AHP client, and the daemon-wide bound on the sum over clients. Contracts:
 *  - everything the host sends a client (fanned-out tape frames, framed answers and notifications) waits here, in
 *    order, and at most IN_FLIGHT bytes (plus one message) are handed to the socket at a time: bytes a socket holds
 *    cannot be taken back, bytes waiting here can, so a client dropped for falling behind can still be sent a close
 *    frame right after the few complete frames already handed over (it reads them, then the close reason);
 *  - `held` is the bytes waiting here plus those handed to the socket and not yet written by it; the `ClientBudget`
 *    keeps the sum over every client (including ones closing whose socket still holds bytes);
 *  - when a write pushes the sum past the budget's bound, the clients holding the most are told to go
 *    (`overBudget`), the largest first, until the sum is at or under the bound; what they held here is dropped at once.
 * Knows nothing of AHP: the connection decides what each drop means to its client.
 */
import type { Socket } from "node:net";
import { PendingFrames } from "./fanout.js";

/** Bytes handed to a client's socket at once; the rest waits in its outbox, where a disconnect can drop it. */
const IN_FLIGHT = 256 * 1024;

/** The daemon-wide bound on bytes waiting to be written to AHP clients (see docs/host.md for why this figure). */
export const DEFAULT_CLIENT_BYTES_BOUND = 256 * 1024 * 1024;

export class ClientBudget {
  /** Bytes held by every outbox now. */
  total = 0;
  readonly outboxes = new Set<ClientOutbox>();
  constructor(readonly bound: number = DEFAULT_CLIENT_BYTES_BOUND) {}

  /** Over the bound: the outboxes holding the most are told to go, largest first, until the sum is at or under it. */
  enforce(): void {
    if (this.total <= this.bound || this.enforcing) return;
    // A client's going can publish to others (its active-client entries leave): their writes come back here.
    this.enforcing = true;
    try {
      const live = [...this.outboxes].filter((o) => !o.dropped).sort((a, b) => b.held - a.held);
      for (const o of live) {
        if (this.total <= this.bound) return;
        if (o.dropped) continue;
        o.drop();
        o.hooks.overBudget();
      }
    } finally {
      this.enforcing = false;
    }
  }
  private enforcing = false;
}

export interface OutboxHooks {
  /** After anything was queued: the connection checks its own bound. */
  queued(): void;
  /** Everything queued has been handed to the socket. */
  drained(): void;
  /** Dropped by the daemon-wide bound (the outbox is already emptied). */
  overBudget(): void;
}

/** `text` as one unmasked WebSocket text frame (RFC 6455 §5.2), the bytes `ws` would send for it. */
export function textFrame(text: string): Buffer {
  const n = Buffer.byteLength(text, "utf8");
  const h = n < 126 ? 2 : n < 65536 ? 4 : 10;
  const b = Buffer.allocUnsafe(h + n);
  b[0] = 0x81;
  if (h === 2) b[1] = n;
  else if (h === 4) {
    b[1] = 126;
    b.writeUInt16BE(n, 2);
  } else {
    b[1] = 127;
    b.writeUInt32BE(Math.floor(n / 2 ** 32), 2);
    b.writeUInt32BE(n >>> 0, 6);
  }
  b.write(text, h, "utf8");
  return b;
}

export class ClientOutbox {
  /** Fanned-out frames of this event-loop turn (contiguous tape ranges merged), queued at its end. */
  private readonly frames = new PendingFrames();
  private queue: Buffer[] = [];
  private qHead = 0;
  /** Bytes queued here, not yet handed to the socket. */
  private queued = 0;
  /** Bytes handed to the socket whose write has not completed. */
  private inFlight = 0;
  dropped = false;
  private gone = false;
  private corked = false;

  constructor(
    private readonly socket: Socket,
    private readonly budget: ClientBudget,
    readonly hooks: OutboxHooks,
  ) {
    budget.outboxes.add(this);
  }

  get held(): number {
    return this.queued + this.inFlight;
  }

  /** Queue a tape range (fanout.ts); written at the end of the turn, or before anything else sent to this client. */
  queueFrame(chunk: Buffer, start: number, end: number): void {
    if (this.dropped) return;
    if (this.frames.add(chunk, start, end)) setImmediate(this.writeFrames);
  }

  /** Queue one framed message after the fanned-out frames queued before it; small ones of a turn leave in one write. */
  send(frame: Buffer): void {
    if (this.dropped) return;
    if (!this.frames.empty) this.writeFrames();
    if (!this.corked && !this.socket.destroyed) {
      this.corked = true;
      this.socket.cork();
      setImmediate(this.uncork);
    }
    this.enqueue([frame]);
  }

  /** Hand everything queued to the socket now, whatever its size (before a close frame, at shutdown). */
  flushAll(): void {
    if (!this.frames.empty) this.writeFrames();
    this.pump(Infinity);
  }

  /** Drop what waits here (not what the socket already holds); nothing more is queued. */
  drop(): void {
    if (this.dropped) return;
    this.dropped = true;
    this.frames.take();
    this.budget.total -= this.queued;
    this.queued = 0;
    this.queue = [];
    this.qHead = 0;
  }

  /** The socket closed: nothing this outbox held is held any more. */
  detach(): void {
    if (this.gone) return;
    this.drop();
    this.gone = true;
    this.budget.total -= this.inFlight;
    this.inFlight = 0;
    this.budget.outboxes.delete(this);
  }

  private readonly uncork = (): void => {
    this.corked = false;
    this.socket.uncork();
  };

  private readonly writeFrames = (): void => {
    const out = this.frames.take();
    if (out.length > 0 && !this.dropped) this.enqueue(out);
  };

  private enqueue(bufs: Buffer[]): void {
    let n = 0;
    for (const b of bufs) {
      this.queue.push(b);
      n += b.length;
    }
    this.queued += n;
    this.budget.total += n;
    this.pump(IN_FLIGHT);
    this.hooks.queued();
    if (!this.dropped) this.budget.enforce();
  }

  /** Hand queued bytes to the socket while fewer than `limit` are in flight there. */
  private pump(limit: number): void {
    if (this.gone || this.socket.destroyed || this.socket.writableEnded || this.qHead === this.queue.length || this.inFlight >= limit) return;
    const cork = !this.corked;
    if (cork) this.socket.cork();
    let n = 0;
    let last: Buffer | undefined;
    while (this.qHead < this.queue.length && this.inFlight + n < limit) {
      if (last) this.socket.write(last);
      last = this.queue[this.qHead++]!;
      n += last.length;
    }
    if (this.qHead === this.queue.length) {
      this.queue = [];
      this.qHead = 0;
    }
    this.queued -= n;
    this.inFlight += n;
    // One callback for the batch: a stream completes its writes in order.
    this.socket.write(last!, () => this.written(n));
    if (cork) this.socket.uncork();
  }

  private written(n: number): void {
    if (this.gone) return;
    this.inFlight -= n;
    this.budget.total -= n;
    if (this.queued > 0) this.pump(IN_FLIGHT);
    else if (!this.dropped) this.hooks.drained();
  }
}
