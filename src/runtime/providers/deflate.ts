/**
 * The `deflate` coding in both forms servers send under that name. HTTP defines it as the zlib format (RFC 1950: a
 * two-byte header, the deflate data, an Adler-32), but some old servers and proxies send the bare deflate data (RFC
 * 1951), which browsers and curl accept too. Loaded by content-coding.ts with the first `deflate` body (it needs
 * node:zlib, loaded then, and node:stream), never on an uncompressed path.
 *
 * Contract: `autoInflate(z)` is a Transform that holds the body's first two bytes, then inflates the body as zlib
 * when they are a zlib header (`zlibHeader`), else as raw deflate. Everything else is node:zlib's: its errors (with
 * their `code`: `Z_DATA_ERROR` for a corrupt stream in either form, `Z_BUF_ERROR` for one cut short, an empty body
 * included) fail the Transform as they are, and backpressure holds end to end (the inner decompressor is paused while
 * the Transform's output is not read, and its input waits for it to take more), so content-coding.ts's bounds hold.
 */
import { Transform, type TransformCallback } from "node:stream";
import type * as Zlib from "node:zlib";

/**
 * Whether `b0 b1` open a zlib stream (RFC 1950 §2.2): compression method 8 (deflate), a window of at most 32 KiB and
 * the header check (the two bytes, big-endian, a multiple of 31). Raw deflate opening with such bytes would need a
 * stored block with non-zero padding bits, which no encoder writes.
 */
export function zlibHeader(b0: number, b1: number): boolean {
  return (b0 & 0x0f) === 8 && b0 >> 4 <= 7 && ((b0 << 8) | b1) % 31 === 0;
}

class AutoInflate extends Transform {
  private inner: Zlib.Inflate | Zlib.InflateRaw | null = null;
  /** The body's first byte while the second has not arrived. */
  private head: Buffer | null = null;

  constructor(private readonly z: typeof Zlib) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, cb: TransformCallback): void {
    let inner = this.inner;
    if (inner === null) {
      if (this.head !== null) chunk = Buffer.concat([this.head, chunk]);
      if (chunk.length < 2) {
        this.head = chunk;
        return cb();
      }
      this.head = null;
      inner = this.start(chunk);
    }
    if (inner.write(chunk)) cb();
    else inner.once("drain", () => cb());
  }

  override _flush(cb: TransformCallback): void {
    // A body of fewer than two bytes: zlib's own reading (it ends inside the stream, `Z_BUF_ERROR`).
    const inner = this.inner ?? this.start(this.head ?? Buffer.alloc(0));
    if (this.head !== null) inner.write(this.head);
    this.head = null;
    inner.once("end", () => cb());
    inner.end();
  }

  /** The consumer wants more: the inner decompressor, paused when the output was full, goes on. */
  override _read(size: number): void {
    super._read(size);
    this.inner?.resume();
  }

  override _destroy(err: Error | null, cb: (error?: Error | null) => void): void {
    this.inner?.destroy();
    cb(err);
  }

  private start(first: Buffer): Zlib.Inflate | Zlib.InflateRaw {
    const inner = first.length >= 2 && !zlibHeader(first[0]!, first[1]!) ? this.z.createInflateRaw() : this.z.createInflate();
    inner.on("data", (d: Buffer) => {
      if (!this.push(d)) inner.pause();
    });
    inner.on("error", (e) => this.destroy(e));
    this.inner = inner;
    return inner;
  }
}

/** A decompressor for `deflate`, zlib-wrapped or raw (see the module contract). */
export function autoInflate(z: typeof Zlib): Transform {
  return new AutoInflate(z);
}
