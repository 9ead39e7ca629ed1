/**
 * Small helpers for the daemon's browser-facing surface. The Host/Origin check itself is the
 * listener-wide `checkHostOrigin` (http-guard.ts), run before routing on every request and upgrade.
 *
 * Contract: the UI's routes are exactly those `isUiPath` accepts; a browser authenticates its
 * WebSocket with a `berth-token.<token>` sub-protocol value (it cannot set `Authorization`, and the
 * token must never be in a URL), and the daemon selects `berth-ahp`, never echoing the token.
 */
import { createHmac } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { uiProofMessage } from "../../core/ui-proof.js";

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

export function isLoopbackHost(host: string): boolean {
  return host === "127.0.0.1" || host === "::1" || host === "localhost" || /^127\.\d+\.\d+\.\d+$/.test(host);
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

/** The answer to `/ui-proof?nonce=…` for the daemon listening on `port` with `token` (core/ui-proof.ts). */
export function uiProof(token: string, port: number, nonce: string): string {
  return createHmac("sha256", token).update(uiProofMessage(port, nonce)).digest("base64url");
}
