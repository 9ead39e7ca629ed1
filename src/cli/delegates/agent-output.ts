/**
 * Reading a delegated CLI's output within bounds: its JSONL event stream (`JsonLines`) and Codex's `-o` reply file
 * (`readReplyFile`).
 *
 * Contract:
 * - An event line is at most `maxLine` bytes, not counting its newline. A longer line is skipped whole, up to its
 *   newline, however it arrives in chunks, and the line after it is read as usual; at most `maxLine` bytes of a line
 *   are ever held.
 * - The reply file is read to at most `max` bytes plus one (to know it was longer), never whole: `cut` says the file
 *   went on past `max`, and `size` is the file's size then. A file that is not a regular file (a FIFO, a device) is not read.
 */
import { constants } from "node:fs";
import { open } from "node:fs/promises";

/** Splits a byte stream into its lines of at most `maxLine` bytes, skipping longer ones whole. */
export class JsonLines {
  private buf: Buffer = Buffer.alloc(0);
  /** Inside a line that went past the bound: everything up to its newline is dropped. */
  private skipping = false;

  constructor(
    private readonly maxLine: number,
    private readonly onLine: (line: Buffer) => void,
  ) {}

  push(chunk: Buffer): void {
    if (this.skipping) {
      const nl = chunk.indexOf(10);
      if (nl < 0) return;
      this.skipping = false;
      chunk = chunk.subarray(nl + 1);
    }
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    let i: number;
    while ((i = this.buf.indexOf(10)) >= 0) {
      const line = this.buf.subarray(0, i);
      this.buf = this.buf.subarray(i + 1);
      if (line.length <= this.maxLine) this.onLine(line);
    }
    // Past the bound with no newline yet: before, the rest of this line was then read as a line of its own.
    if (this.buf.length > this.maxLine) {
      this.buf = Buffer.alloc(0);
      this.skipping = true;
    }
  }
}

/**
 * The first `max` bytes of the file at `path` as text (cut on a character boundary), whether it went on, its size in
 * bytes, or null.
 */
export async function readReplyFile(path: string, max: number): Promise<{ text: string; cut: boolean; size: number } | null> {
  // Non-blocking: opening a FIFO put there instead of the file would otherwise wait for a writer that never comes.
  const fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK).catch(() => null);
  if (fh === null) return null;
  try {
    const st = await fh.stat();
    if (!st.isFile()) return null;
    const buf = Buffer.alloc(max + 1);
    let n = 0;
    while (n < buf.length) {
      const { bytesRead } = await fh.read(buf, n, buf.length - n, n);
      if (bytesRead === 0) break;
      n += bytesRead;
    }
    const cut = n > max;
    let end = Math.min(n, max);
    // Back to the start of a character the cut went through (continuation bytes are 10xxxxxx).
    if (cut) {
      let k = end;
      while (k > 0 && k > end - 4 && (buf[k]! & 0xc0) === 0x80) k--;
      end = k;
    }
    // The size read when the file was shorter than its stat said (still being written): never less than what was read.
    return { text: buf.subarray(0, end).toString("utf8"), cut, size: cut ? Math.max(st.size, n) : n };
  } catch {
    return null;
  } finally {
    await fh.close().catch(() => undefined);
  }
}
