/**
 * A `StreamFetch` over plain sockets (node:net, node:tls) speaking HTTP/1.1 (http1.ts), for provider streams.
 *
 * Why: the global `fetch` loads undici (~20 ms of JS) and compiles its WebAssembly HTTP parser (~20 ms) on the first
 * turn; node:http costs ~1.8 ms to load and ~2–4 ms more for a fresh process's first request, then one stream event
 * and one iterator step per HTTP chunk (docs/providers.md, "HTTP client"). Contract: resolves with status, headers
 * and a streaming body once the response head arrives; aborting `init.signal` destroys the socket (before or after
 * the head) and a pending `read()` rejects; `body.cancel()` destroys it too. Connections are kept alive across turns
 * in a pool per scheme, host and port (at most `MAX_IDLE` idle each, closed after the server's `Keep-Alive:
 * timeout` less a second, else `IDLE_MS`; unreferenced, so an idle one never keeps a process alive). A connection
 * returns to the pool as soon as its response is complete, unread bytes or not; `body.release()` (the answer is
 * complete before the body ended, the usual case: the terminal event arrives just before the end of the response)
 * reads the rest in the background, so the socket goes back to the pool, and destroys it when more than
 * `RELEASE_MAX_BYTES` follow or the end takes over `RELEASE_MS`. With `init.gate`, the connection and the head go
 * out at once and the body's last byte waits for the gate (see `StreamFetch`). https: connections verify the
 * server's certificate for its name (SNI unless the host is an IP address), resume the host's last TLS session, and
 * go through HTTPS_PROXY's CONNECT tunnel when proxy.ts says so; node:tls (~4 ms to load) loads with the first
 * https: provider built (its `preconnect`, from make.ts, so a warmed turn path has it) or request, never for http:.
 */
import { createRequire } from "node:module";
import { connect as netConnect, isIP, type Socket } from "node:net";
import type * as Tls from "node:tls";
import { mark, timingEnabled } from "../debug-timing.js";
import { Exchange, requestHead, type ResponseHead } from "./http1.js";
import { connectTunnel, httpsProxyFor } from "./proxy.js";
import type { StreamFetch, StreamFetchInit, StreamResponse } from "./driver.js";

/** How long a connection opened ahead of a request (`preconnect`) waits for one before it is closed. */
export const SPARE_MS = 10_000;
/** Idle pooled connections kept per scheme, host and port, and how long one idles without a server hint. */
const MAX_IDLE = 16;
const IDLE_MS = 60_000;
/** Bounds of the background read after a complete answer (see `release` in the module contract). */
const RELEASE_MAX_BYTES = 64 * 1024;
const RELEASE_MS = 2000;
/** TLS sessions kept (one per host and port). */
const MAX_TLS_SESSIONS = 16;

/** Where a request goes. `key` names its pool: scheme, host and port. */
interface Target {
  https: boolean;
  host: string;
  port: number;
  key: string;
  /** `host[:port]` as the Host header names it (IPv6 in brackets, no default port). */
  hostHeader: string;
  path: string;
  /** `Basic …` from credentials in the URL (such a target is never cached). */
  auth?: string;
}

/** Parsed provider URLs (a turn's request URL is the same string turn after turn): a few, by their text. */
const targets = new Map<string, Target>();
const MAX_TARGETS = 16;

/** `url` as a request target, parsed once per URL text. Throws on an invalid URL or another scheme. */
function targetOf(url: string): Target {
  const hit = targets.get(url);
  if (hit !== undefined) return hit;
  const u = new URL(url);
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new TypeError("unsupported protocol");
  const https = u.protocol === "https:";
  const host = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname;
  const port = u.port === "" ? (https ? 443 : 80) : Number(u.port);
  const t: Target = { https, host, port, key: `${u.protocol}//${host}:${port}`, hostHeader: u.host, path: u.pathname + u.search };
  if (u.username !== "" || u.password !== "") {
    t.auth = `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`, "utf8").toString("base64")}`;
    return t;
  }
  if (targets.size >= MAX_TARGETS) targets.clear();
  targets.set(url, t);
  return t;
}

interface Idle {
  socket: Socket;
  timer: NodeJS.Timeout;
  drop: () => void;
}

/**
 * Open connections by pool key: idle ones (most recently used first), the ones in use, and the spare: the connection
 * opened ahead of a first request to a host and port (`preconnect`, while a fresh process creates its session, and
 * after each turn for a server that closes connections), which the first request then takes instead of connecting.
 * At most one spare, unreferenced, closed after `SPARE_MS` unused, dropped if it fails or the server closes it. While
 * a request's connection to that host is still in use, `preconnect` waits for it: none is opened if it returns to the
 * pool, one is when it closes. For https: the spare is a TLS connection with the request's server name and the
 * host's TLS session, so its handshake is done by the time the request is written; a certificate it rejects only
 * drops the spare (the request then connects and reports the error, as without a spare).
 */
class Pool {
  private readonly idle = new Map<string, Idle[]>();
  private readonly inUse = new Map<string, Socket[]>();
  /** In-use connections `preconnect` waits on, with what to do once they are done (reused or not). */
  private readonly watchers = new Map<Socket, (reused: boolean) => void>();
  private spare: { key: string; socket: Socket; timer: NodeJS.Timeout; drop: () => void } | null = null;

  /** An idle or spare connection under `key`, now in use; or null. */
  take(key: string): Socket | null {
    const list = this.idle.get(key);
    const i = list?.pop();
    let socket: Socket | null = null;
    if (i !== undefined) {
      clearTimeout(i.timer);
      i.socket.off("error", i.drop).off("end", i.drop).off("close", i.drop).off("data", i.drop).ref();
      socket = i.socket;
    } else {
      const s = this.spare;
      if (s !== null && s.key === key && !s.socket.destroyed && (s.socket.connecting || s.socket.readyState === "open")) {
        this.spare = null;
        clearTimeout(s.timer);
        s.socket.off("error", s.drop).off("end", s.drop).off("close", s.drop).ref();
        socket = s.socket;
      }
    }
    if (socket !== null) this.use(key, socket);
    return socket;
  }

  use(key: string, socket: Socket): void {
    const list = this.inUse.get(key);
    if (list === undefined) this.inUse.set(key, [socket]);
    else list.push(socket);
  }

  /** A request's connection is done: pooled when `reusable` (the exchange destroyed it otherwise). */
  done(key: string, socket: Socket, reusable: boolean, keepAliveMs: number | undefined): void {
    const list = this.inUse.get(key);
    const k = list?.indexOf(socket) ?? -1;
    if (k >= 0) list!.splice(k, 1);
    if (list?.length === 0) this.inUse.delete(key);
    const idleMs = keepAliveMs === undefined ? IDLE_MS : keepAliveMs - 1000;
    const pooled = reusable && idleMs > 0 && !socket.destroyed && (this.idle.get(key)?.length ?? 0) < MAX_IDLE;
    if (!pooled) socket.destroy();
    else {
      const entry: Idle = { socket, timer: setTimeout(() => entry.drop(), idleMs), drop: () => this.dropIdle(key, entry) };
      entry.timer.unref();
      // Anything from an idle connection (its close, an error, unexpected bytes) ends it.
      socket.on("error", entry.drop).on("end", entry.drop).on("close", entry.drop).on("data", entry.drop).unref();
      const idle = this.idle.get(key);
      if (idle === undefined) this.idle.set(key, [entry]);
      else idle.push(entry);
    }
    const w = this.watchers.get(socket);
    if (w !== undefined) {
      this.watchers.delete(socket);
      w(pooled);
    }
  }

  private dropIdle(key: string, entry: Idle): void {
    clearTimeout(entry.timer);
    entry.socket.destroy();
    const list = this.idle.get(key);
    const k = list?.indexOf(entry) ?? -1;
    if (k >= 0) list!.splice(k, 1);
    if (list?.length === 0) this.idle.delete(key);
  }

  /** Opens a spare under `key` with `open`, unless one is open, one idles in the pool or one is in use. */
  preconnect(key: string, open: () => Socket): void {
    if (this.spare !== null || (this.idle.get(key)?.length ?? 0) > 0) return;
    // A request's connection still in use (a turn ends at the answer's last event, which can come before its
    // response ends): it goes back to the pool when kept alive (nothing to open), else it closes (open one then).
    const busy = this.inUse.get(key);
    const inUse = busy?.[busy.length - 1];
    if (inUse !== undefined && !inUse.destroyed) {
      if (!this.watchers.has(inUse)) this.watchers.set(inUse, (reused) => void (reused || this.preconnect(key, open)));
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
    this.spare = { key, socket, timer, drop };
  }

  /** Idle connections under `key`, or in every pool. */
  idleCount(key?: string): number {
    if (key !== undefined) return this.idle.get(key)?.length ?? 0;
    let n = 0;
    for (const list of this.idle.values()) n += list.length;
    return n;
  }
}

const pool = new Pool();

let tlsModule: typeof Tls | null = null;
const tlsSessions = new Map<string, Buffer>();

/** Loads node:tls (once). */
function loadTls(): typeof Tls {
  return (tlsModule ??= createRequire(import.meta.url)("node:tls") as typeof Tls);
}

/** A connection to `t`'s host: plain TCP, or TLS (over `via`, a proxy's tunnel, when given). */
function open(t: Target, via?: Socket): Socket {
  if (!t.https) return netConnect({ host: t.host, port: t.port, noDelay: true });
  const tls = loadTls();
  const session = tlsSessions.get(t.key);
  const socket = tls.connect({
    host: t.host,
    port: t.port,
    ...(via !== undefined ? { socket: via } : {}),
    // As node:https names a server: never by an IP address (SNI carries names only); the certificate is checked
    // against `host` either way.
    ...(isIP(t.host) === 0 ? { servername: t.host } : {}),
    ...(session !== undefined ? { session } : {}),
  });
  socket.setNoDelay(true);
  socket.on("session", (s: Buffer) => {
    if (!tlsSessions.has(t.key) && tlsSessions.size >= MAX_TLS_SESSIONS) tlsSessions.delete(tlsSessions.keys().next().value!);
    tlsSessions.set(t.key, s);
  });
  return socket;
}

/**
 * Opens the connection of a provider's first request now (http:, or https: with its TLS handshake) when no idle
 * pooled connection is there. Through a proxy, the request's own connection opens the tunnel. Never throws.
 */
export function preconnect(url: string): void {
  try {
    const t = targetOf(url);
    if (t.https && httpsProxyFor(t.host, t.port, process.env) !== null) return;
    pool.preconnect(t.key, () => open(t));
  } catch {
    // not a URL, or an unusable proxy setting: the request reports it
  }
}

function abortError(): Error {
  const e = new Error("This operation was aborted");
  e.name = "AbortError";
  return e;
}

/** The connection for a request to `t`: pooled, spare, new, or (https: through a proxy) once the tunnel is up. */
function connection(t: Target, signal: AbortSignal, done: (err: Error | null, socket?: Socket) => void): void {
  const pooled = pool.take(t.key);
  if (pooled !== null) return done(null, pooled);
  const proxy = t.https ? httpsProxyFor(t.host, t.port, process.env) : null;
  if (proxy === null) {
    const socket = open(t);
    pool.use(t.key, socket);
    return done(null, socket);
  }
  // TLS over the proxy's CONNECT tunnel: the handshake, server name and certificate checks are the direct ones. The
  // request's abort signal closes a tunnel still waiting for the proxy's answer.
  connectTunnel(proxy, t.host, t.port, (err, tunnel) => {
    if (err !== null) return done(err);
    let socket: Socket;
    try {
      socket = open(t, tunnel);
    } catch (e) {
      tunnel?.destroy();
      return done(e as Error);
    }
    pool.use(t.key, socket);
    done(null, socket);
  }, signal);
}

function respond(ex: Exchange, head: ResponseHead, releaseTimer: { t: NodeJS.Timeout | null }): StreamResponse {
  const status = head.status;
  return {
    ok: status >= 200 && status < 300,
    status,
    headers: { get: (name) => head.headers.get(name.toLowerCase()) ?? null },
    body: {
      getReader: () => ({ read: () => ex.read() }),
      cancel: () => {
        ex.cancel();
        return Promise.resolve();
      },
      release: () => {
        if (ex.finished) return;
        ex.release(RELEASE_MAX_BYTES);
        releaseTimer.t = setTimeout(() => ex.fail(new Error("the response did not end after its answer")), RELEASE_MS);
        releaseTimer.t.unref();
      },
    },
  };
}

function gatedFetch(url: string, init: StreamFetchInit): Promise<StreamResponse> {
  return new Promise<StreamResponse>((resolve, reject) => {
    const t = targetOf(url);
    const signal = init.signal;
    if (signal.aborted) return reject(abortError());
    const body = Buffer.from(init.body, "utf8");
    const headers = t.auth !== undefined && !Object.keys(init.headers).some((k) => k.toLowerCase() === "authorization") ? { ...init.headers, authorization: t.auth } : init.headers;
    const head = requestHead(init.method, t.path, t.hostHeader, headers, body.length);
    connection(t, signal, (err, socket) => {
      if (err !== null || socket === undefined) return reject(signal.aborted ? abortError() : (err ?? new Error("no connection")));
      const releaseTimer: { t: NodeJS.Timeout | null } = { t: null };
      const onAbort = (): void => ex.fail(abortError());
      const ex = new Exchange(
        socket,
        (h) => {
          mark("provider.response_head");
          resolve(respond(ex, h, releaseTimer));
        },
        (reusable, keepAliveMs) => {
          signal.removeEventListener("abort", onAbort);
          if (releaseTimer.t !== null) clearTimeout(releaseTimer.t);
          pool.done(t.key, socket, reusable, keepAliveMs);
        },
        (e) => reject(signal.aborted ? abortError() : e),
      );
      if (signal.aborted) return ex.fail(abortError());
      signal.addEventListener("abort", onAbort, { once: true });
      // `provider.request_sent` marks the request's last write; the bytes leave once the socket is connected and the
      // turn's synchronous work has yielded (a connection opened in the same microtask run only starts connecting then).
      const last = (chunk: Buffer): void => {
        mark("provider.request_sent");
        ex.requestComplete = true;
        socket.write(chunk, timingEnabled ? () => mark("provider.request_flushed") : undefined);
      };
      const gate = init.gate;
      socket.cork();
      socket.write(head, "latin1");
      if (gate === undefined) {
        last(body);
        socket.uncork();
        return;
      }
      // The head and all but the body's last byte now; the last byte (so a complete request) only once the gate
      // resolved. A server cannot act on a request whose body is incomplete.
      const split = Math.max(0, body.length - 1);
      if (split > 0) socket.write(body.subarray(0, split));
      socket.uncork();
      mark("provider.request_head_sent");
      void gate.then(
        () => {
          if (!ex.finished) last(body.subarray(split));
        },
        (e: unknown) => ex.fail(e instanceof Error ? e : new Error("request gate failed")),
      );
    });
  });
}

gatedFetch.gated = true as const;

/** Connections idle in the keep-alive pools, or only those to `url`'s host and port (for tests and diagnostics). */
export function idleConnections(url?: string): number {
  return pool.idleCount(url === undefined ? undefined : targetOf(url).key);
}

/** See the module contract; honours `init.gate` (the body's last byte waits for it). */
export const nodeFetch: StreamFetch = gatedFetch;
