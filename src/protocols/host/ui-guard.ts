/**
 * Same-origin guard for the daemon's browser-facing surface (the web UI's static files and the
 * AHP WebSocket upgrade), plus the WebSocket sub-protocol that carries the bearer token for a
 * browser (which cannot set `Authorization` on a WebSocket and must not put the token in a URL).
 *
 * Contract:
 *  - `Host` must name this listener: a loopback name (`127.0.0.1`, `localhost`, `[::1]`) with the
 *    listening port, or — only when the user passed `--listen` with a specific non-loopback
 *    address — that address and port. A wildcard listen (`0.0.0.0`, `::`) accepts any `Host`
 *    (the token is then the only gate; docs/ui.md and the README say so).
 *  - `Origin`, when present, must be `http://` + that same `Host` (a page served by this daemon).
 *    Clients that send no `Origin` (CLIs, tests, other hosts' tooling) are judged by the token only.
 */
import type { IncomingMessage } from "node:http";

/** The sub-protocol the UI asks for; the daemon selects it when offered. */
export const AHP_SUBPROTOCOL = "berth-ahp";
/** Prefix of the sub-protocol value that carries the token: `berth-token.<token>`. */
export const TOKEN_SUBPROTOCOL_PREFIX = "berth-token.";

/** `/assets/<name>`: the only asset paths the UI handler serves (no traversal is expressible). */
export const UI_ASSET = /^\/assets\/([A-Za-z0-9_-][A-Za-z0-9._-]{0,200})$/;

/** Whether `pathname` is one the UI handler answers (host.ts routes on it without loading ui-static). */
export function isUiPath(pathname: string): boolean {
  return pathname === "/" || pathname === "/index.html" || pathname === "/favicon.ico" || UI_ASSET.test(pathname);
}

const LOOPBACK_NAMES = ["127.0.0.1", "localhost", "[::1]"];

export function isLoopbackHost(host: string): boolean {
  return host === "127.0.0.1" || host === "::1" || host === "localhost" || /^127\.\d+\.\d+\.\d+$/.test(host);
}
function isWildcard(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "";
}

export type GuardResult = { ok: true } | { ok: false; status: 403 | 421; reason: string };

export function checkHostAndOrigin(req: IncomingMessage, listenHost: string, port: number): GuardResult {
  const hostHeader = req.headers.host;
  if (typeof hostHeader !== "string" || hostHeader.length === 0) return { ok: false, status: 421, reason: "missing Host header" };
  const host = hostHeader.toLowerCase();
  if (!isWildcard(listenHost)) {
    const allowed = new Set(LOOPBACK_NAMES.map((n) => `${n}:${port}`));
    if (!isLoopbackHost(listenHost)) allowed.add(`${listenHost.includes(":") ? `[${listenHost}]` : listenHost}:${port}`);
    if (!allowed.has(host)) return { ok: false, status: 421, reason: "Host header does not name this daemon" };
  }
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `http://${host}`) return { ok: false, status: 403, reason: "cross-origin request refused" };
  return { ok: true };
}

/** The token a browser offered as a `berth-token.<token>` sub-protocol, if any. */
export function tokenFromSubprotocols(req: IncomingMessage): string | undefined {
  const h = req.headers["sec-websocket-protocol"];
  if (typeof h !== "string") return undefined;
  for (const p of h.split(",")) {
    const v = p.trim();
    if (v.startsWith(TOKEN_SUBPROTOCOL_PREFIX)) return v.slice(TOKEN_SUBPROTOCOL_PREFIX.length);
  }
  return undefined;
}

/**
 * ws `handleProtocols`: select `berth-ahp` when offered (never echo the token value back);
 * a client that offered only other protocols gets none selected.
 */
export function selectSubprotocol(protocols: Set<string>): string | false {
  return protocols.has(AHP_SUBPROTOCOL) ? AHP_SUBPROTOCOL : false;
}
