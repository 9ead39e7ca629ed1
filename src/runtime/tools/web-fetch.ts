/**
 * `web_fetch {url, offset?}`: GET one public http(s) URL and return readable text. Contracts:
 * - Only `http:`/`https:` URLs without user info. Every hop (the URL and each redirect target, at most
 *   `MAX_REDIRECTS`) is resolved once; every resolved address must pass the address policy (net-guard.ts), and
 *   the connection goes to the checked address only (the socket's `lookup` returns it; DNS is not asked again,
 *   so a name cannot rebind between check and connect). TLS still verifies the certificate against the name.
 * - No cookies, credentials, `Referer` or connection reuse; `accept-encoding: identity` (gzip/deflate/br bodies a
 *   server sends anyway are decoded within the same bound).
 * - Through the proxy the environment names for the URL's scheme (`HTTPS_PROXY` / `HTTP_PROXY`, with `NO_PROXY`;
 *   providers/proxy.ts `proxyFor`), after the same check: an https: hop is a CONNECT tunnel to the checked address
 *   (TLS inside it verifies the name), an http: hop a request whose absolute URL names the checked address (`Host`
 *   carries the name). The proxy never resolves the name itself, so the address guarantee above holds through it.
 * - Declared binary content types are refused before the body is read; an undeclared body with a NUL byte in
 *   its first KiB is refused as binary. At most `MAX_DOWNLOAD_BYTES` are read (the result says when it stopped).
 * - The body is decoded by its BOM, header charset or HTML `<meta charset>`, HTML becomes text with numbered link
 *   references, and control/escape characters are made plain (web-text.ts); JSON and other text pass through.
 *   Output pages hold at most `MAX_PAGE_BYTES`; `offset` (characters) selects the next page, named in the note.
 * - The whole call, redirects included, ends after `timeoutMs` (30 s) with a `failed`, `timedOut:true` result;
 *   the turn's cancellation ends it `cancelled`.
 * Risk: network — the approval gate asks, except for an `https:` URL whose host is listed in the global settings'
 * `web_fetch.auto_approve_hosts` (`autoApprove`); a redirect from such a call to a host not listed is not followed.
 * `allow`, `resolve` and `ca` are test-only seams (the registry never sets them): exact address+port pairs exempt
 * from the policy, a resolver, and the CA a loopback TLS server's certificate chains to.
 */
import type { IncomingMessage } from "node:http";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP, type LookupFunction, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import type { Readable } from "node:stream";
import { truncateUtf8 } from "../../core/utf8.js";
import type { Tool } from "../types.js";
import { defineLocalTool } from "./define.js";
import { blockedReason } from "./net-guard.js";
import { connectTunnel, proxyFor, proxyVariable, type ProxyTarget } from "../providers/proxy.js";
import { fail, ok } from "./result.js";
import { bodyText } from "./web-text.js";
import { MAX_URL_CHARS, WEB_FETCH_DEF, WEB_FETCH_RISK, WEB_FETCH_TOOL_NAME, webFetchAutoApprove } from "./specs.js";

export { MAX_URL_CHARS, WEB_FETCH_RISK, WEB_FETCH_TOOL_NAME };
export const MAX_REDIRECTS = 5;
export const WEB_FETCH_TIMEOUT_MS = 30_000;
export const MAX_DOWNLOAD_BYTES = 2 * 1024 * 1024;
export const MAX_PAGE_BYTES = 40 * 1024;

export type Resolver = (host: string) => Promise<Array<{ address: string; family: number }>>;

export interface WebFetchOptions {
  /** Hosts (lowercase names) whose `https:` URLs run without asking. */
  autoApproveHosts?: readonly string[];
  /** TEST ONLY: address+port pairs exempt from the address policy. */
  allow?: readonly { host: string; port: number }[];
  /** TEST ONLY: replaces DNS resolution. */
  resolve?: Resolver;
  /** TEST ONLY: CA certificates trusted instead of the system's (loopback TLS tests). */
  ca?: string;
  timeoutMs?: number;
  maxDownloadBytes?: number;
  /** The environment whose proxy variables apply (default `process.env`, read at each call). */
  env?: NodeJS.ProcessEnv;
}


const TEXT_TYPES = /^(text\/[a-z0-9.+-]+|application\/(json|[a-z0-9.-]+\+json|xml|[a-z0-9.-]+\+xml|xhtml\+xml|javascript|x-javascript|ecmascript|x-ndjson|ld\+json|yaml|x-yaml|toml|x-www-form-urlencoded)|image\/svg\+xml)$/;

/** Why a declared type is not text, or null (an absent type is judged by sniffing). */
function binaryType(contentType: string): boolean {
  const t = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  return t !== "" && !TEXT_TYPES.test(t);
}

// node:dns/promises and node:zlib load on the first fetch that needs them (a first turn that fetches nothing never pays).
const defaultResolve: Resolver = async (host) => (await import("node:dns/promises")).lookup(host, { all: true, verbatim: true });

const HEADERS = {
  "user-agent": "Berth-web_fetch/1",
  accept: "text/html,application/xhtml+xml,application/json;q=0.9,text/*;q=0.8,*/*;q=0.1",
  "accept-encoding": "identity",
};

class Refusal extends Error {}

/** A hop's proxy could not be used: its variable and the code (providers/proxy.ts: `PROXY_HTTP_403`, `PROXY_ECONNREFUSED`…). */
class ProxyFailure extends Error {
  constructor(
    readonly variable: string,
    readonly code: string,
  ) {
    super(`the connection through ${variable} failed (${code})`);
  }
}

/** `e` as a `ProxyFailure` of `variable` (node's own connection errors get the `PROXY_` prefix). */
function proxyFailure(variable: string, e: unknown): ProxyFailure {
  const code = (e as { code?: unknown }).code;
  return new ProxyFailure(variable, typeof code !== "string" ? "PROXY_CLOSED" : code.startsWith("PROXY_") ? code : `PROXY_${code}`);
}

interface Hop {
  res: IncomingMessage;
  url: URL;
}

function hostOf(u: URL): string {
  return u.hostname.replace(/^\[|\]$/g, "").toLowerCase();
}

function portOf(u: URL): number {
  return u.port !== "" ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
}

export function createWebFetchTool(o: WebFetchOptions = {}): Tool {
  const auto = new Set((o.autoApproveHosts ?? []).map((h) => h.toLowerCase()));
  const resolve = o.resolve ?? defaultResolve;
  const timeoutMs = o.timeoutMs ?? WEB_FETCH_TIMEOUT_MS;
  const maxDownload = o.maxDownloadBytes ?? MAX_DOWNLOAD_BYTES;
  const allowed = (address: string, port: number): boolean => (o.allow ?? []).some((a) => a.host === address && a.port === port);
  const isAuto = (raw: unknown): boolean => webFetchAutoApprove(auto, raw);

  /** Checks one hop and returns the single address to connect to. */
  async function checkedAddress(u: URL, signal: AbortSignal): Promise<{ address: string; family: number }> {
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Refusal(`only http and https URLs can be fetched (got ${u.protocol})`);
    if (u.username !== "" || u.password !== "") throw new Refusal("URLs with credentials are refused");
    const host = hostOf(u);
    const port = portOf(u);
    let addrs: Array<{ address: string; family: number }>;
    if (isIP(host) !== 0) addrs = [{ address: host, family: isIP(host) }];
    else {
      signal.throwIfAborted();
      // The resolver takes no signal: race it so the call's time bound and cancellation still hold.
      let onAbort: (() => void) | undefined;
      const aborted = new Promise<never>((_, reject) => {
        onAbort = () => reject(new Error("aborted")); // the catch below rethrows the signal's own reason
        signal.addEventListener("abort", onAbort, { once: true });
      });
      try {
        addrs = await Promise.race([resolve(host), aborted]);
      } catch {
        signal.throwIfAborted();
        throw new Refusal(`could not resolve ${host}`);
      } finally {
        if (onAbort !== undefined) signal.removeEventListener("abort", onAbort);
      }
    }
    if (addrs.length === 0) throw new Refusal(`could not resolve ${host}`);
    for (const a of addrs) {
      if (allowed(a.address, port)) continue;
      const why = blockedReason(a.address);
      if (why !== null) throw new Refusal(`${host} is not a public address (${why}); only public hosts can be fetched`);
    }
    return addrs[0] as { address: string; family: number };
  }

  /** A CONNECT tunnel to the checked address through `proxy` (the signal closes one still waiting). */
  function tunnel(proxy: ProxyTarget, variable: string, to: { address: string }, port: number, signal: AbortSignal): Promise<Socket> {
    return new Promise((resolveSocket, reject) =>
      connectTunnel(proxy, to.address, port, (e, sock) => (e !== null ? reject(signal.aborted ? e : proxyFailure(variable, e)) : resolveSocket(sock as Socket)), signal),
    );
  }

  async function get(u: URL, to: { address: string; family: number }, signal: AbortSignal): Promise<IncomingMessage> {
    const https = u.protocol === "https:";
    const variable = proxyVariable(https ? "https:" : "http:");
    let proxy: ProxyTarget | null;
    try {
      proxy = proxyFor(https ? "https:" : "http:", hostOf(u), portOf(u), o.env ?? process.env);
    } catch (e) {
      throw proxyFailure(variable, e);
    }
    let req;
    if (proxy === null) {
      const lookup: LookupFunction = (_host, opts, cb) => {
        if ((opts as { all?: boolean }).all === true) (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [to]);
        else cb(null, to.address, to.family);
      };
      req = (https ? httpsRequest : httpRequest)(u, { method: "GET", agent: false, lookup, signal, ...(o.ca !== undefined && https ? { ca: o.ca } : {}), headers: HEADERS });
    } else if (https) {
      const raw = await tunnel(proxy, variable, to, portOf(u), signal);
      if (signal.aborted) {
        raw.destroy();
        signal.throwIfAborted();
      }
      const host = hostOf(u);
      const secure = (): Socket => tlsConnect({ socket: raw, ...(isIP(host) === 0 ? { servername: host } : {}), ...(o.ca !== undefined ? { ca: o.ca } : {}) });
      req = httpsRequest(u, { method: "GET", createConnection: secure, signal, headers: HEADERS });
    } else {
      // Absolute form, naming the checked address; the name goes in `Host`.
      const address = isIP(to.address) === 6 ? `[${to.address}]` : to.address;
      req = httpRequest({
        host: proxy.host,
        port: proxy.port,
        method: "GET",
        path: `http://${address}:${portOf(u)}${u.pathname}${u.search}`,
        agent: false,
        signal,
        headers: { ...HEADERS, host: u.host, ...(proxy.authorization !== undefined ? { "proxy-authorization": proxy.authorization } : {}) },
      });
    }
    // An http: hop through the proxy: a failure before its answer is the proxy connection's.
    const viaProxy = proxy !== null && !https;
    let answered = false;
    return new Promise((resolveRes, reject) => {
      req.once("response", (res) => {
        answered = true;
        // Errors after a body was dropped (redirect, refusal) or on abort must never go unhandled; a body
        // being read still sees them through its iterator.
        res.on("error", () => undefined);
        resolveRes(res);
      });
      // Kept for the request's whole life: a late error (abort after the response) is then a no-op.
      req.on("error", (e) => reject(viaProxy && !answered && !signal.aborted ? proxyFailure(variable, e) : e));
      req.end();
    });
  }

  async function fetchFollowing(start: URL, signal: AbortSignal): Promise<Hop | { redirectOut: string }> {
    let url = start;
    const startAuto = isAuto(start.href);
    for (let hop = 0; ; hop++) {
      const to = await checkedAddress(url, signal);
      const res = await get(url, to, signal);
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if ([301, 302, 303, 307, 308].includes(status) && typeof location === "string") {
        res.destroy();
        if (hop >= MAX_REDIRECTS) throw new Refusal(`more than ${MAX_REDIRECTS} redirects`);
        let next: URL;
        try {
          next = new URL(location, url);
        } catch {
          throw new Refusal("a redirect named an invalid URL");
        }
        if (startAuto && !isAuto(next.href)) return { redirectOut: next.href };
        url = next;
        continue;
      }
      return { res, url };
    }
  }

  async function readBody(res: IncomingMessage, signal: AbortSignal): Promise<{ body: Buffer; cut: boolean } | "binary"> {
    const enc = String(res.headers["content-encoding"] ?? "identity").toLowerCase().trim();
    let stream: Readable = res;
    if (enc === "gzip" || enc === "x-gzip") stream = res.pipe((await import("node:zlib")).createGunzip());
    else if (enc === "deflate") stream = res.pipe((await import("node:zlib")).createInflate());
    else if (enc === "br") stream = res.pipe((await import("node:zlib")).createBrotliDecompress());
    const chunks: Buffer[] = [];
    let size = 0;
    let cut = false;
    const sniff = res.headers["content-type"] === undefined;
    try {
      for await (const c of stream) {
        signal.throwIfAborted();
        const buf = c as Buffer;
        if (sniff && size === 0 && buf.subarray(0, 1024).includes(0)) return "binary";
        chunks.push(buf);
        size += buf.length;
        // Memory stays within the bound plus one chunk; a cut is known only once a byte past the bound arrived.
        if (size > maxDownload) {
          cut = true;
          break;
        }
      }
    } finally {
      res.destroy();
      if (stream !== res) stream.destroy();
    }
    return { body: Buffer.concat(chunks, size).subarray(0, maxDownload), cut };
  }

  const tool = defineLocalTool({
    ...WEB_FETCH_DEF,
    async execute(args, ctx) {
      let start: URL;
      try {
        start = new URL(args.url);
      } catch {
        return fail("failed", "web_fetch: not a valid absolute URL");
      }
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = AbortSignal.any([ctx.signal, timeout]);
      try {
        const got = await fetchFollowing(start, signal);
        if ("redirectOut" in got) {
          return ok(`The page redirects to ${got.redirectOut}, whose host is not auto-approved. Call web_fetch with that URL to fetch it (the user will be asked).`);
        }
        const { res, url } = got;
        const status = res.statusCode ?? 0;
        const type = String(res.headers["content-type"] ?? "");
        if (binaryType(type)) {
          res.destroy();
          return fail("failed", `web_fetch: ${url.href} is ${type.split(";")[0]?.trim()}, not text; binary content is not downloaded`);
        }
        const read = await readBody(res, signal);
        if (read === "binary") return fail("failed", `web_fetch: ${url.href} looks like binary content`);
        const text = bodyText(read.body, type, url.href);
        const offset = args.offset ?? 0;
        if (offset > 0 && offset >= text.length) return fail("failed", `web_fetch: offset ${offset} is past the end (${text.length} characters)`);
        let page = text.slice(offset, offset + MAX_PAGE_BYTES);
        if (Buffer.byteLength(page) > MAX_PAGE_BYTES) page = truncateUtf8(page, MAX_PAGE_BYTES);
        // Never end a page between the halves of a surrogate pair.
        const lastCode = page.charCodeAt(page.length - 1);
        if (page.length > 1 && lastCode >= 0xd800 && lastCode <= 0xdbff) page = page.slice(0, -1);
        const end = offset + page.length;
        const head = [`URL: ${url.href}`, `Status: ${status}`, ...(type !== "" ? [`Content-Type: ${type.split(";")[0]?.trim()}`] : [])];
        const notes: string[] = [];
        if (end < text.length) notes.push(`[characters ${offset}-${end} of ${text.length}; continue with offset=${end}]`);
        if (read.cut) notes.push(`[download stopped at ${maxDownload} bytes; the rest of the document was not fetched]`);
        const content = `${head.join("\n")}\n\n${page}${notes.length > 0 ? `\n\n${notes.join("\n")}` : ""}`;
        return status >= 400 ? fail("failed", content) : ok(content);
      } catch (err) {
        if (ctx.signal.aborted) return fail("cancelled", "web_fetch: cancelled");
        if (timeout.aborted) return fail("failed", `web_fetch: timed out after ${timeoutMs % 1000 === 0 ? `${timeoutMs / 1000} s` : `${timeoutMs} ms`}`, { timedOut: true });
        if (err instanceof Refusal) return fail("failed", `web_fetch: refused: ${err.message}`);
        const code = (err as NodeJS.ErrnoException).code;
        if (err instanceof ProxyFailure) return fail("failed", `web_fetch: ${err.message}`);
        return fail("failed", `web_fetch: request failed${code !== undefined ? ` (${code})` : ""}`);
      }
    },
  });
  return { ...tool, autoApprove: (args) => isAuto(args["url"]) };
}
