/**
 * Read-only serving of the built web UI (`dist/ui/`). Loaded lazily by host.ts on the first UI
 * request, so the daemon's cold path never touches it.
 *
 * Contract: only `/`, `/index.html` and `/assets/<name>` (name of `[A-Za-z0-9._-]`, no leading
 * dot) are served, straight from the UI directory; nothing else is reachable (no traversal is
 * expressible). Every response carries the strict CSP, `nosniff`, no framing and no referrer.
 */
import { extname } from "node:path";
import type { ServerResponse } from "node:http";
import { DEFAULT_UI_DIR, readUiFile } from "../../store/ui-assets.js";
import { UI_ASSET as ASSET } from "./ui-guard.js";

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".json": "application/json",
};


function send(res: ServerResponse, status: number, headers: Record<string, string>, body?: Buffer | string): void {
  res.writeHead(status, { ...SECURITY_HEADERS, ...headers });
  res.end(body);
}

export async function serveUi(pathname: string, res: ServerResponse, dir: string = DEFAULT_UI_DIR, head = false): Promise<void> {
  if (pathname === "/favicon.ico") return send(res, 204, { "cache-control": "max-age=86400" });
  const asset = ASSET.exec(pathname);
  const file = asset ? `assets/${asset[1]!}` : "index.html";
  const body = await readUiFile(dir, file);
  if (body === null) {
    if (!asset) {
      return send(
        res,
        503,
        { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" },
        "berth: the web UI is not built (dist/ui/index.html is missing); run `npm run build` in the berth checkout.\n",
      );
    }
    return send(res, 404, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" }, "not found\n");
  }
  const type = TYPES[extname(file)] ?? "application/octet-stream";
  // Hashed asset names change with their content; index.html must always be fetched fresh.
  const cache = asset ? "public, max-age=31536000, immutable" : "no-store";
  send(res, 200, { "content-type": type, "cache-control": cache, "content-length": String(body.length) }, head ? undefined : body);
}
