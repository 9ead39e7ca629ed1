/**
 * What a backend connection sends, batched: frames queued in one event-loop turn leave in one socket write, in order,
 * and an `event_ack` is built from pieces kept for the last (session, route) acknowledged, so a burst of events
 * costs one small string each. Knows nothing of sessions beyond the ack's fields.
 * `beforeWrite` runs before every socket write: the connection commits the host's queued state changes there, so no
 * frame (an `event_ack` above all) leaves before what was done ahead of it is durable, whichever was queued first.
 */
import type { Socket } from "node:net";

/** Beyond this many characters of ack head and tail the general path (with its frame bound) is as cheap. */
const MAX_ACK_PIECES = 4096;

export class BackendOutbox {
  /** Frames queued in this turn, in order (each ends with LF, so empty means none). */
  private out = "";
  private ack = { session: "", id: "", head: "", tail: "" };

  constructor(
    private readonly socket: Socket,
    private readonly beforeWrite: () => void = () => undefined,
  ) {}

  /** Queues one encoded frame (ending in LF). */
  push(text: string): void {
    if (this.out === "") setImmediate(this.flush);
    this.out += text;
  }

  /** Writes what is queued now (an error frame and all sent before it precede the end). */
  readonly flush = (): void => {
    const text = this.out;
    if (text === "") return;
    this.out = "";
    this.beforeWrite();
    if (!this.socket.destroyed) this.socket.write(text);
  };

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
