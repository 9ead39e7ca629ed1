/**
 * For a writer whose `write` returned false: resolves once the stream drains, or once it closes (a closed stream
 * never drains; what it still held is lost with it). Both listeners are removed when either fires.
 */
import type { EventEmitter } from "node:events";

export function drainedOrClosed(stream: EventEmitter): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      stream.off("drain", done);
      stream.off("close", done);
      resolve();
    };
    stream.once("drain", done);
    stream.once("close", done);
  });
}
