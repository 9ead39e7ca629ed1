/**
 * The daemon's HTTP listener guard against DNS rebinding and cross-site requests. One function,
 * `checkHostOrigin`, decides for every HTTP request and every WebSocket upgrade on the listener,
 * before routing and before any token check.
 *
 * Contract (callers, including static routes added by other modules, may rely on it):
 *  - Exactly one `Host` header must be present and name this listener: one of its loopback names — `127.0.0.1`,
 *    `localhost`, `[::1]` — or the literal address it is bound to, with the listener's port
 *    (a missing port is accepted only when the listener is on port 80). Names compare
 *    case-insensitively; anything else (a rebinding domain, another port) is refused.
 *  - `Origin`, when present, must be `http://<an allowed Host value>`; `null`, another scheme or
 *    another host is refused. No `Origin` (curl, native clients, same-origin GETs) passes.
 *  - The answer is `null` (proceed) or `{ status: 403, error }` with a fixed message that never
 *    echoes the request's headers. The check reads headers only; it never consumes the body.
 */
import type { IncomingMessage } from "node:http";

export interface GuardRefusal {
  status: 403;
  error: "forbidden_host" | "forbidden_origin";
  message: string;
}

export interface ListenerNames {
  /** Accepted `Host` header values (lower-case, with port where one is required). */
  hosts: ReadonlySet<string>;
}

/** The names a listener bound to `bindHost:port` answers to. */
export function listenerNames(bindHost: string, port: number): ListenerNames {
  const names = ["127.0.0.1", "localhost", "[::1]"];
  const bound = bindHost.includes(":") ? `[${bindHost.replace(/^\[|\]$/g, "")}]` : bindHost;
  if (!names.includes(bound.toLowerCase()) && bound !== "0.0.0.0" && bound !== "[::]") names.push(bound.toLowerCase());
  const hosts = new Set<string>();
  for (const n of names) {
    hosts.add(`${n}:${port}`);
    if (port === 80) hosts.add(n);
  }
  return { hosts };
}

export function checkHostOrigin(req: IncomingMessage, names: ListenerNames): GuardRefusal | null {
  const host = req.headers.host;
  // Node keeps only the first of repeated Host headers; a request with two is refused (RFC 9112 §3.2), so a
  // second, foreign name cannot ride behind an allowed one.
  if (typeof host !== "string" || !names.hosts.has(host.toLowerCase()) || hostHeaders(req) !== 1)
    return { status: 403, error: "forbidden_host", message: "the Host header does not name this daemon's loopback listener" };
  const origin = req.headers.origin;
  if (origin !== undefined) {
    const o = String(origin).toLowerCase();
    if (!o.startsWith("http://") || !names.hosts.has(o.slice("http://".length)))
      return { status: 403, error: "forbidden_origin", message: "cross-origin requests are refused (the Origin is not this daemon)" };
  }
  return null;
}

function hostHeaders(req: IncomingMessage): number {
  let n = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === "host") n++;
  return n;
}
