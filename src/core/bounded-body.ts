/**
 * Reading an HTTP response body (a web `Response`) with a byte bound: no I/O of its own, it consumes the stream it is
 * given.
 *
 * Contract: `readBounded(res, maxBytes)` returns the whole body once it ended, having held at most `maxBytes` of it; a
 * body that announces (`content-length`) or sends more throws `BodyTooLarge` as soon as the bound is passed (the
 * stream is cancelled, the rest never read), so a server streaming without end costs at most `maxBytes` of memory
 * and ends at the bound, not at the request's deadline. Errors of the stream itself (a reset, the caller's abort or
 * deadline) are rethrown as they are. Used by the auth requests' bounded fetch and the chat platforms' clients.
 */

export class BodyTooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(`response over ${formatBytes(maxBytes)}`);
    this.name = "BodyTooLarge";
  }
}

/** `16 MiB`, `1 MiB`, `512 KiB`: the bound as an error names it. */
export function formatBytes(n: number): string {
  if (n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  if (n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

export async function readBounded(res: Response, maxBytes: number): Promise<Buffer> {
  const declared = Number(res.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw new BodyTooLarge(maxBytes);
  }
  if (res.body === null) return Buffer.alloc(0);
  const reader: ReadableStreamDefaultReader<Uint8Array> = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw new BodyTooLarge(maxBytes);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}
