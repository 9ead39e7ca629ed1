/**
 * One SCV v3 connection (NDJSON over a Unix socket or a child's stdio), client side.
 *
 * Contract:
 * - `initialize()` must succeed before any other request; a different `protocol_version` is fatal.
 * - Every request gets a fresh `request_id`; events are routed to the listener registered for that id (events of
 *   server-started turns, whose ids we never issued, go to `onOther`). Unknown event types are skipped, as v3
 *   clients do; unknown fields are ignored.
 * - Server frames over 8 MiB are a protocol failure (`ScvConnectionError`); when the input ends or fails, every
 *   pending listener gets `onClose` exactly once.
 */
import type { Readable, Writable } from "node:stream";
import { LineSplitter, decodeRecord } from "../../transport/jsonl.js";
import { LineWriter } from "../../transport/line-writer.js";
import { textOf } from "../../core/json-text.js";

export const PROTOCOL_VERSION = 3;
export const MAX_SERVER_FRAME_BYTES = 8 * 1024 * 1024;

export type ScvEvent = Record<string, unknown> & { type: string };

export interface Listener {
  onEvent(ev: ScvEvent): void;
  onClose(err: Error): void;
}

export class ScvConnectionError extends Error {
  override name = "ScvConnectionError";
}

export class ScvConnection {
  private readonly writer: LineWriter;
  private readonly listeners = new Map<string, Listener>();
  private nextId = 1;
  private closedErr: Error | null = null;
  onOther: (ev: ScvEvent) => void = () => undefined;

  constructor(input: Readable, output: Writable) {
    this.writer = new LineWriter(output, { onBroken: () => this.close(new ScvConnectionError("the SCV server's input closed")) });
    const splitter = new LineSplitter(MAX_SERVER_FRAME_BYTES + 1);
    input.on("data", (chunk: Buffer) => {
      for (const f of splitter.push(chunk)) this.frame(f);
    });
    input.on("end", () => {
      for (const f of splitter.end()) this.frame(f);
      this.close(new ScvConnectionError("the SCV server closed the connection"));
    });
    input.on("error", () => this.close(new ScvConnectionError("the SCV connection failed")));
  }

  private frame(f: { kind: "record"; bytes: Buffer } | { kind: "too_large" }): void {
    if (f.kind === "too_large") return this.close(new ScvConnectionError("the SCV server sent a frame over 8 MiB"));
    const text = decodeRecord(f.bytes);
    let ev: unknown;
    try {
      ev = text === null ? null : JSON.parse(text);
    } catch {
      ev = null;
    }
    if (ev === null || typeof ev !== "object" || typeof (ev as { type?: unknown }).type !== "string") {
      return this.close(new ScvConnectionError("the SCV server sent a line that is not a JSON event"));
    }
    const e = ev as ScvEvent;
    const rid = e["request_id"];
    const l = typeof rid === "string" ? this.listeners.get(rid) : undefined;
    if (l) l.onEvent(e);
    else this.onOther(e);
  }

  get closed(): Error | null {
    return this.closedErr;
  }

  close(err: Error): void {
    if (this.closedErr) return;
    this.closedErr = err;
    const ls = [...this.listeners.values()];
    this.listeners.clear();
    for (const l of ls) l.onClose(err);
  }

  /** Sends one request; `listener` receives every event carrying its request_id until `release(id)`. */
  send(type: string, body: Record<string, unknown>, listener: Listener): string {
    const id = `b${this.nextId++}`;
    if (this.closedErr) {
      const err = this.closedErr;
      queueMicrotask(() => listener.onClose(err));
      return id;
    }
    this.listeners.set(id, listener);
    this.writer.enqueue(JSON.stringify({ type, request_id: id, ...body }));
    return id;
  }

  /** A fire-and-forget request (`approval.resolve`, `turn.cancel`); its answer, if any, is ignored. */
  notify(type: string, body: Record<string, unknown>): void {
    if (this.closedErr) return;
    this.writer.enqueue(JSON.stringify({ type, request_id: `b${this.nextId++}`, ...body }));
  }

  release(id: string): void {
    this.listeners.delete(id);
  }

  /** Sends a request and resolves with the first event of one of `types` (or rejects on `error`). */
  request(type: string, body: Record<string, unknown>, types: readonly string[]): Promise<ScvEvent> {
    return new Promise((resolve, reject) => {
      const id = this.send(type, body, {
        onEvent: (ev) => {
          if (ev.type === "error") {
            this.release(id);
            reject(new ScvRequestError(textOf(ev["code"], "unknown"), textOf(ev["message"])));
          } else if (types.includes(ev.type)) {
            this.release(id);
            resolve(ev);
          }
        },
        onClose: reject,
      });
    });
  }
}

export class ScvRequestError extends Error {
  override name = "ScvRequestError";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message.slice(0, 200)}`);
  }
}
