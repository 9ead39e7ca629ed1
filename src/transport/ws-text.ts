import type { RawData } from "ws";

/** The UTF-8 text of one WebSocket message as `ws` delivers it (a Buffer, an ArrayBuffer or fragments). */
export function wsText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString("utf8");
  if (Array.isArray(data)) return Buffer.concat(data).toString("utf8");
  return Buffer.from(data).toString("utf8");
}
