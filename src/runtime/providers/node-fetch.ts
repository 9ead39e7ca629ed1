/**
 * A `FetchLike` over node:http / node:https for provider streams.
 *
 * Why: the global `fetch` (undici) compiles its WebAssembly HTTP parser on first use (~20 ms of the first
 * turn) and allocates more per chunk; node:http uses the built-in native parser. Contract matches what the
 * driver needs from `fetch`: a `Response` with status, headers and a streaming body; aborting `init.signal`
 * destroys the socket (before or after headers); request bodies are strings. Keep-alive agents reuse
 * connections across turns.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import type { FetchLike } from "./driver.js";

const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 16 });
const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 16 });

function abortError(): Error {
  const e = new Error("This operation was aborted");
  e.name = "AbortError";
  return e;
}

export const nodeFetch: FetchLike = (url, init) =>
  new Promise<Response>((resolve, reject) => {
    const u = new URL(url);
    const signal = init.signal ?? undefined;
    if (signal?.aborted) return reject(abortError());
    const isHttps = u.protocol === "https:";
    if (!isHttps && u.protocol !== "http:") return reject(new TypeError("unsupported protocol"));
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((v, k) => (headers[k] = v));
    const body = typeof init.body === "string" ? init.body : init.body == null ? undefined : String(init.body);
    if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
    const req = (isHttps ? httpsRequest : httpRequest)(u, { method: init.method ?? "GET", headers, agent: isHttps ? httpsAgent : httpAgent });
    let res: IncomingMessage | undefined;
    const onAbort = (): void => {
      req.destroy(abortError());
      res?.destroy(abortError());
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    const cleanup = (): void => signal?.removeEventListener("abort", onAbort);
    req.on("error", (err) => {
      cleanup();
      reject(signal?.aborted ? abortError() : err);
    });
    req.on("response", (r) => {
      res = r;
      r.on("close", cleanup);
      const h = new Headers();
      for (const [k, v] of Object.entries(r.headers)) {
        if (v === undefined) continue;
        if (Array.isArray(v)) for (const x of v) h.append(k, x);
        else h.set(k, v);
      }
      const status = r.statusCode ?? 0;
      const nullBody = status === 204 || status === 304 || (init.method ?? "GET") === "HEAD";
      const stream = nullBody ? null : (Readable.toWeb(r) as ReadableStream<Uint8Array>);
      if (nullBody) r.resume();
      resolve(new Response(stream, { status, statusText: r.statusMessage ?? "", headers: h }));
    });
    req.end(body);
  });
