/** The chat-platform fakes' endless answer: one JSON body that never ends. */
import type { ServerResponse } from "node:http";

/**
 * Writes a 200 answer of `contentType` that opens with `prefix` (JSON up to an unfinished string), then 64 MiB of
 * that string's letters as fast as the client reads, and then holds the connection open. `count(bytes)` is told of
 * each piece written (the fakes' `endlessBytes`).
 */
export function writeEndless(res: ServerResponse, contentType: string, prefix: string, count: (bytes: number) => number): void {
  res.writeHead(200, { "content-type": contentType });
  res.write(prefix);
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  const more = (): void => {
    while (!res.destroyed && count(0) < 64 * 1024 * 1024) {
      count(chunk.length);
      if (!res.write(chunk)) return void res.once("drain", more);
    }
  };
  more();
}
