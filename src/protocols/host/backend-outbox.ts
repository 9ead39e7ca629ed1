/**
 * What a backend connection sends, batched: frames queued in one event-loop turn leave in one socket write, in order,
 * and an `event_ack` is built from pieces kept for the last (session, route) acknowledged, so a burst of events
 * costs one small string each. Knows nothing of sessions beyond the ack's fields.
 * `beforeWrite` runs before every socket write: the connection commits the host's queued state changes there, so no
 * frame (an `event_ack` above all) leaves before what was done ahead of it is durable, whichever was queued first.
 * Flow control: `held` counts the bytes handed to the socket and not yet written by it. Past `bound` the connection is
 * told to stop reading the backend's frames (`flow.pause`; a backend that floods events without reading their acks is
 * held back by its own socket, nothing is dropped), and to read again once `held` is back at or under it; past
 * 16 × `bound` (commands a backend that stopped reading never takes) it is told to give up (`flow.overflow`).
 */
import type { Socket } from "node:net";

/** Bytes waiting for one backend before the host stops reading its frames (see docs/host.md). */
export const BACKEND_BACKLOG = 4 * 1024 * 1024;

export interface OutboxFlow {
  pause(): void;
  resume(): void;
  overflow(held: number): void;
}

/** Beyond this many characters of ack head and tail the general path (with its frame bound) is as cheap. */
const MAX_ACK_PIECES = 4096;

export class BackendOutbox {
  /** Frames queued in this turn, in order (each ends with LF, so empty means none). */
  private out = "";
  private ack = { session: "", id: "", head: "", tail: "" };
  /** Bytes handed to the socket whose write has not completed. */
  held = 0;
  paused = false;

  constructor(
    private readonly socket: Socket,
    private readonly beforeWrite: () => void = () => undefined,
    private readonly flow?: OutboxFlow,
    readonly bound = BACKEND_BACKLOG,
  ) {}

  /** Queues one encoded frame (ending in LF). */
  push(text: string): void {
    if (this.out === "") setImmediate(this.flush);
    this.out += text;
    // Checked here too, not only when the turn's frames are written: one turn can read many socket reads of frames.
    if (this.flow && !this.paused && this.held + this.out.length > this.bound) {
      this.paused = true;
      this.flow.pause();
    }
  }

  /** Writes what is queued now (an error frame and all sent before it precede the end). */
  readonly flush = (): void => {
    const text = this.out;
    if (text === "") return;
    this.out = "";
    this.beforeWrite();
    if (this.socket.destroyed) return;
    const n = Buffer.byteLength(text);
    this.held += n;
    this.socket.write(text, () => this.written(n));
    if (!this.flow) return;
    if (this.held > 16 * this.bound) this.flow.overflow(this.held);
    else if (this.held > this.bound && !this.paused) {
      this.paused = true;
      this.flow.pause();
    }
  };

  private written(n: number): void {
    this.held -= n;
    if (this.paused && this.held + this.out.length <= this.bound) {
      this.paused = false;
      this.flow?.resume();
    }
  }

  /**
   * Queues `{"type":"event_ack","session":…,"sequence":n,"backendConnectionId":…}`, the text `encodeFrame` would
   * make; false (nothing queued) when its pieces are too large for this path.
   */
  pushAck(session: string, sequence: number, logicalId: string): boolean {
    let a = this.ack;
    if (a.session !== session || a.id !== logicalId) {
      const head = `{"type":"event_ack","session":${JSON.stringify(session)},"sequence":`;
      const tail = `,"backendConnectionId":${JSON.stringify(logicalId)}}\n`;
      if (head.length + tail.length > MAX_ACK_PIECES) return false;
      this.ack = a = { session, id: logicalId, head, tail };
    }
    this.push(a.head + sequence + a.tail);
    return true;
  }
}
