/**
 * A `StreamFetch` over node:http / node:https for provider streams.
 *
 * Why: the global `fetch` loads undici (~20 ms of JS) and compiles its WebAssembly HTTP parser (~20 ms) on the
 * first turn, and allocates more per chunk; node:http uses the built-in native parser. Contract: resolves with
 * status, headers and a streaming body once headers arrive; aborting `init.signal` destroys the socket (before
 * or after headers) and a pending `read()` rejects; `body.cancel()` destroys it too. Keep-alive agents reuse
 * connections across turns: `body.release()` (the answer is complete before the body ended, the usual case: the
 * terminal event arrives just before the end of the response) reads the rest in the background, so the socket goes
 * back to the pool, and destroys it when more than `RELEASE_MAX_BYTES` follow or the end takes over `RELEASE_MS`. With `init.gate`, the connection and the head go out at once and the body's last byte
 * waits for the gate (see `StreamFetch`). node:https (with node:tls, ~4 ms to load) loads with the first https:
 * provider built (`prepareHttps`, from make.ts, so a warmed turn path has it) or request, never for http: ones.
 */
import { Agent as HttpAgent, request as httpRequest, type ClientRequestArgs, type IncomingMessage } from "node:http";
import type * as Https from "node:https";
import { createRequire } from "node:module";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { mark, timingEnabled } from "../debug-timing.js";
import type { StreamFetch, StreamFetchInit, StreamResponse } from "./driver.js";

/** How long a connection opened ahead of a request (`preconnect`) waits for one before it is closed. */
export const SPARE_MS = 10_000;

/**
 * The keep-alive agent of http: providers. It can also open a provider's connection ahead of its first request
 * (`preconnect`, while a fresh process creates its session): the first request to that host and port then takes it
 * instead of connecting. At most one such spare, unreferenced (it never keeps a process alive), closed after
 * `SPARE_MS` unused, dropped if it fails or the server closes it. While a request's connection to that host is
 * still in use, it waits for it: none is opened if it returns to the pool, one is when it closes.
 */
class HttpPoolAgent extends HttpAgent {
  private spare: { name: string; socket: Socket; timer: NodeJS.Timeout; drop: () => void } | null = null;
  /** In-use connections `preconnect` waits on (released to the pool, or closed). */
  private readonly watched = new WeakSet<Socket>();

  preconnect(host: string, port: number): void {
    const name = this.getName({ host, port });
    if (this.spare !== null || (this.freeSockets[name]?.length ?? 0) > 0) return;
    // A request's connection still in use (a turn ends at the answer's last event, which can come before its
    // socket is released): it goes back to the pool when kept alive (nothing to open), else it closes (open one then).
    const busy = this.sockets[name];
    const inUse = busy?.[busy.length - 1];
    if (inUse !== undefined && !inUse.destroyed) {
      if (this.watched.has(inUse)) return;
      this.watched.add(inUse);
      const onFree = (): void => {
        this.watched.delete(inUse);
        inUse.off("close", onClose);
      };
      const onClose = (): void => {
        this.watched.delete(inUse);
        inUse.off("free", onFree);
        this.preconnect(host, port);
      };
      inUse.once("free", onFree).once("close", onClose);
      return;
    }
    mark("provider.preconnect");
    const socket = super.createConnection({ host, port }) as Socket;
    if (timingEnabled) socket.once("connect", () => mark("provider.preconnected"));
    const drop = (): void => {
      if (this.spare?.socket !== socket) return;
      clearTimeout(this.spare.timer);
      this.spare = null;
      socket.destroy();
    };
    socket.on("error", drop).on("end", drop).on("close", drop).unref();
    const timer = setTimeout(drop, SPARE_MS);
    timer.unref();
    this.spare = { name, socket, timer, drop };
  }

  override createConnection(options: ClientRequestArgs, cb?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    const s = this.spare;
    if (s !== null && s.name === this.getName(options) && !s.socket.destroyed && (s.socket.connecting || s.socket.readyState === "open")) {
      this.spare = null;
      clearTimeout(s.timer);
      s.socket.off("error", s.drop).off("end", s.drop).off("close", s.drop).ref();
      return s.socket;
    }
    return super.createConnection(options, cb);
  }
}

const httpAgent = new HttpPoolAgent({ keepAlive: true, maxSockets: 16 });

/**
 * Opens the connection of a provider's first request now, for an http: URL with no idle pooled connection (https:
 * providers connect at their request, as before). Never throws.
 */
export function preconnect(url: string): void {
  try {
    const u = new URL(url);
    if (u.protocol !== "http:") return;
    httpAgent.preconnect(u.hostname.replace(/^\[(.*)\]$/, "$1"), u.port === "" ? 80 : Number(u.port));
  } catch {
    // not a URL: the request reports it
  }
}
let https: { agent: Https.Agent; request: typeof Https.request } | null = null;

/** Loads node:https and its keep-alive agent (once). */
export function prepareHttps(): { agent: Https.Agent; request: typeof Https.request } {
  if (https === null) {
    const m = createRequire(import.meta.url)("node:https") as typeof Https;
    https = { agent: new m.Agent({ keepAlive: true, maxSockets: 16 }), request: m.request };
  }
  return https;
}
/** Bounds of the background read after a complete answer (see `release` in the module contract). */
const RELEASE_MAX_BYTES = 64 * 1024;
const RELEASE_MS = 2000;

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
      release: () => {
        const timer = setTimeout(() => r.destroy(), RELEASE_MS);
        timer.unref();
        void (async () => {
          let n = 0;
          try {
            for (;;) {
              const x = await it.next();
              if (x.done === true) break;
              n += x.value.length;
              if (n > RELEASE_MAX_BYTES) {
                r.destroy();
                break;
              }
            }
          } catch {
            /* destroyed (timeout, abort or a broken connection): nothing to keep */
          } finally {
            clearTimeout(timer);
          }
        })();
      },
    },
  };
}

/** Where a request goes, as node:http takes it from a URL (its `urlToHttpOptions`, without credentials). */
interface Target {
  protocol: string;
  hostname: string;
  port?: number;
  path: string;
}

/** Parsed provider URLs (a turn's request URL is the same string turn after turn): a few, by their text. */
const targets = new Map<string, Target>();
const MAX_TARGETS = 16;

/**
 * `url` as request options: parsed once per URL text (a `URL` parse and node:http's conversion of it cost ~10–40 µs
 * per request on the turn's critical path). A URL with credentials is returned as its `URL`, not cached.
 * Throws on an invalid URL, as `new URL` does.
 */
function targetOf(url: string): Target | URL {
  const hit = targets.get(url);
  if (hit !== undefined) return hit;
  const u = new URL(url);
  if (u.username !== "" || u.password !== "") return u;
  const t: Target = {
    protocol: u.protocol,
    hostname: u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname,
    ...(u.port !== "" ? { port: Number(u.port) } : {}),
    path: u.pathname + u.search,
  };
  if (targets.size >= MAX_TARGETS) targets.clear();
  targets.set(url, t);
  return t;
}

function gatedFetch(url: string, init: StreamFetchInit): Promise<StreamResponse> {
  return new Promise<StreamResponse>((resolve, reject) => {
    const u = targetOf(url);
    const signal = init.signal;
    if (signal.aborted) return reject(abortError());
    const isHttps = u.protocol === "https:";
    if (!isHttps && u.protocol !== "http:") return reject(new TypeError("unsupported protocol"));
    const body = Buffer.from(init.body, "utf8");
    const headers: Record<string, string> = { ...init.headers, "content-length": String(body.length) };
    const tls = isHttps ? prepareHttps() : null;
    const agent = tls !== null ? tls.agent : httpAgent;
    const request = tls !== null ? tls.request : httpRequest;
    const req = u instanceof URL ? request(u, { method: init.method, headers, agent }) : request({ ...u, method: init.method, headers, agent });
    // `provider.request_sent` marks `end()`; the bytes leave once the socket is connected and the turn's synchronous
    // work has yielded (a connection opened in the same microtask run only starts connecting then).
    if (timingEnabled) req.once("finish", () => mark("provider.request_flushed"));
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
      mark("provider.response_head");
      res = r;
      r.on("close", cleanup);
      resolve(wrap(r));
    });
    const gate = init.gate;
    if (gate === undefined) {
      mark("provider.request_sent");
      req.end(body);
      return;
    }
    // Connect, send the head and all but the body's last byte now; the last byte (so a complete request) only once
    // the gate resolved. A server cannot act on a request whose body is incomplete.
    req.flushHeaders();
    mark("provider.request_head_sent");
    const head = Math.max(0, body.length - 1);
    if (head > 0) req.write(body.subarray(0, head));
    void gate.then(
      () => {
        if (req.destroyed) return;
        mark("provider.request_sent");
        req.end(body.subarray(head));
      },
      (e: unknown) => req.destroy(e instanceof Error ? e : new Error("request gate failed")),
    );
  });
}

gatedFetch.gated = true as const;

/** Connections idle in the keep-alive pools, or only those to `url`'s http: host and port (for tests and diagnostics). */
export function idleConnections(url?: string): number {
  if (url !== undefined) {
    const u = new URL(url);
    return httpAgent.freeSockets[httpAgent.getName({ host: u.hostname, port: u.port === "" ? 80 : Number(u.port) })]?.length ?? 0;
  }
  let n = 0;
  for (const a of https === null ? [httpAgent] : [httpAgent, https.agent]) for (const list of Object.values(a.freeSockets)) n += list?.length ?? 0;
  return n;
}

/** See the module contract; honours `init.gate` (the body's last byte waits for it). */
export const nodeFetch: StreamFetch = gatedFetch;
