/**
 * A bounded `fetch` for auth and discovery requests: the response body is read up to `maxBytes`
 * (checked while streaming, before buffering more) and re-wrapped, so callers and oauth4webapi
 * never hold an unbounded body. Failures are thrown as `BoundedFetchError` with a fixed label
 * (never a URL, header or body).
 */
export class BoundedFetchError extends Error {
  constructor(readonly reason: "network" | "too_large" | "timeout") {
    super(`request ${reason}`);
    this.name = "BoundedFetchError";
  }
}

export type FetchFn = (url: string | URL, init?: RequestInit) => Promise<Response>;

export function boundedFetch(maxBytes: number, base: FetchFn = fetch): FetchFn {
  return async (url, init) => {
    let res: Response;
    try {
      res = await base(url, { ...init, redirect: "manual" });
    } catch (err) {
      throw new BoundedFetchError(isTimeout(err, init?.signal) ? "timeout" : "network");
    }
    const declared = Number(res.headers.get("content-length") ?? "NaN");
    if (Number.isFinite(declared) && declared > maxBytes) {
      await res.body?.cancel().catch(() => undefined);
      throw new BoundedFetchError("too_large");
    }
    const chunks: Uint8Array[] = [];
    let total = 0;
    if (res.body !== null) {
      const reader: ReadableStreamDefaultReader<Uint8Array> = res.body.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          total += value.byteLength;
          if (total > maxBytes) {
            await reader.cancel().catch(() => undefined);
            throw new BoundedFetchError("too_large");
          }
          chunks.push(value);
        }
      } catch (err) {
        if (err instanceof BoundedFetchError) throw err;
        throw new BoundedFetchError(isTimeout(err, init?.signal) ? "timeout" : "network");
      }
    }
    const body = Buffer.concat(chunks);
    const headers = new Headers(res.headers);
    headers.delete("content-encoding");
    headers.delete("content-length");
    return new Response(res.status === 204 || res.status === 304 ? null : body, { status: res.status, headers });
  };
}

function isTimeout(err: unknown, signal: AbortSignal | null | undefined): boolean {
  return (err instanceof Error && err.name === "TimeoutError") || (signal?.reason instanceof Error && signal.reason.name === "TimeoutError");
}
