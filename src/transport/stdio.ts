/**
 * A JSONL transport over a byte stream pair (stdio, or any Readable/Writable such as a socket).
 * Contract (shared by every JSONL adapter, see test/helpers/transport-contract.ts):
 * - `frames()` yields records and `too_large` markers in input order; it ends at EOF (flushing a final
 *   unterminated line) or when `closeInput()` is called. Input is pulled, so a consumer that awaits between
 *   frames applies backpressure to the peer.
 * - `send(line)` queues one line; `flush()` hands the queue to the stream; `writable()` resolves when the output
 *   can take more; nothing queued is ever dropped unless the output broke (`broken`).
 * - `close()` flushes and waits for the output to drain; it is idempotent and never closes the process's stdout.
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

  async *frames(): AsyncGenerator<Frame> {
    const splitter = new LineSplitter(this.opts.maxRecordBytes);
    try {
      for await (const chunk of this.input as AsyncIterable<Buffer | string>) {
        for (const f of splitter.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk)) {
          if (this.inputClosed) return;
          yield f;
        }
        if (this.inputClosed) return;
      }
    } catch {
      return; // an input error ends input like EOF
    }
    if (!this.inputClosed) yield* splitter.end();
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

  close(): Promise<void> {
    return this.writer.close();
  }
}
