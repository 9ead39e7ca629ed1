/**
 * LF-delimited record framing over byte chunks (the one framing implementation; pi `jsonl.ts` style).
 * Contract:
 * - Splits on LF only (never U+2028/2029); strips one trailing CR, so LF and CRLF records are equal.
 * - A record whose bytes including its LF exceed `maxRecordBytes` is discarded through its LF without
 *   ever being buffered whole, and reported once as `too_large`. A final line without LF is handled at `end()`
 *   as if it had one.
 * - Records are returned as bytes; decoding happens per whole record, so a multi-byte character split across
 *   chunks survives.
 */
export type Frame = { kind: "record"; bytes: Buffer } | { kind: "too_large" };

export class LineSplitter {
  private parts: Buffer[] = [];
  private length = 0;
  private discarding = false;

  constructor(private readonly maxRecordBytes: number) {}

  push(chunk: Buffer): Frame[] {
    const out: Frame[] = [];
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
      if (this.length + segLen + 1 > this.maxRecordBytes) {
        this.parts = [];
        this.length = 0;
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
