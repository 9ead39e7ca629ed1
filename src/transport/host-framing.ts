/**
 * Generic LF-delimited JSON framing for stream sockets. Knows nothing of sessions.
 * A frame is one UTF-8 JSON object followed by "\n". The limit counts the delimiter.
 * An oversized frame is never skipped: the reader reports it and stops reading.
 */
import type { Socket } from "node:net";

export const DEFAULT_FRAME_LIMIT = 16 * 1024 * 1024;

export type FrameError =
  | { kind: "oversize"; bytes: number; limit: number }
  | { kind: "utf8" }
  | { kind: "json"; message: string }
  | { kind: "not_object" };

export interface LineReaderOptions {
  limit?: number;
  onFrame: (frame: Record<string, unknown>) => void;
  /** Called once; the reader is stopped afterwards (no further frames are delivered). */
  onError: (err: FrameError) => void;
}

const decoder = new TextDecoder("utf-8", { fatal: true });

/** Attach an LF-JSON reader to a socket. Returns a function that stops reading. */
export function attachLineReader(socket: Socket, opts: LineReaderOptions): () => void {
  const limit = opts.limit ?? DEFAULT_FRAME_LIMIT;
  let chunks: Buffer[] = [];
  let pending = 0;
  let stopped = false;
  const stop = () => {
    stopped = true;
    chunks = [];
    socket.off("data", onData);
  };
  const fail = (err: FrameError) => {
    if (stopped) return;
    stop();
    opts.onError(err);
  };
  const deliver = (buf: Buffer) => {
    let text: string;
    try {
      text = decoder.decode(buf);
    } catch {
      return fail({ kind: "utf8" });
    }
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch (e) {
      return fail({ kind: "json", message: e instanceof Error ? e.message : String(e) });
    }
    if (v === null || typeof v !== "object" || Array.isArray(v)) return fail({ kind: "not_object" });
    opts.onFrame(v as Record<string, unknown>);
  };
  function onData(data: Buffer) {
    let start = 0;
    while (!stopped) {
      const nl = data.indexOf(10, start);
      if (nl === -1) {
        const rest = data.length - start;
        if (rest > 0) {
          // Without its delimiter the frame already needs pending + rest + 1 bytes.
          if (pending + rest + 1 > limit) return fail({ kind: "oversize", bytes: pending + rest + 1, limit });
          chunks.push(start === 0 ? data : data.subarray(start));
          pending += rest;
        }
        return;
      }
      const partLen = nl - start;
      if (pending + partLen + 1 > limit) return fail({ kind: "oversize", bytes: pending + partLen + 1, limit });
      let frame: Buffer;
      if (chunks.length === 0) frame = data.subarray(start, nl);
      else {
        chunks.push(data.subarray(start, nl));
        frame = Buffer.concat(chunks, pending + partLen);
        chunks = [];
        pending = 0;
      }
      start = nl + 1;
      if (frame.length === 0) continue; // blank keep-alive line
      deliver(frame);
    }
  }
  socket.on("data", onData);
  return stop;
}

/** Encode one frame; throws if the encoded frame (with delimiter) exceeds the limit. */
export function encodeFrame(frame: unknown, limit = DEFAULT_FRAME_LIMIT): string {
  const s = JSON.stringify(frame) + "\n";
  if (s.length * 3 + 1 > limit && Buffer.byteLength(s) > limit) throw new Error(`frame of ${Buffer.byteLength(s)} bytes exceeds ${limit}`);
  return s;
}
