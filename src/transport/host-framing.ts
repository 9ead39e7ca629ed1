/**
 * LF-delimited JSON frames on stream sockets (the host's backend wire), on the one framing module
 * (`jsonl.ts` `LineSplitter`, oversize policy `stop`). Knows nothing of sessions.
 * A frame is one UTF-8 JSON object followed by "\n". The limit counts the delimiter. An oversized frame is
 * never skipped: the reader reports it (`bytes`: at least limit + 1) and stops reading.
 */
import type { Socket } from "node:net";
import { decodeRecord, LineSplitter } from "./jsonl.js";

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

/** Attach an LF-JSON reader to a socket. Returns a function that stops reading. */
export function attachLineReader(socket: Socket, opts: LineReaderOptions): () => void {
  const limit = opts.limit ?? DEFAULT_FRAME_LIMIT;
  const splitter = new LineSplitter(limit, { oversize: "stop" });
  let stopped = false;
  const stop = (): void => {
    stopped = true;
    socket.off("data", onData);
  };
  const fail = (err: FrameError): void => {
    if (stopped) return;
    stop();
    opts.onError(err);
  };
  function onData(data: Buffer): void {
    for (const f of splitter.push(data)) {
      if (stopped) return;
      if (f.kind === "too_large") return fail({ kind: "oversize", bytes: limit + 1, limit });
      if (f.bytes.length === 0) continue; // blank keep-alive line
      const text = decodeRecord(f.bytes);
      if (text === null) return fail({ kind: "utf8" });
      let v: unknown;
      try {
        v = JSON.parse(text);
      } catch (e) {
        return fail({ kind: "json", message: e instanceof Error ? e.message : String(e) });
      }
      if (v === null || typeof v !== "object" || Array.isArray(v)) return fail({ kind: "not_object" });
      opts.onFrame(v as Record<string, unknown>);
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
