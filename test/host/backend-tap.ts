/**
 * A loopback tap between a backend and the host's backend socket: a Unix socket of its own that forwards every
 * frame unchanged, in order, each way, and records it. A test can hold one direction from a chosen frame on (that
 * frame and every later one wait, still in order, until `release`), which is what a slow peer or a busy socket does
 * to a real stream, and can inject frames either way (a frame the host or the backend could have sent).
 */
import { mkdtempSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { attachLineReader, encodeFrame } from "../../src/transport/host-framing.js";
import type { Json } from "./helpers.js";

/** `up`: from the backend to the host; `down`: from the host to the backend. */
export type Direction = "up" | "down";

class Lane {
  /** Every frame that went this way, forwarded or still held, in order. */
  readonly frames: Json[] = [];
  /** Frames waiting for `release` (null: not holding). */
  held: string[] | null = null;
  holdFrom: ((f: Json) => boolean) | null = null;
  out?: Socket;
  forward(f: Json): void {
    this.frames.push(f);
    if (this.held === null && this.holdFrom?.(f) === true) {
      this.held = [];
      this.holdFrom = null;
    }
    const line = encodeFrame(f);
    if (this.held !== null) this.held.push(line);
    else this.out?.write(line);
  }
}

export class BackendTap {
  private readonly lanes = { up: new Lane(), down: new Lane() };
  private readonly sockets = new Set<Socket>();
  private constructor(
    readonly path: string,
    private readonly server: Server,
  ) {}

  /** A tap listening on a socket of its own, connecting each backend to `hostSocket`. */
  static async start(hostSocket: string): Promise<BackendTap> {
    const path = join(mkdtempSync(join(tmpdir(), "bh-tap-")), "backend.sock");
    const server = createServer();
    const tap = new BackendTap(path, server);
    server.on("connection", (backend) => {
      const host = createConnection(hostSocket);
      for (const s of [backend, host]) {
        tap.sockets.add(s);
        s.on("error", () => undefined);
        s.on("close", () => {
          tap.sockets.delete(s);
          backend.destroy();
          host.destroy();
        });
      }
      tap.lanes.up.out = host;
      tap.lanes.down.out = backend;
      attachLineReader(backend, { onFrame: (f) => tap.lanes.up.forward(f), onError: () => backend.destroy(), limit: 64 * 1024 * 1024 });
      attachLineReader(host, { onFrame: (f) => tap.lanes.down.forward(f), onError: () => host.destroy(), limit: 64 * 1024 * 1024 });
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    return tap;
  }

  /** The frames that went `dir` so far (forwarded or held), in order. */
  frames(dir: Direction): Json[] {
    return this.lanes[dir].frames;
  }

  /** Hold `dir` from the first frame matching `from` on (that frame included). */
  holdFrom(dir: Direction, from: (f: Json) => boolean): void {
    this.lanes[dir].holdFrom = from;
  }

  /** The frames held on `dir` (empty when not holding). */
  held(dir: Direction): Json[] {
    const l = this.lanes[dir];
    return l.held === null ? [] : l.frames.slice(l.frames.length - l.held.length);
  }

  /** Forward every frame held on `dir`, in order and in one write, and stop holding. */
  release(dir: Direction): void {
    const l = this.lanes[dir];
    const lines = l.held ?? [];
    l.held = null;
    l.holdFrom = null;
    if (lines.length > 0) l.out?.write(lines.join(""));
  }

  /** Send `f` the way `dir` goes, as if its sender had written it (it passes any frames held on that way). */
  inject(dir: Direction, f: Json): void {
    this.lanes[dir].out?.write(encodeFrame(f));
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
