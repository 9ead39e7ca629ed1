/**
 * Reading a platform's HTTP response body with a byte bound.
 *
 * Contract: `readText(res, maxBytes)` returns the body decoded as UTF-8 once it ended, having held at most
 * `maxBytes` of it; a body that announces or sends more throws `BodyTooLarge` as soon as the bound is passed (the
 * stream is cancelled, the rest never read). A server that streams megabytes without end therefore costs at most
 * `maxBytes` of memory and ends at the bound, not at the request's deadline. Errors of the stream itself (a reset,
 * the caller's abort or deadline) are rethrown as they are.
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

export async function readText(res: Response, maxBytes: number): Promise<string> {
  const declared = Number(res.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw new BodyTooLarge(maxBytes);
  }
  if (res.body === null) return "";
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
  return Buffer.concat(chunks).toString("utf8");
}
