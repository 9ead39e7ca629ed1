/**
 * A JSONL transport over a byte stream pair (stdio, or any Readable/Writable such as a socket).
 * Contract (shared by every JSONL adapter, see test/helpers/transport-contract.ts):
 * - `frames()` yields records and `too_large` markers in input order; it ends at EOF (flushing a final
 *   unterminated line) or when `closeInput()` is called. Input is pulled, so a consumer that awaits between
 *   frames applies backpressure to the peer.
 * - `send(line)` queues one line; `flush()` hands the queue to the stream; `writable()` resolves when the output
 *   can take more; nothing queued is ever dropped unless the output broke (`broken`).
 * - `close()` flushes and waits for the output to drain (with `graceMs`, no longer than output keeps moving); it is
 *   idempotent and never closes the process's stdout.
 */
import type { Readable, Writable } from "node:stream";
import { LineSplitter, type Frame } from "./jsonl.js";
import { LineWriter } from "./line-writer.js";

export interface JsonlTransportOptions {
  maxRecordBytes: number;
  highWaterBytes?: number;
  onOutputBroken?: (err: unknown) => void;
}

export class JsonlTransport {
  private readonly writer: LineWriter;
  private inputClosed = false;

  constructor(
    private readonly input: Readable,
    output: Writable,
    private readonly opts: JsonlTransportOptions,
  ) {
    this.writer = new LineWriter(output, { highWaterBytes: opts.highWaterBytes, onBroken: opts.onOutputBroken });
  }

  /**
   * Reads the input through a `data` listener paused after every chunk and resumed when the frames so far are taken
   * (the pull of an async iterator, which costs ~0.7 ms more to set up before a fresh process's first read: its
   * end-of-stream tracking). An input error or a close before the end ends input like EOF (no final partial line);
   * a consumer that stops early destroys the input, as the iterator did.
   */
  async *frames(): AsyncGenerator<Frame> {
    const splitter = new LineSplitter(this.opts.maxRecordBytes);
    const input = this.input;
    const chunks: Buffer[] = [];
    let state = "open" as "open" | "ended" | "failed"; // set by the listeners
    let wake: (() => void) | null = null;
    const notify = (): void => {
      const w = wake;
      wake = null;
      w?.();
    };
    const onData = (chunk: Buffer | string): void => {
      chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
      input.pause();
      notify();
    };
    const onEnd = (): void => {
      if (state === "open") state = "ended";
      notify();
    };
    const onFailed = (): void => {
      if (state === "open") state = "failed";
      notify();
    };
    input.on("data", onData);
    input.on("end", onEnd);
    input.on("error", onFailed);
    input.on("close", onFailed); // after "end" a no-op; before it, a premature close
    try {
      for (;;) {
        const chunk = chunks.shift();
        if (chunk !== undefined) {
          for (const f of splitter.push(chunk)) {
            if (this.inputClosed) return;
            yield f;
          }
          if (this.inputClosed) return;
          continue;
        }
        if (state !== "open" || this.inputClosed) break;
        input.resume();
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      input.off("data", onData);
      input.off("end", onEnd);
      input.off("error", onFailed);
      input.off("close", onFailed);
      // An error the input reports after reading stopped (nothing reads it any more) must not end the process as an
      // unhandled 'error' event.
      input.on("error", () => undefined);
      if (state === "open") input.destroy();
    }
    if (state === "ended" && !this.inputClosed) yield* splitter.end();
  }

  /** Stops reading: `frames()` ends after the current frame. */
  closeInput(): void {
    this.inputClosed = true;
    this.input.destroy();
  }

  send(line: string): void {
    this.writer.enqueue(line);
  }

  flush(): void {
    this.writer.flush();
  }

  get pressured(): boolean {
    return this.writer.pressured;
  }

  get broken(): boolean {
    return this.writer.broken;
  }

  writable(): Promise<void> {
    return this.writer.writable();
  }

  /** See `LineWriter.unthrottle`. */
  unthrottle(): void {
    this.writer.unthrottle();
  }

  /** See `LineWriter.close`: with `graceMs`, output that makes no progress for that long is left behind. */
  close(graceMs?: number): Promise<void> {
    return this.writer.close(graceMs);
  }

  /** `close` left output behind (`LineWriter.abandoned`). */
  get abandoned(): boolean {
    return this.writer.abandoned;
  }
}
