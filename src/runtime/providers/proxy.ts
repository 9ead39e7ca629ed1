/**
 * HTTPS_PROXY for https: providers: the connection goes through an HTTP CONNECT tunnel of the proxy the environment
 * names, as curl, Codex and Claude Code do. Contract:
 * - `httpsProxyFor(host, port, env)`: `https_proxy`, else `HTTPS_PROXY` (an empty value counts as unset), unless the host is
 *   loopback (`localhost`, `127.0.0.0/8`, `::1`: never proxied, so a local model keeps working behind a corporate
 *   proxy) or `no_proxy` / `NO_PROXY` names it: entries split on commas and blanks, `*` for every host, `host` or
 *   `.host` for it and its subdomains, `host:port` for that port only, an IP address for itself. The proxy URL is
 *   `http://[user:password@]host[:port]` (port 80 by default; a bare `host:port` reads as http); another scheme is
 *   refused with the code `PROXY_SCHEME_UNSUPPORTED` rather than connecting around the proxy.
 * - `connectTunnel` opens the tunnel: `CONNECT host:port` (with `Proxy-Authorization: Basic …` when the URL has a
 *   user), and hands over the socket once the proxy answers 200. Aborting `signal` before then closes the connection
 *   to the proxy (`PROXY_ABORTED`): a proxy that never answers holds nothing once its request is given up. A failure
 *   is an Error whose `code` names it (`PROXY_HTTP_<status>`, `PROXY_BAD_RESPONSE`, `PROXY_CLOSED`, `PROXY_ABORTED`,
 *   or the proxy connection's own code after `PROXY_`, e.g. `PROXY_ECONNREFUSED`, so it is not taken for the
 *   provider's): node-fetch and web_fetch report it as a proxy failure. The proxy's credentials never appear in an
 *   error.
 * - `proxyFor` is the same choice for either scheme (`HTTP_PROXY` for http:): providers use only https: (http:
 *   providers are local in practice; docs/providers.md), `web_fetch` both.
 */
import { connect, isIP, type Socket } from "node:net";

export interface ProxyTarget {
  host: string;
  port: number;
  /** The `Proxy-Authorization` value, when the proxy URL has a user. */
  authorization?: string;
}

/** The most a proxy's answer to CONNECT may hold before its blank line. */
const MAX_PROXY_HEAD_BYTES = 16 * 1024;

const coded = (code: string, message: string): Error => Object.assign(new Error(message), { code });

/** The first of `names` set to a non-blank value in `env`, trimmed; "" when none is (as curl reads them). */
function firstSet(env: NodeJS.ProcessEnv, ...names: string[]): string {
  for (const n of names) {
    const v = env[n]?.trim();
    if (v !== undefined && v !== "") return v;
  }
  return "";
}

/** Whether `host` is this machine: `localhost` (and its subdomains), 127.0.0.0/8, ::1. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, "");
  if (h === "localhost" || h.endsWith(".localhost")) return true;
  if (isIP(h) === 4) return h.startsWith("127.");
  return isIP(h) === 6 && /^(?:0*:)*:?0*1$/.test(h);
}

/** Whether a `no_proxy` list names `host` (and `port`). */
export function noProxyMatches(host: string, port: number, list: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, "");
  for (const raw of list.split(/[\s,]+/)) {
    const entry = raw.toLowerCase();
    if (entry === "") continue;
    if (entry === "*") return true;
    if (isIP(entry) === 6) {
      if (entry === h) return true;
      continue;
    }
    // `host`, `host:port`, `[v6]`, `[v6]:port`
    const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry) ?? /^([^:]+)(?::(\d+))?$/.exec(entry);
    if (m === null) continue;
    if (m[2] !== undefined && Number(m[2]) !== port) continue;
    const name = (m[1] as string).replace(/^\*?\./, "").replace(/\.$/, "");
    if (name !== "" && (h === name || h.endsWith(`.${name}`))) return true;
  }
  return false;
}

/** The proxy an https: request to `host`:`port` goes through, or null (direct). Throws for an unusable proxy URL. */
export function httpsProxyFor(host: string, port: number, env: NodeJS.ProcessEnv): ProxyTarget | null {
  return proxyFor("https:", host, port, env);
}

/** The variable that names the proxy of a scheme's requests (in messages: the upper-case spelling). */
export const proxyVariable = (scheme: "http:" | "https:"): string => (scheme === "https:" ? "HTTPS_PROXY" : "HTTP_PROXY");

/**
 * The proxy a request of `scheme` to `host`:`port` goes through, or null (direct): `https_proxy` / `HTTPS_PROXY` for
 * https:, `http_proxy` / `HTTP_PROXY` for http: (the lower-case one first), with the exemptions of `httpsProxyFor`.
 * Throws for an unusable proxy URL (`PROXY_URL_INVALID`, `PROXY_SCHEME_UNSUPPORTED`). Providers use only the https:
 * one (http: providers are local); `web_fetch` uses both.
 */
export function proxyFor(scheme: "http:" | "https:", host: string, port: number, env: NodeJS.ProcessEnv): ProxyTarget | null {
  const name = proxyVariable(scheme);
  const raw = firstSet(env, name.toLowerCase(), name);
  if (raw === "" || isLoopback(host)) return null;
  const noProxy = firstSet(env, "no_proxy", "NO_PROXY");
  if (noProxy !== "" && noProxyMatches(host, port, noProxy)) return null;
  let u: URL;
  try {
    u = new URL(/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(raw) ? raw : `http://${raw}`);
  } catch {
    throw coded("PROXY_URL_INVALID", `${name} is not a URL`);
  }
  if (u.protocol !== "http:") throw coded("PROXY_SCHEME_UNSUPPORTED", `${name} must be an http:// proxy`);
  const target: ProxyTarget = { host: u.hostname.replace(/^\[(.*)\]$/, "$1"), port: u.port === "" ? 80 : Number(u.port) };
  if (u.username !== "") {
    const user = decodeURIComponent(u.username);
    const password = decodeURIComponent(u.password);
    target.authorization = `Basic ${Buffer.from(`${user}:${password}`, "utf8").toString("base64")}`;
  }
  return target;
}

/**
 * Opens a CONNECT tunnel to `host`:`port` through `proxy`; `done` gets the socket once the proxy answered 200, or the
 * failure (`PROXY_ABORTED` when `signal` aborts first).
 */
export function connectTunnel(
  proxy: ProxyTarget,
  host: string,
  port: number,
  done: (err: Error | null, socket?: Socket) => void,
  signal?: AbortSignal,
): void {
  if (signal?.aborted === true) return done(coded("PROXY_ABORTED", "the request was given up before the proxy answered"));
  const authority = `${isIP(host) === 6 ? `[${host}]` : host}:${port}`;
  const socket = connect({ host: proxy.host, port: proxy.port });
  let head = Buffer.alloc(0);
  let settled = false;
  const finish = (err: Error | null): void => {
    if (settled) return;
    settled = true;
    signal?.removeEventListener("abort", onAbort);
    socket.off("data", onData).off("error", onError).off("close", onClose);
    if (err !== null) {
      socket.destroy();
      done(err);
    } else done(null, socket);
  };
  const onError = (err: Error & { code?: unknown }): void =>
    finish(coded(typeof err.code === "string" ? `PROXY_${err.code}` : "PROXY_CLOSED", "the connection to the proxy failed"));
  const onClose = (): void => finish(coded("PROXY_CLOSED", "the proxy closed the connection before answering CONNECT"));
  const onAbort = (): void => finish(coded("PROXY_ABORTED", "the request was given up before the proxy answered"));
  signal?.addEventListener("abort", onAbort, { once: true });
  const onData = (d: Buffer): void => {
    head = Buffer.concat([head, d]);
    const end = head.indexOf("\r\n\r\n");
    if (end === -1) {
      if (head.length > MAX_PROXY_HEAD_BYTES) finish(coded("PROXY_BAD_RESPONSE", "the proxy's answer to CONNECT is too long"));
      return;
    }
    const status = /^HTTP\/1\.[01] (\d{3})[ \r]/.exec(head.toString("latin1", 0, Math.min(end + 2, 256)))?.[1];
    // Nothing may follow the answer before the TLS handshake starts: bytes there would be lost to it.
    if (status === undefined || end + 4 !== head.length) return finish(coded("PROXY_BAD_RESPONSE", "the proxy's answer to CONNECT is not HTTP"));
    if (status !== "200") return finish(coded(`PROXY_HTTP_${status}`, `the proxy refused CONNECT (HTTP ${status})`));
    socket.pause();
    finish(null);
  };
  socket.on("data", onData).once("error", onError).once("close", onClose);
  socket.once("connect", () => {
    const auth = proxy.authorization !== undefined ? `Proxy-Authorization: ${proxy.authorization}\r\n` : "";
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`);
  });
}
