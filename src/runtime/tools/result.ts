/**
 * Result helpers shared by every tool: bounding text before it reaches the model and building
 * `ToolResult`s. Bounds are in UTF-8 bytes; truncation keeps the head and the tail and says how
 * much was omitted, never splitting a multi-byte character.
 */
import type { ToolErrorKind, ToolResult } from "../types.js";

/** Largest `content` any tool result carries (bytes, UTF-8), including the omission note. */
export const MAX_RESULT_BYTES = 50 * 1024;

/** Cuts `buf` to at most `max` bytes at a UTF-8 character boundary (from the start). */
function headBytes(buf: Buffer, max: number): Buffer {
  if (buf.length <= max) return buf;
  let end = max;
  // Step back over continuation bytes (10xxxxxx) so no character is split.
  while (end > 0 && ((buf[end] ?? 0) & 0xc0) === 0x80) end--;
  return buf.subarray(0, end);
}

/** Last at most `max` bytes of `buf`, starting at a UTF-8 character boundary. */
function tailBytes(buf: Buffer, max: number): Buffer {
  if (buf.length <= max) return buf;
  let start = buf.length - max;
  while (start < buf.length && ((buf[start] ?? 0) & 0xc0) === 0x80) start++;
  return buf.subarray(start);
}

/**
 * Bounds `text` to `max` bytes. When it is longer, returns roughly 40% head and 60% tail joined
 * by a line `[… N bytes omitted …]`; the result (note included) is never longer than `max` bytes.
 * `extraOmitted` adds bytes already dropped upstream (e.g. by a streaming capture) to the count.
 */
export function boundText(text: string, max = MAX_RESULT_BYTES, extraOmitted = 0): string {
  const buf = Buffer.from(text, "utf8");
  if (buf.length <= max && extraOmitted === 0) return text;
  if (buf.length <= max) return joinWithNote(buf, Buffer.alloc(0), extraOmitted, max);
  const noteReserve = 64;
  const room = Math.max(0, max - noteReserve);
  const head = headBytes(buf, Math.floor(room * 0.4));
  const tail = tailBytes(buf.subarray(head.length), room - head.length);
  const omitted = buf.length - head.length - tail.length + extraOmitted;
  return joinWithNote(head, tail, omitted, max);
}

function joinWithNote(head: Buffer, tail: Buffer, omitted: number, max: number): string {
  const note = `\n[… ${omitted} bytes omitted …]\n`;
  const out = head.toString("utf8") + note + tail.toString("utf8");
  // Only reachable for absurdly small `max`; keep the contract anyway.
  return Buffer.byteLength(out) <= max ? out : headBytes(Buffer.from(out), max).toString("utf8");
}

/** A successful result with bounded content. */
export function ok(content: string, extra: Partial<ToolResult> = {}): ToolResult {
  return { content: boundText(content), isError: false, ...extra };
}

/** A failed result with bounded content. Tools return this; they never throw to the caller. */
export function fail(errorKind: ToolErrorKind, message: string, extra: Partial<ToolResult> = {}): ToolResult {
  return { content: boundText(message), isError: true, errorKind, ...extra };
}

/** Safe one-line description of an unknown thrown value (no stack). */
export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code !== undefined && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

/** Maps a filesystem error to a result: missing/denied paths are ordinary `failed` results. */
export function fsFail(err: unknown, what: string): ToolResult {
  return fail("failed", `${what}: ${describeError(err)}`);
}
