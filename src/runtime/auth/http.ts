/**
 * A bounded `fetch` for auth and discovery requests: the response body is read up to `maxBytes`
 * (`core/bounded-body.ts`: checked while streaming, before buffering more) and re-wrapped, so callers and oauth4webapi
 * never hold an unbounded body. Failures are thrown as `BoundedFetchError` with a fixed label
 * (never a URL, header or body).
 */
import { BodyTooLarge, readBounded } from "../../core/bounded-body.js";

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
    let body: Buffer;
    try {
      body = await readBounded(res, maxBytes);
    } catch (err) {
      if (err instanceof BodyTooLarge) throw new BoundedFetchError("too_large");
      throw new BoundedFetchError(isTimeout(err, init?.signal) ? "timeout" : "network");
    }
    const headers = new Headers(res.headers);
    headers.delete("content-encoding");
    headers.delete("content-length");
    return new Response(res.status === 204 || res.status === 304 ? null : body, { status: res.status, headers });
  };
}

function isTimeout(err: unknown, signal: AbortSignal | null | undefined): boolean {
  return (err instanceof Error && err.name === "TimeoutError") || (signal?.reason instanceof Error && signal.reason.name === "TimeoutError");
}
