/**
 * The daemon's browser-facing surface without a browser: static UI serving (headers, the only
 * reachable paths, a missing build), the Host/Origin guard on UI routes and on the AHP upgrade,
 * and the `berth-token.<token>` sub-protocol next to Bearer and `?tkn=`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { request, type IncomingMessage } from "node:http";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";
import { tempHome } from "../host/helpers.js";
import { createHmac } from "node:crypto";
import { uiProofMessage } from "../../src/core/ui-proof.js";

function uiDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "ui-dist-"));
  mkdirSync(join(dir, "assets"));
  writeFileSync(join(dir, "index.html"), "<!doctype html><title>berth</title>");
  writeFileSync(join(dir, "assets", "index-abc.js"), "export {};");
  return dir;
}

async function withUiHost(fn: (h: HostHandle) => Promise<void>, dir = uiDir()): Promise<void> {
  const h = await startHost({ home: tempHome(), log: () => {}, uiDir: dir });
  try {
    await fn(h);
  } finally {
    await h.close();
  }
}

interface Res {
  status: number;
  headers: IncomingMessage["headers"];
  body: string;
}
function get(h: HostHandle, path: string, headers: Record<string, string> = {}, method = "GET"): Promise<Res> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: h.port, path, method, headers }, (res) => {
      let body = "";
      res.on("data", (b: Buffer) => (body += b.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}
/** A raw WebSocket upgrade request; resolves with the HTTP status the daemon answered. */
function upgrade(h: HostHandle, headers: Record<string, string>, path = "/ahp"): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: "127.0.0.1",
      port: h.port,
      path,
      headers: { Connection: "Upgrade", Upgrade: "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", ...headers },
    });
    req.on("upgrade", (_res, socket) => {
      socket.destroy();
      resolve(101);
    });
    req.on("response", (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
}
function wsOutcome(url: string, protocols: string[] | undefined, headers: Record<string, string> = {}): Promise<{ open: boolean; protocol?: string; status?: number }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, protocols, { headers });
    ws.on("open", () => {
      resolve({ open: true, protocol: ws.protocol });
      ws.close();
    });
    ws.on("unexpected-response", (_req, res) => {
      resolve({ open: false, status: res.statusCode ?? 0 });
      ws.terminate();
    });
    ws.on("error", () => resolve({ open: false }));
  });
}

test("UI-SERVE: index and hashed assets carry the strict CSP, nosniff, no framing; caching by kind", () =>
  withUiHost(async (h) => {
    const index = await get(h, "/");
    assert.equal(index.status, 200);
    assert.equal(index.body, "<!doctype html><title>berth</title>");
    assert.match(index.headers["content-type"] ?? "", /^text\/html/);
    const csp = String(index.headers["content-security-policy"] ?? "");
    assert.match(csp, /(^|; )default-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(index.headers["x-content-type-options"], "nosniff");
    assert.equal(index.headers["x-frame-options"], "DENY");
    assert.equal(index.headers["referrer-policy"], "no-referrer");
    assert.equal(index.headers["cache-control"], "no-store");
    assert.equal((await get(h, "/index.html")).body, index.body);
    const head = await get(h, "/", {}, "HEAD");
    assert.equal(head.status, 200);
    assert.equal(head.body, "");

    const js = await get(h, "/assets/index-abc.js");
    assert.equal(js.status, 200);
    assert.match(js.headers["content-type"] ?? "", /^text\/javascript/);
    assert.match(js.headers["cache-control"] ?? "", /immutable/);
    assert.equal(js.headers["x-content-type-options"], "nosniff");
    assert.equal((await get(h, "/favicon.ico")).status, 204);
  }));

test("UI-SERVE: nothing outside the UI directory is reachable; missing assets are 404", () =>
  withUiHost(async (h) => {
    for (const p of ["/assets/../../host/token", "/assets/%2e%2e%2fhost%2ftoken", "/assets/.hidden", "/assets/", "/assets/a/b.js", "/../host/token", "/token", "/assets/missing.js"]) {
      const r = await get(h, p);
      assert.equal(r.status, 404, `${p} answered ${r.status}`);
      assert.ok(!r.body.includes(h.token), p);
    }
  }));

test("UI-SERVE: a daemon whose UI is not built says so and how to fix it", () =>
  withUiHost(async (h) => {
    const r = await get(h, "/");
    assert.equal(r.status, 503);
    assert.match(r.body, /web UI is not built.*npm run build/);
  }, mkdtempSync(join(tmpdir(), "ui-empty-"))));

test("UI-SERVE: the listener's JSON answers (refusals, inspection) carry nosniff and no-store", () =>
  withUiHost(async (h) => {
    for (const r of [await get(h, "/", { Host: `evil.example:${h.port}` }), await get(h, "/status", { Authorization: `Bearer ${h.token}` })]) {
      assert.match(r.headers["content-type"] ?? "", /^application\/json/);
      assert.equal(r.headers["x-content-type-options"], "nosniff");
      assert.equal(r.headers["cache-control"], "no-store");
    }
  }));

// The guard is the listener-wide checkHostOrigin (http-guard.ts, tested in test/host/); these
// cases pin that the UI routes and the upgrade the page uses go through it.
test("UI-GUARD: a foreign Host (DNS rebinding) or Origin is refused on UI routes and on the upgrade", () =>
  withUiHost(async (h) => {
    const bearer = { Authorization: `Bearer ${h.token}` };
    assert.equal((await get(h, "/", { Host: `evil.example:${h.port}` })).status, 403);
    assert.equal((await get(h, "/", { Host: `127.0.0.1:${h.port + 1}` })).status, 403);
    assert.equal((await get(h, "/assets/index-abc.js", { Host: `evil.example:${h.port}` })).status, 403);
    assert.equal((await get(h, "/", { Origin: "http://evil.example" })).status, 403);
    assert.equal((await get(h, "/", { Host: `localhost:${h.port}` })).status, 200);
    assert.equal((await get(h, "/", { Host: `localhost:${h.port}`, Origin: `http://localhost:${h.port}` })).status, 200);

    assert.equal(await upgrade(h, { ...bearer, Host: `evil.example:${h.port}` }), 403);
    assert.equal(await upgrade(h, { Host: `evil.example:${h.port}`, "Sec-WebSocket-Protocol": `berth-ahp, berth-token.${h.token}` }), 403);
    assert.equal(await upgrade(h, { ...bearer, Origin: "http://evil.example" }), 403);
    assert.equal(await upgrade(h, { ...bearer, Origin: `http://127.0.0.1:${h.port}` }), 101);
    assert.equal(await upgrade(h, bearer), 101, "clients without Origin are judged by the token");
    assert.equal(await upgrade(h, { Origin: `http://127.0.0.1:${h.port}` }), 401, "the right origin still needs the token");
    assert.equal(await upgrade(h, { Origin: `http://127.0.0.1:${h.port}`, "Sec-WebSocket-Protocol": `berth-ahp, berth-token.${h.token}` }), 101);
  }));

test("UI-AUTH: the berth-token sub-protocol authenticates; berth-ahp is selected, never the token", () =>
  withUiHost(async (h) => {
    const ok = await wsOutcome(h.ahpUrl, ["berth-ahp", `berth-token.${h.token}`]);
    assert.deepEqual(ok, { open: true, protocol: "berth-ahp" });
    assert.deepEqual(await wsOutcome(h.ahpUrl, ["berth-ahp", "berth-token.not-the-token"]), { open: false, status: 401 });
    assert.deepEqual(await wsOutcome(h.ahpUrl, ["berth-ahp"]), { open: false, status: 401 });
    // The existing forms keep working for non-browser clients.
    assert.equal((await wsOutcome(h.ahpUrl, undefined, { Authorization: `Bearer ${h.token}` })).open, true);
    assert.equal((await wsOutcome(`${h.ahpUrl}?tkn=${h.token}`, undefined)).open, true);
    assert.match(h.uiUrl, new RegExp(`^http://127\\.0\\.0\\.1:${h.port}/#token=${h.token}$`));
    assert.equal(JSON.parse(h.readyLine()).ui, h.uiUrl);
  }));


test("/ui-proof: HMAC of the token over the listener's port and the nonce; nonces of 16 to 128 base64url characters", async () => {
  await withUiHost(async (h) => {
    const proof = (nonce: string, port = h.port): string => createHmac("sha256", h.token).update(uiProofMessage(port, nonce)).digest("base64url");
    for (const n of [16, 128]) {
      const nonce = "a".repeat(n - 1) + "_";
      const r = await get(h, `/ui-proof?nonce=${nonce}`);
      assert.equal(r.status, 200, `a ${n}-character nonce`);
      assert.equal(r.headers["cache-control"], "no-store");
      assert.deepEqual(JSON.parse(r.body), { proof: proof(nonce) });
      assert.notEqual(JSON.parse(r.body).proof, proof(nonce, h.port + 1), "another port's proof differs");
      assert.ok(!r.body.includes(h.token));
    }
    for (const bad of ["a".repeat(15), "a".repeat(129), "a".repeat(16) + "=", "a".repeat(16) + "%2F", ""]) {
      const r = await get(h, `/ui-proof?nonce=${bad}`);
      assert.equal(r.status, 400, `nonce ${JSON.stringify(bad)}`);
      assert.match(r.body, /nonce must be 16 to 128 base64url characters/);
    }
    assert.equal((await get(h, "/ui-proof")).status, 400);
    // The Host/Origin guard applies as to every route (a DNS-rebinding page gets nothing).
    assert.equal((await get(h, `/ui-proof?nonce=${"a".repeat(16)}`, { Host: "evil.example:80" })).status, 403);
  });
});
