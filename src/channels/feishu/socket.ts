/**
 * One Feishu long connection (WebSocket, binary `pbbp2.Frame`s).
 *
 * Contract:
 * - A ping goes out right after connecting and then every `PingInterval` (a pong's ClientConfig may change it);
 *   2 × interval + 30 s without any frame closes the link as dead.
 * - A WebSocket message is read up to MAX_FRAME_BYTES (8 MiB + 64 KiB); a bigger one closes the link. An event sent
 *   in one frame is at most 8 MiB too (a bigger one is dropped, like an over-long fragmented one).
 * - Event fragments (`sum`/`seq` under one `message_id`) are reassembled (≤64 parts, ≤8 MiB, 30 s from the first
 *   fragment on the timers); the handler gets the parsed JSON event. A fragment sent again replaces the earlier copy
 *   (its bytes counted once, at its new size). At most 16 events wait unfinished, holding at most 16 MiB together:
 *   a fragment that would pass either bound drops its own event, never one already waiting (dropping the oldest
 *   instead lets each dropped event's later fragments push out the next, until none is left). Dropped events are
 *   not acked, so the platform pushes them again. The ack (the same frame plus `biz_rt`, payload `{"code":200}`, or 500 when the handler
 *   throws) is sent only after the handler's promise settles, so callers make their claim durable first and return.
 * - `closed` resolves once the socket is gone, for any reason; `close()` is idempotent.
 */
import WebSocket from "ws";
import { realTimers, type Timers } from "../common/backoff.js";
import { decodeFrame, encodeFrame, header, METHOD_CONTROL, METHOD_DATA, type Frame } from "./frame.js";

export const MAX_PARTS = 64;
export const MAX_EVENT_BYTES = 8 * 1024 * 1024;
/** Unfinished events at once, and the bytes they hold together: a server cannot make the bridge hold more. */
export const MAX_PARTIAL_EVENTS = 16;
export const MAX_PARTIAL_BYTES = 16 * 1024 * 1024;
export const FRAGMENT_TTL_MS = 30_000;
/**
 * The largest WebSocket message read: one event's bound plus room for the frame's own fields (headers, ids). ws
 * would otherwise buffer up to 100 MiB of one frame before anything here could look at it; a bigger frame closes the
 * link (close code 1009) and the bridge reconnects.
 */
export const MAX_FRAME_BYTES = MAX_EVENT_BYTES + 64 * 1024;
/** Why the link closed when the server sent a frame over MAX_FRAME_BYTES. */
export const OVERSIZED_FRAME = `the server sent a frame over ${MAX_FRAME_BYTES} bytes (one event is at most 8 MiB); reconnecting`;

/** The close reason of a link that went silent. */
export const DEAD_LINK = "no frames from the server: link presumed dead";

/** Silence after which the link is dead: two ping intervals plus 30 s. */
export function deadAfterMs(pingMs: number): number {
  return 2 * pingMs + 30_000;
}

export type EventHandler = (event: unknown) => Promise<void>;

interface Partial {
  parts: Array<Uint8Array | undefined>;
  bytes: number;
  /** Drops the event FRAGMENT_TTL_MS after its first fragment, whether or not anything else arrives. */
  expiry: unknown;
}

export class FeishuSocket {
  private ws: WebSocket | null = null;
  private pingTimer: unknown = null;
  private deadTimer: unknown = null;
  private pingMs: number;
  private serviceId = 0;
  /** Unfinished events by frame `message_id`, oldest first; `partialBytes` is the sum of their `bytes`. */
  private readonly partials = new Map<string, Partial>();
  private partialBytes = 0;
  private resolveClosed!: (reason: string) => void;
  readonly closed: Promise<string> = new Promise((r) => (this.resolveClosed = r));

  constructor(
    private readonly url: string,
    pingIntervalS: number,
    private readonly onEvent: EventHandler,
    private readonly timers: Timers = realTimers,
  ) {
    this.pingMs = Math.max(1, pingIntervalS) * 1000;
  }

  /** Resolves once open; rejects (without the URL) when the handshake fails. */
  async connect(): Promise<void> {
    try {
      this.serviceId = Number(new URL(this.url).searchParams.get("service_id") ?? "0") || 0;
    } catch {
      throw new Error("long connection: invalid endpoint URL");
    }
    const ws = new WebSocket(this.url, { handshakeTimeout: 30_000, maxPayload: MAX_FRAME_BYTES });
    this.ws = ws;
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", () => reject(new Error("long connection: handshake failed")));
    });
    let why = "socket closed";
    ws.on("error", (e: Error & { code?: string }) => {
      if (e.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") why = OVERSIZED_FRAME;
    });
    ws.on("close", () => this.finish(why));
    ws.on("message", (data: Buffer) => this.onMessage(data));
    this.ping();
    this.armDead();
  }

  private send(f: Frame): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(encodeFrame(f));
  }

  private ping(): void {
    this.send({ seqId: 0n, logId: 0n, service: this.serviceId, method: METHOD_CONTROL, headers: [{ key: "type", value: "ping" }] });
    this.schedulePing();
  }

  /** (Re)arms the next ping one interval from now (also when a pong changed the interval). */
  private schedulePing(): void {
    if (this.pingTimer !== null) this.timers.clear(this.pingTimer);
    this.pingTimer = this.timers.set(() => this.ping(), this.pingMs);
  }

  private armDead(): void {
    if (this.deadTimer !== null) this.timers.clear(this.deadTimer);
    this.deadTimer = this.timers.set(() => this.close(DEAD_LINK), deadAfterMs(this.pingMs));
  }

  private onMessage(data: Buffer): void {
    this.armDead();
    let f: Frame;
    try {
      f = decodeFrame(data);
    } catch {
      return; // a frame we cannot read is dropped; the server re-pushes unacked events
    }
    const type = header(f, "type");
    if (f.method === METHOD_CONTROL) {
      if (type === "pong" && f.payload) {
        try {
          const cfg = JSON.parse(Buffer.from(f.payload).toString("utf8")) as { PingInterval?: number };
          if (typeof cfg.PingInterval === "number" && cfg.PingInterval > 0 && cfg.PingInterval * 1000 !== this.pingMs) {
            this.pingMs = cfg.PingInterval * 1000;
            this.schedulePing();
            this.armDead();
          }
        } catch {
          // pong without a readable config keeps the interval
        }
      }
      return;
    }
    if (f.method !== METHOD_DATA || (type !== "event" && type !== "card")) return;
    const payload = this.reassemble(f);
    if (payload === null) return;
    let event: unknown;
    try {
      event = JSON.parse(Buffer.from(payload).toString("utf8"));
    } catch {
      this.ack(f, 500);
      return;
    }
    const started = Date.now();
    void this.onEvent(event).then(
      () => this.ack(f, 200, started),
      () => this.ack(f, 500, started),
    );
  }

  private drop(id: string): void {
    const p = this.partials.get(id);
    if (!p) return;
    this.timers.clear(p.expiry);
    this.partialBytes -= p.bytes;
    this.partials.delete(id);
  }

  private reassemble(f: Frame): Uint8Array | null {
    const sum = Number(header(f, "sum") ?? "1");
    const seq = Number(header(f, "seq") ?? "0");
    const id = header(f, "message_id") ?? "";
    const payload = f.payload ?? new Uint8Array();
    if (!(sum > 1)) return payload.length <= MAX_EVENT_BYTES ? payload : null;
    if (!Number.isInteger(sum) || !Number.isInteger(seq) || sum > MAX_PARTS || seq < 0 || seq >= sum) return null;
    let p = this.partials.get(id);
    if (p && p.parts.length !== sum) this.drop(id); // the same event cannot change its fragment count: start over
    if (!p || p.parts.length !== sum) {
      if (this.partials.size >= MAX_PARTIAL_EVENTS) return null;
      p = { parts: new Array<Uint8Array | undefined>(sum).fill(undefined), bytes: 0, expiry: this.timers.set(() => this.drop(id), FRAGMENT_TTL_MS) };
      this.partials.set(id, p);
    }
    // A fragment sent again replaces the earlier copy: its old size comes off before the new one counts.
    const delta = payload.length - (p.parts[seq]?.length ?? 0);
    p.parts[seq] = payload;
    p.bytes += delta;
    this.partialBytes += delta;
    if (p.bytes > MAX_EVENT_BYTES) {
      this.drop(id);
      return null;
    }
    if (p.parts.every((x) => x !== undefined)) {
      const whole = Buffer.concat(p.parts);
      this.drop(id);
      return whole;
    }
    if (this.partialBytes > MAX_PARTIAL_BYTES) this.drop(id);
    return null;
  }

  private ack(f: Frame, code: number, started = Date.now()): void {
    this.send({
      ...f,
      headers: [...f.headers, { key: "biz_rt", value: String(Date.now() - started) }],
      payload: Buffer.from(JSON.stringify({ code })),
    });
  }

  private finish(reason: string): void {
    for (const id of [...this.partials.keys()]) this.drop(id);
    if (this.pingTimer !== null) this.timers.clear(this.pingTimer);
    if (this.deadTimer !== null) this.timers.clear(this.deadTimer);
    this.pingTimer = this.deadTimer = null;
    this.resolveClosed(reason);
  }

  close(reason = "closed"): void {
    this.finish(reason);
    this.ws?.terminate();
  }
}
