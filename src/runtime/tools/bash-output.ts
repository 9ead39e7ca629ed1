/**
 * What the model sees of a command's output. Contract:
 * - `HeadTailCapture` keeps the first `headMax` and the last `tailMax` bytes a command prints (memory stays bounded
 *   however much is printed) and counts the rest.
 * - `cleanOutput` (core/terminal-text.ts, shared with web_fetch) turns terminal output into plain text: escape
 *   sequences removed, CR/CRLF → LF, other controls as control pictures. Invalid UTF-8 bytes are U+FFFD (the decoder's).
 * - `renderCapture` bounds the cleaned text, not only the raw bytes: the head part stays within `headMax` bytes and
 *   the tail within `tailMax` once cleaned (binary output grows when decoded: one invalid byte is three bytes of
 *   U+FFFD), never splits a character, and a single note says how many bytes of the command's output are not shown.
 */
import { StringDecoder } from "node:string_decoder";
import { cleanOutput } from "../../core/terminal-text.js";
import { completeUtf8End } from "../../core/utf8.js";

/** Keeps the first `headMax` and last `tailMax` bytes of a byte stream. */
export class HeadTailCapture {
  private head: Buffer[] = [];
  private headLen = 0;
  private tail: Buffer[] = [];
  private tailLen = 0;
  total = 0;
  constructor(
    private readonly headMax: number,
    private readonly tailMax: number,
  ) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    if (this.headLen < this.headMax) {
      const take = Math.min(chunk.length, this.headMax - this.headLen);
      this.head.push(chunk.subarray(0, take));
      this.headLen += take;
      chunk = chunk.subarray(take);
      if (chunk.length === 0) return;
    }
    this.tail.push(chunk);
    this.tailLen += chunk.length;
    while (this.tailLen > this.tailMax && this.tail.length > 0) {
      const first = this.tail[0] as Buffer;
      const excess = this.tailLen - this.tailMax;
      if (first.length <= excess) {
        this.tail.shift();
        this.tailLen -= first.length;
      } else {
        this.tail[0] = first.subarray(excess);
        this.tailLen -= excess;
      }
    }
  }

  /** The kept output, cleaned and bounded (see `renderCapture`). */
  text(): string {
    return renderCapture(Buffer.concat(this.head), Buffer.concat(this.tail), this.total, this.headMax, this.tailMax);
  }
}

/** The smallest `s ≥ start` that is not a continuation byte (at most three skipped: a character's own). */
function completeStart(buf: Buffer, start: number): number {
  let s = start;
  while (s < buf.length && s - start < 3 && ((buf[s] as number) & 0xc0) === 0x80) s++;
  return s;
}

type Part = { text: string; used: number };

/** `render(n)` for the largest `n ≤ max` whose text fits `budget` bytes (0 always fits: the empty text). */
function largestFitting(max: number, budget: number, render: (n: number) => Part): Part {
  const all = render(max);
  if (Buffer.byteLength(all.text) <= budget) return all;
  let lo = 0;
  let hi = max - 1;
  let best: Part = { text: "", used: 0 };
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const p = render(mid);
    if (Buffer.byteLength(p.text) <= budget) {
      best = p;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return best;
}

/**
 * The command's output as the model sees it: `head` and `tail` are the kept bytes of `total` printed (all of them
 * when nothing was dropped), each cleaned and fitted to its budget; a note between them counts the bytes of output
 * not shown.
 */
export function renderCapture(head: Buffer, tail: Buffer, total: number, headMax: number, tailMax: number): string {
  const decode = (b: Buffer): string => cleanOutput(new StringDecoder("utf8").end(b));
  if (total === head.length + tail.length) {
    // Nothing dropped: one piece, shown whole when it fits both budgets once cleaned.
    const all = Buffer.concat([head, tail]);
    const whole = decode(all);
    if (Buffer.byteLength(whole) <= headMax + tailMax) return whole;
    head = all.subarray(0, Math.min(all.length, headMax));
    tail = all.subarray(head.length);
  }
  const h = largestFitting(head.length, headMax, (n) => {
    const e = completeUtf8End(head, n);
    return { text: decode(head.subarray(0, e)), used: e };
  });
  const t = largestFitting(tail.length, tailMax, (n) => {
    const s = completeStart(tail, tail.length - n);
    return { text: decode(tail.subarray(s)), used: tail.length - s };
  });
  const omitted = total - h.used - t.used;
  if (omitted === 0) return h.text + t.text;
  return `${h.text}\n[… ${omitted} bytes of output omitted …]\n${t.text}`;
}
