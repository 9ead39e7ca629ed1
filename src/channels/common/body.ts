/**
 * Reading a platform's HTTP response body with a byte bound (`core/bounded-body.ts`), as text.
 *
 * Contract: `readText(res, maxBytes)` returns the body decoded as UTF-8 once it ended, having held at most
 * `maxBytes` of it; a body that announces or sends more throws `BodyTooLarge` as soon as the bound is passed. A
 * server that streams megabytes without end therefore costs at most `maxBytes` of memory and ends at the bound, not
 * at the request's deadline. Errors of the stream itself (a reset, the caller's abort or deadline) are rethrown.
 */
import { readBounded } from "../../core/bounded-body.js";

export { BodyTooLarge } from "../../core/bounded-body.js";

export async function readText(res: Response, maxBytes: number): Promise<string> {
  return (await readBounded(res, maxBytes)).toString("utf8");
}
