/**
 * A `StreamFetch` over node:http / node:https for provider streams.
 *
 * Why: the global `fetch` loads undici (~20 ms of JS) and compiles its WebAssembly HTTP parser (~20 ms) on the
 * first turn, and allocates more per chunk; node:http uses the built-in native parser. Contract: resolves with
 * status, headers and a streaming body once headers arrive; aborting `init.signal` destroys the socket (before
 * or after headers) and a pending `read()` rejects; `body.cancel()` destroys it too. Keep-alive agents reuse
 * connections across turns.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { StreamFetch, StreamResponse } from "./driver.js";

const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 16 });
const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 16 });

function abortError(): Error {
  const e = new Error("This operation was aborted");
  e.name = "AbortError";
  return e;
}

function wrap(r: IncomingMessage): StreamResponse {
  const status = r.statusCode ?? 0;
  const it = r[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  return {
    ok: status >= 200 && status < 300,
    status,
    headers: {
      get(name) {
        const v = r.headers[name.toLowerCase()];
        return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v;
      },
    },
    body: {
      getReader: () => ({
        read: async () => {
          const n = await it.next();
          return n.done === true ? { done: true } : { done: false, value: n.value };
        },
      }),
      cancel: () => {
        r.destroy();
        return Promise.resolve();
      },
    },
  };
}

export const nodeFetch: StreamFetch = (url, init) =>
  new Promise<StreamResponse>((resolve, reject) => {
    const u = new URL(url);
    const signal = init.signal;
    if (signal.aborted) return reject(abortError());
    const isHttps = u.protocol === "https:";
    if (!isHttps && u.protocol !== "http:") return reject(new TypeError("unsupported protocol"));
    const headers: Record<string, string> = { ...init.headers, "content-length": String(Buffer.byteLength(init.body)) };
    const req = (isHttps ? httpsRequest : httpRequest)(u, { method: init.method, headers, agent: isHttps ? httpsAgent : httpAgent });
    let res: IncomingMessage | undefined;
    const onAbort = (): void => {
      req.destroy(abortError());
      res?.destroy(abortError());
    };
    signal.addEventListener("abort", onAbort, { once: true });
    const cleanup = (): void => signal.removeEventListener("abort", onAbort);
    req.on("error", (err) => {
      cleanup();
      reject(signal.aborted ? abortError() : err);
    });
    req.on("response", (r) => {
      res = r;
      r.on("close", cleanup);
      resolve(wrap(r));
    });
    req.end(init.body);
  });
