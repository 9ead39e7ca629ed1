/**
 * The WebSocket class of the AHP listener: `ws`'s own, except that when `ws` fails a connection itself (a frame it
 * cannot accept, RFC 6455 §7.1.7) the close frame carries a reason naming the fault and the fix, not an empty one.
 * Contract: a close the host asks for with a reason keeps it; one without a reason gets the text for its code below,
 * when there is one. The reasons are fixed text (never peer input) and fit a close frame (at most 123 bytes).
 */
import { WebSocket } from "ws";

/** The largest AHP message this host reads, in bytes (WebSocket `maxPayload`). */
export const MAX_AHP_MESSAGE = 16 * 1024 * 1024;

export const CLOSE_REASONS: Readonly<Record<number, string>> = {
  1002: "the peer broke the WebSocket protocol (RFC 6455), e.g. an unmasked or reserved frame",
  1007: "a text frame was not UTF-8: AHP messages are UTF-8 JSON text",
  1009: `a message was larger than ${MAX_AHP_MESSAGE / 1024 / 1024} MiB, the most this host reads: send less in one message`,
};

export class AhpSocket extends WebSocket {
  override close(code?: number, data?: string | Buffer): void {
    super.close(code, data ?? (code === undefined ? undefined : CLOSE_REASONS[code]));
  }
}
