/**
 * LF-delimited record framing over byte chunks (the one framing implementation; pi `jsonl.ts` style).
 * Contract:
 * - Splits on LF only (never U+2028/2029); strips one trailing CR, so LF and CRLF records are equal.
 * - A record whose bytes including its LF exceed `maxRecordBytes` is never buffered whole. The oversize policy
 *   says what follows: `skip` (default) discards it through its LF and reports it once as `too_large`, then
 *   goes on; `stop` reports `too_large` as soon as the bound is passed and yields nothing more (a peer that
 *   must not resynchronize: the host's backend socket, a client reading a service). A final line without LF is
 *   handled at `end()` as if it had one.
 * - `maxRecordBytes` may be a function (a bound negotiated after the stream started); it is read per chunk.
 * - Records are returned as bytes; decoding happens per whole record, so a multi-byte character split across
 *   chunks survives.
 */
export type Frame = { kind: "record"; bytes: Buffer } | { kind: "too_large" };

export type OversizePolicy = "skip" | "stop";

export class LineSplitter {
  private parts: Buffer[] = [];
  private length = 0;
  private discarding = false;
  private stopped = false;
  private readonly max: () => number;
  private readonly stopOnOversize: boolean;

  constructor(maxRecordBytes: number | (() => number), opts: { oversize?: OversizePolicy } = {}) {
    this.max = typeof maxRecordBytes === "number" ? () => maxRecordBytes : maxRecordBytes;
    this.stopOnOversize = opts.oversize === "stop";
  }

  /** Bytes of an unterminated record held so far (non-zero at EOF: the stream ended mid-record). */
  get pending(): number {
    return this.length;
  }

  push(chunk: Buffer): Frame[] {
    const out: Frame[] = [];
    if (this.stopped) return out;
    const maxRecordBytes = this.max();
    let pos = 0;
    while (pos < chunk.length) {
      const lf = chunk.indexOf(10, pos);
      const end = lf === -1 ? chunk.length : lf;
      if (this.discarding) {
        if (lf === -1) return out;
        this.discarding = false;
        out.push({ kind: "too_large" });
        pos = lf + 1;
        continue;
      }
      const segLen = end - pos;
      // Content of length L plus its LF must fit: L + 1 <= max.
      if (this.length + segLen + 1 > maxRecordBytes) {
        this.parts = [];
        this.length = 0;
        if (this.stopOnOversize) {
          this.stopped = true;
          out.push({ kind: "too_large" });
          return out;
        }
        if (lf === -1) {
          this.discarding = true;
          return out;
        }
        out.push({ kind: "too_large" });
        pos = lf + 1;
        continue;
      }
      if (lf === -1) {
        this.parts.push(chunk.subarray(pos));
        this.length += segLen;
        return out;
      }
      let bytes: Buffer;
      if (this.parts.length === 0) bytes = chunk.subarray(pos, end);
      else {
        this.parts.push(chunk.subarray(pos, end));
        bytes = Buffer.concat(this.parts, this.length + segLen);
        this.parts = [];
        this.length = 0;
      }
      out.push({ kind: "record", bytes: stripCr(bytes) });
      pos = lf + 1;
    }
    return out;
  }

  /** Flushes a final unterminated line (EOF). */
  end(): Frame[] {
    if (this.stopped) return [];
    if (this.discarding) {
      this.discarding = false;
      return [{ kind: "too_large" }];
    }
    if (this.length === 0 && this.parts.length === 0) return [];
    const bytes = Buffer.concat(this.parts, this.length);
    this.parts = [];
    this.length = 0;
    return [{ kind: "record", bytes: stripCr(bytes) }];
  }
}

function stripCr(b: Buffer): Buffer {
  return b.length > 0 && b[b.length - 1] === 13 ? b.subarray(0, b.length - 1) : b;
}

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Decodes a whole record as strict UTF-8; `null` when the bytes are not valid UTF-8. */
export function decodeRecord(bytes: Buffer): string | null {
  try {
    return decoder.decode(bytes);
  } catch {
    return null;
  }
}
