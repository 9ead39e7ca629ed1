/**
 * SSE framing for the stream driver (driver.ts): UTF-8 decoding across chunks, the event and response bounds, and
 * the count of events and comments the driver's idle clock reads. Feeds a `WireDecoder` synchronously.
 */
import { StringDecoder } from "node:string_decoder";
import { createParser, type EventSourceParser } from "eventsource-parser";
import type { ProviderEvent } from "../types.js";
import { utf8Bytes, type ProviderBounds } from "./accumulate.js";
import type { WireDecoder } from "./driver.js";
import { LABELS, limitFailure } from "./errors.js";

/** SSE framing with the event and response bounds, feeding a decoder synchronously. */
export class BoundedSse {
  private bytes = 0;
  /**
   * UTF-8 across chunk boundaries. StringDecoder rather than TextDecoder: its streaming decode is V8's own UTF-8
   * path (about 4× faster on a 2.6 MB event stream); invalid bytes become U+FFFD in both. A leading BOM is
   * dropped, as TextDecoder did (and as SSE requires).
   */
  private readonly text = new StringDecoder("utf8");
  private started = false;
  private readonly parser: EventSourceParser;
  /** SSE events dispatched so far (any event, before its decoding): the idle clock's progress. */
  events = 0;
  /** Comment lines since the last event (a stream kept open by heartbeats alone). */
  commentsSinceEvent = 0;

  constructor(
    bounds: ProviderBounds,
    private readonly decoder: WireDecoder,
    private readonly out: ProviderEvent[],
  ) {
    const maxEvent = bounds.maxSseEventBytes;
    this.maxResponse = bounds.maxResponseBytes;
    this.maxRest = maxEvent + 1024;
    this.parser = createParser({
      // Characters never exceed bytes, so this guard only trips on lines that cannot fit the
      // event bound anyway (plus room for the `data: ` prefix); the exact check is per event.
      maxBufferSize: maxEvent + 1024,
      onEvent: (ev) => {
        this.events++;
        this.commentsSinceEvent = 0;
        const d = ev.data;
        if (d.length * 3 > maxEvent && (d.length > maxEvent || utf8Bytes(d) > maxEvent)) {
          throw limitFailure(LABELS.eventLimit);
        }
        decoder.onEvent(ev.event, d, out);
      },
      onComment: () => {
        this.commentsSinceEvent++;
      },
      onError: (err) => {
        if (err.type === "max-buffer-size-exceeded") throw limitFailure(LABELS.eventLimit);
      },
    });
  }
  private readonly maxResponse: number;
  private readonly maxRest: number;

  /**
   * Counts and parses one body chunk; decoder output lands in `out`. With `untilOutput`, the chunk's text is parsed
   * one SSE event at a time until the decoder produced output that is not terminal; the rest of the chunk is then
   * held (`held`) until `resume()`, so a consumer can act on the first output before the rest is decoded. The bytes
   * are counted (and the response bound checked) for the whole chunk first, as without it.
   */
  push(chunk: Uint8Array, untilOutput = false): void {
    this.bytes += chunk.byteLength;
    if (this.bytes > this.maxResponse) throw limitFailure(LABELS.responseLimit);
    const s = this.text.write(chunk);
    if (!untilOutput || this.out.length > 0 || s.indexOf("\r") >= 0) {
      this.feed(s);
      return;
    }
    // Whole events (LF line ends: an empty line ends one); `feed` takes any split of the text alike.
    let from = 0;
    while (this.out.length === 0) {
      const k = s.indexOf("\n\n", from);
      if (k < 0) break;
      this.feed(s.slice(from, k + 2));
      from = k + 2;
    }
    if (from === 0) this.feed(s);
    else if (from < s.length) {
      if (this.out.length > 0 && !this.decoder.finished) this.held = s.slice(from);
      else this.feed(s.slice(from));
    }
  }

  /** Text of the last chunk not parsed yet (see `push`); empty when none. */
  held = "";

  /** Parses the held rest of the last chunk. */
  resume(): void {
    const s = this.held;
    this.held = "";
    this.feed(s);
  }

  end(): void {
    this.feed(this.text.end());
    if (this.rest !== "") {
      // An unterminated last line: the parser holds it as an incomplete event (discarded, as SSE requires).
      this.parser.feed(this.rest);
      this.rest = "";
    }
  }

  /**
   * Text after the last LF fed so far. The parser is fed whole lines only, so it never holds a fragment: a fragment
   * it holds is joined with the whole next chunk (a copy of the entire body over a response); here only the
   * fragment and the next chunk's first line are joined. Bounded like the parser's own buffer.
   */
  private rest = "";

  private feed(s: string): void {
    if (s.length === 0) return;
    if (!this.started) {
      this.started = true;
      if (s.charCodeAt(0) === 0xfeff) s = s.slice(1);
      if (s.length === 0) return;
    }
    const last = s.lastIndexOf("\n");
    if (last < 0 || s.indexOf("\r") >= 0) {
      // No complete line yet, or CR line ends (rare): the parser's own buffering, as is.
      if (this.rest !== "") {
        s = this.rest + s;
        this.rest = "";
      }
      if (last < 0 && s.length <= this.maxRest) this.rest = s;
      else this.parser.feed(s);
      return;
    }
    if (this.rest !== "") {
      const first = s.indexOf("\n");
      this.parser.feed(this.rest + s.slice(0, first + 1));
      this.rest = "";
      if (first < last) this.parser.feed(s.slice(first + 1, last + 1));
    } else {
      this.parser.feed(last === s.length - 1 ? s : s.slice(0, last + 1));
    }
    if (last < s.length - 1) this.rest = s.slice(last + 1);
    if (this.rest.length > this.maxRest) {
      this.parser.feed(this.rest); // over the bound: the parser reports it
      this.rest = "";
    }
  }
}
