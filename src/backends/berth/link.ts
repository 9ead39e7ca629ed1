/**
 * The Berth backend's connection to the host: one Unix-socket connection at a time, re-opened with bounded
 * exponential backoff until `stop()`; frames in and out (the host's line framing), drain-aware sends, and
 * ping/pong round trips (`sync`).
 */
import { createConnection, type Socket } from "node:net";
import { attachLineReader, encodeFrame } from "../../transport/host-framing.js";
import type { Json } from "../../core/json-bounds.js";
import { drainedOrClosed } from "../../core/drain.js";

const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

export interface LinkHandlers {
  /** A connection is open: say hello. */
  onOpen(): void;
  /** A frame from the host (pongs of `sync` are handled here and not passed on). */
  onFrame(f: Json): void;
  /** The connection closed (after which `connected` is false). */
  onClose(): void;
  log(msg: string): void;
}

export class HostLink {
  private sock?: Socket | undefined;
  private closed = false;
  private loop?: Promise<void>;
  private readonly pongs = new Map<string, () => void>();
  private pingCounter = 0;

  constructor(
    private readonly socketPath: string,
    private readonly h: LinkHandlers,
  ) {}

  get connected(): boolean {
    return this.sock !== undefined;
  }

  start(): void {
    this.loop = this.connectLoop();
  }

  /** No more reconnections, and `sync` resolves at once (the connection is kept until `end`). */
  stop(): void {
    this.closed = true;
  }

  /** Disconnect and wait for the connection loop to finish (call `stop` first). */
  async end(): Promise<void> {
    this.sock?.end();
    this.sock?.destroy();
    await this.loop;
  }

  private async connectLoop(): Promise<void> {
    let backoff = BACKOFF_MIN_MS;
    while (!this.closed) {
      const sock = await new Promise<Socket | null>((resolve) => {
        const s = createConnection(this.socketPath);
        s.once("connect", () => resolve(s));
        s.once("error", () => resolve(null));
      });
      if (sock && !this.closed) {
        backoff = BACKOFF_MIN_MS;
        await this.serve(sock);
      } else sock?.destroy();
      if (this.closed) return;
      await sleep(backoff);
      backoff = Math.min(BACKOFF_MAX_MS, backoff * 2);
    }
  }

  /** Speak the protocol on one connection until it closes. */
  private serve(sock: Socket): Promise<void> {
    this.sock = sock;
    return new Promise((resolve) => {
      const stop = attachLineReader(sock, {
        onFrame: (f) => this.onFrame(f),
        onError: (e) => {
          this.h.log(`berth runtime: bad frame from host (${e.kind})`);
          sock.destroy();
        },
      });
      sock.on("error", () => {});
      sock.once("close", () => {
        stop();
        if (this.sock === sock) this.sock = undefined;
        this.h.onClose();
        resolve();
      });
      this.h.onOpen();
    });
  }

  private onFrame(f: Json): void {
    if (f.type === "pong" && typeof f.id === "string" && this.pongs.has(f.id)) {
      this.pongs.get(f.id)!();
      return;
    }
    this.h.onFrame(f);
  }

  /** Write one frame; false when not connected or the socket is backed up. */
  send(frame: Json): boolean {
    const sock = this.sock;
    if (!sock || sock.destroyed) return false;
    return sock.write(encodeFrame(frame));
  }

  /** Write one frame; when the socket is backed up, resolves once it drains (or closes). Call only when connected. */
  sendOrWait(frame: Json): void | Promise<void> {
    const sock = this.sock;
    if (!sock) return;
    if (this.send(frame)) return;
    return drainedOrClosed(sock);
  }

  /**
   * A ping/pong round trip with the host: resolves once every frame the host sent before answering has been
   * handled here (one ordered socket). Resolves at once when not connected.
   */
  sync(): Promise<void> {
    const sock = this.sock;
    if (sock === undefined || sock.destroyed || this.closed) return Promise.resolve();
    const id = `sync-${++this.pingCounter}`;
    return new Promise<void>((resolve) => {
      const done = (): void => {
        this.pongs.delete(id);
        sock.off("close", done);
        resolve();
      };
      this.pongs.set(id, done);
      sock.once("close", done); // the host is gone: nothing more can arrive
      this.send({ type: "ping", id });
    });
  }
}
