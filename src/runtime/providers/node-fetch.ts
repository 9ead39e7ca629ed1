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
 * provider built (its `preconnect`, from make.ts, so a warmed turn path has it) or request, never for http: ones.
 */
import { Agent as HttpAgent, request as httpRequest, type ClientRequestArgs, type IncomingMessage } from "node:http";
import type * as Https from "node:https";
import { createRequire } from "node:module";
import { isIP, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { mark, timingEnabled } from "../debug-timing.js";
import { connectTunnel, httpsProxyFor, type ProxyTarget } from "./proxy.js";
import type { StreamFetch, StreamFetchInit, StreamResponse } from "./driver.js";

/** How long a connection opened ahead of a request (`preconnect`) waits for one before it is closed. */
export const SPARE_MS = 10_000;

/**
 * The request option carrying a request's abort signal to the https agent's `createConnection` (node:http passes
 * request options through to it, but not `signal` itself), so that aborting closes a CONNECT tunnel in progress.
 */
const TUNNEL_SIGNAL = Symbol("berth.tunnelSignal");

/**
 * The connection a keep-alive agent opens ahead of its first request to a host and port (`preconnect`, while a fresh
 * process creates its session, and after each turn for a server that closes connections): the first request to that
 * host and port then takes it instead of connecting. At most one such spare per agent, unreferenced (it never keeps a
 * process alive), closed after `SPARE_MS` unused, dropped if it fails or the server closes it. While a request's
 * connection to that host is still in use, it waits for it: none is opened if it returns to the pool, one is when it
 * closes. For https: the spare is a TLS connection with the request's server name (SNI) and the agent's session
 * cache, so its handshake is done by the time the request is written; a certificate it rejects only drops the spare
 * (the request then connects and reports the error, as without a spare).
 */
class Spares {
  private spare: { name: string; socket: Socket; timer: NodeJS.Timeout; drop: () => void } | null = null;
  /** In-use connections `preconnect` waits on (released to the pool, or closed). */
  private readonly watched = new WeakSet<Socket>();

  constructor(private readonly agent: HttpAgent) {}

  /** Opens a spare under the agent's pool `name` with `open`, unless one is open, idles in the pool or is in use. */
  preconnect(name: string, open: () => Socket): void {
    const agent = this.agent;
    if (this.spare !== null || (agent.freeSockets[name]?.length ?? 0) > 0) return;
    // A request's connection still in use (a turn ends at the answer's last event, which can come before its
    // socket is released): it goes back to the pool when kept alive (nothing to open), else it closes (open one then).
    const busy = agent.sockets[name];
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
        this.preconnect(name, open);
      };
      inUse.once("free", onFree).once("close", onClose);
      return;
    }
    mark("provider.preconnect");
    const socket = open();
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

  /** The spare, handed over, when it is open (or opening) under the pool `name` a request's connection has. */
  take(name: string): Socket | undefined {
    const s = this.spare;
    if (s === null || s.name !== name || s.socket.destroyed || !(s.socket.connecting || s.socket.readyState === "open")) return undefined;
    this.spare = null;
    clearTimeout(s.timer);
    s.socket.off("error", s.drop).off("end", s.drop).off("close", s.drop).ref();
    return s.socket;
  }
}

/** The keep-alive agent of http: providers, with a spare connection (`Spares`). */
class HttpPoolAgent extends HttpAgent {
  private readonly spares = new Spares(this);

  preconnect(host: string, port: number): void {
    this.spares.preconnect(this.getName({ host, port }), () => super.createConnection({ host, port }) as Socket);
  }

  override createConnection(options: ClientRequestArgs, cb?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    return this.spares.take(this.getName(options)) ?? super.createConnection(options, cb);
  }
}

const httpAgent = new HttpPoolAgent({ keepAlive: true, maxSockets: 16 });

/** The keep-alive agent of https: providers (node:https loads with it: `prepareHttps`), with a spare connection. */
interface HttpsPoolAgent extends Https.Agent {
  preconnect(host: string, port: number): void;
}

/** The class of `HttpsPoolAgent`, over the https.Agent of a node:https loaded on demand. */
function httpsPoolAgentClass(m: typeof Https): new (o: Https.AgentOptions) => HttpsPoolAgent {
  return class extends m.Agent {
    private readonly spares = new Spares(this);

    preconnect(host: string, port: number): void {
      // Through a proxy, the request's own connection opens the tunnel.
      try {
        if (httpsProxyFor(host, port, process.env) !== null) return;
      } catch {
        return; // an unusable proxy setting: the request reports it
      }
      // As a request to this host names it (node:http `calculateServerName`): no server name for an IP address.
      const servername = isIP(host) !== 0 ? "" : host;
      const name = this.getName({ host, port, servername });
      // `_agentKey` (node:http's name for the pool key, as its own connections get it): the TLS session is cached
      // under it, so later connections to this host resume it.
      this.spares.preconnect(name, () => super.createConnection({ host, port, servername, _agentKey: name } as Https.RequestOptions) as unknown as Socket);
    }

    override createConnection(options: ClientRequestArgs, cb?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
      const spare = this.spares.take(this.getName(options));
      if (spare !== undefined) return spare;
      const host = options.host ?? "localhost";
      const port = Number(options.port ?? 443);
      // A failure is reported through node:http's asynchronous `createConnection` callback, as the connection's own.
      const fail = (e: unknown): void => cb?.(e as Error, undefined as unknown as Duplex);
      let proxy: ProxyTarget | null;
      try {
        proxy = httpsProxyFor(host, port, process.env);
      } catch (e) {
        process.nextTick(fail, e);
        return undefined;
      }
      if (proxy === null) return super.createConnection(options, cb);
      // TLS over the proxy's CONNECT tunnel: the handshake, server name and certificate checks are the direct ones.
      // The request's abort signal (`TUNNEL_SIGNAL`) closes a tunnel still waiting for the proxy's answer.
      const signal = (options as { [TUNNEL_SIGNAL]?: AbortSignal })[TUNNEL_SIGNAL];
      connectTunnel(proxy, host, port, (err, socket) => {
        if (err !== null) return fail(err);
        try {
          cb?.(null, super.createConnection({ ...options, socket } as ClientRequestArgs) as Duplex);
        } catch (e) {
          socket?.destroy();
          fail(e);
        }
      }, signal);
      return undefined;
    }
  };
}

/**
 * Opens the connection of a provider's first request now (http:, or https: with its TLS handshake) when no idle
 * pooled connection is there. Never throws.
 */
export function preconnect(url: string): void {
  try {
    const u = new URL(url);
    const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
    if (u.protocol === "http:") httpAgent.preconnect(host, u.port === "" ? 80 : Number(u.port));
    else if (u.protocol === "https:") prepareHttps().agent.preconnect(host, u.port === "" ? 443 : Number(u.port));
  } catch {
    // not a URL: the request reports it
  }
}
let https: { agent: HttpsPoolAgent; request: typeof Https.request } | null = null;

/** Loads node:https and its keep-alive agent (once). */
export function prepareHttps(): { agent: HttpsPoolAgent; request: typeof Https.request } {
  if (https === null) {
    const m = createRequire(import.meta.url)("node:https") as typeof Https;
    https = { agent: new (httpsPoolAgentClass(m))({ keepAlive: true, maxSockets: 16 }), request: m.request };
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
    const options = { method: init.method, headers, agent, ...(tls !== null ? { [TUNNEL_SIGNAL]: signal } : {}) };
    const req = u instanceof URL ? request(u, options) : request({ ...u, ...options });
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
