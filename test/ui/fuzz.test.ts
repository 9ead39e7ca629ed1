/**
 * Seeded fuzzer for the daemon's HTTP listener (the web UI's routes, the inspection routes and the AHP upgrade),
 * over raw TCP so malformed request lines and headers reach Node's parser and our router unchanged. Targeted cases
 * have a fixed expected status (docs/ui.md "Security", docs/host.md); random ones (methods, traversal and encoded
 * paths, odd request targets, Host/Origin/token variants, huge headers and bodies, truncated requests) must get a
 * status from a fixed set. Always: no response carries the token or a file from outside the UI directory, a 200 UI
 * response is exactly a UI file, the host logs no internal error, and it still serves afterwards.
 * `FUZZ_SEED` / `FUZZ_COUNT` reproduce or lengthen a run.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";
import { prng } from "../helpers/prng.js";
import { tempHome } from "../host/helpers.js";

const SEED = Number(process.env.FUZZ_SEED ?? 20261203);
const COUNT = Number(process.env.FUZZ_COUNT ?? 250);

type Rand = () => number;
const pick = <T>(r: Rand, a: readonly T[]): T => a[Math.floor(r() * a.length)]!;

const SENTINEL = "OUTSIDE-THE-UI-DIR-7f3a";
const INDEX = "<!doctype html><title>berth fuzz</title>";
const ASSET = "export const fuzz = 1;";

/** A UI directory with one asset, and files next to and above it that must never be served. */
function uiDir(): string {
  const root = mkdtempSync(join(tmpdir(), "ui-fuzz-"));
  const dir = join(root, "ui");
  mkdirSync(join(dir, "assets"), { recursive: true });
  writeFileSync(join(dir, "index.html"), INDEX);
  writeFileSync(join(dir, "assets", "index-abc.js"), ASSET);
  writeFileSync(join(dir, "assets", ".hidden"), SENTINEL);
  writeFileSync(join(dir, "secret.txt"), SENTINEL);
  writeFileSync(join(root, "outside.txt"), SENTINEL);
  return dir;
}

interface Reply {
  status: number | null;
  head: string;
  body: Buffer;
}

/**
 * Writes `data` on a fresh connection and reads until the server closes it (requests say `Connection: close`; a
 * truncated one is closed by the listener's pre-auth idle timeout). A 101 is read up to its head, then dropped.
 */
function rawRequest(port: number, data: Buffer, head = false): Promise<Reply> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    s.on("data", (b: Buffer) => {
      chunks.push(b);
      if (complete(Buffer.concat(chunks), head)) s.destroy();
    });
    s.on("error", () => undefined);
    s.once("connect", () => s.write(data));
    s.once("close", () => {
      const all = Buffer.concat(chunks);
      const sep = all.indexOf("\r\n\r\n");
      const head = (sep === -1 ? all : all.subarray(0, sep)).toString("latin1");
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
      resolve({ status: m ? Number(m[1]) : null, head, body: sep === -1 ? Buffer.alloc(0) : all.subarray(sep + 4) });
    });
  });
}

/**
 * Whether `all` holds one whole response (a 101 up to its head): the reader then closes, since a server may keep a
 * connection open (keep-alive) after answering a request that did not ask to close.
 */
function complete(all: Buffer, head: boolean): boolean {
  const sep = all.indexOf("\r\n\r\n");
  if (sep === -1) return false;
  const h = all.subarray(0, sep).toString("latin1");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(h)?.[1] ?? 0);
  if (head || status === 101 || status === 204 || status === 304) return true;
  const body = all.subarray(sep + 4);
  const len = /\r\ncontent-length: *(\d+)/i.exec(h);
  if (len) return body.length >= Number(len[1]);
  if (/\r\ntransfer-encoding: *chunked/i.test(h)) return body.includes("0\r\n\r\n");
  return false;
}

interface Req {
  method: string;
  target: string;
  headers: Array<[string, string]>;
  body?: Buffer;
  version?: string;
  /** Send only part of the encoded request (the listener's idle timeout must close it). */
  cut?: boolean;
}

function encode(q: Req): Buffer {
  const lines = [`${q.method} ${q.target} ${q.version ?? "HTTP/1.1"}`, ...q.headers.map(([k, v]) => `${k}: ${v}`)];
  const all = Buffer.concat([Buffer.from(lines.join("\r\n") + "\r\n\r\n", "latin1"), q.body ?? Buffer.alloc(0)]);
  return q.cut === true ? all.subarray(0, Math.max(1, all.length >> 1)) : all;
}

const UPGRADE: Array<[string, string]> = [
  ["Connection", "Upgrade"],
  ["Upgrade", "websocket"],
  ["Sec-WebSocket-Version", "13"],
  ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
];

/** Targeted requests with the one status each must get (`token` and `port` filled in per host). */
function targeted(h: HostHandle): Array<{ q: Req; status: number; what: string; resetOk?: boolean }> {
  const host: [string, string] = ["Host", `127.0.0.1:${h.port}`];
  const close: [string, string] = ["Connection", "close"];
  const g = (target: string, extra: Array<[string, string]> = [], method = "GET"): Req => ({ method, target, headers: [host, close, ...extra] });
  const bearer = (v: string): [string, string] => ["Authorization", v];
  const cases: Array<{ q: Req; status: number; what: string; resetOk?: boolean }> = [
    { q: g("/"), status: 200, what: "index" },
    { q: g("/index.html", [], "HEAD"), status: 200, what: "HEAD index" },
    { q: g("/assets/index-abc.js"), status: 200, what: "asset" },
    { q: g("/favicon.ico"), status: 204, what: "favicon" },
    { q: g("/healthz"), status: 200, what: "healthz" },
    { q: g("/assets/.hidden"), status: 404, what: "hidden asset" },
    { q: g("/secret.txt"), status: 404, what: "file beside index.html" },
    { q: g("/assets/..%2f..%2foutside.txt"), status: 404, what: "encoded traversal" },
    { q: g("/assets/%2e%2e/%2e%2e/outside.txt"), status: 404, what: "dot-encoded traversal" },
    { q: g("/../outside.txt"), status: 404, what: "raw traversal" },
    { q: g("/assets/..\\..\\outside.txt"), status: 404, what: "backslash traversal" },
    { q: g("/assets/index-abc.js%00.html"), status: 404, what: "NUL in asset name" },
    { q: g("/assets/a/b.js"), status: 404, what: "nested asset" },
    { q: g("/assets/" + "a".repeat(300)), status: 404, what: "long asset name" },
    { q: g("/", [], "POST"), status: 405, what: "POST /" },
    { q: g("/healthz", [], "DELETE"), status: 405, what: "DELETE /healthz" },
    { q: g("/sessions", [], "PUT"), status: 405, what: "PUT /sessions" },
    { q: g("*", [], "OPTIONS"), status: 405, what: "OPTIONS *" },
    { q: g("/sessions"), status: 401, what: "sessions without a token" },
    { q: g(`/sessions?tkn=${h.token}`), status: 401, what: "token in the query of an HTTP route" },
    { q: g("/sessions", [bearer(`Bearer ${h.token}x`)]), status: 401, what: "longer token" },
    { q: g("/sessions", [bearer(`Bearer ${h.token.slice(0, -1)}`)]), status: 401, what: "shorter token" },
    { q: g("/sessions", [bearer(`Bearer ${"A".repeat(h.token.length)}`)]), status: 401, what: "same-length wrong token" },
    { q: g("/sessions", [bearer(`bearer ${h.token}`)]), status: 401, what: "lower-case scheme" },
    { q: g("/sessions", [bearer(`Basic ${h.token}`)]), status: 401, what: "basic scheme" },
    { q: g("/providers", [bearer(`Bearer ${"é".repeat(40)}`)]), status: 401, what: "non-ASCII token" },
    { q: g("/sessions", [bearer(`Bearer ${h.token}`)]), status: 200, what: "sessions with the token" },
    { q: g("/providers?provider=%00%ff", [bearer(`Bearer ${h.token}`)]), status: 200, what: "providers with an odd filter" },
    { q: g("/", [["Host", `evil.example:${h.port}`]]), status: 403, what: "finding: a second, foreign Host header behind an allowed one" },
    { q: { method: "GET", target: "/", headers: [["Host", `evil.example:${h.port}`], close] }, status: 403, what: "foreign Host" },
    { q: { method: "GET", target: "/", headers: [close], version: "HTTP/1.0" }, status: 403, what: "no Host" },
    { q: g("/", [["Origin", "null"]]), status: 403, what: "Origin null" },
    { q: g("/", [["Origin", `https://127.0.0.1:${h.port}`]]), status: 403, what: "https Origin" },
    { q: g("/", [["X-Big", "x".repeat(20_000)]]), status: 431, what: "header over 16 KiB" },
    { q: { ...g("/", [["Content-Length", String(2 << 20)]], "POST"), body: Buffer.alloc(2 << 20, 97) }, status: 405, what: "2 MiB body", resetOk: true },
    { q: g("/ahp", [...UPGRADE]), status: 401, what: "upgrade without a token" },
    { q: g("/ahp", [...UPGRADE, bearer(`Bearer ${h.token}`)]), status: 101, what: "upgrade with the token" },
    { q: g(`/ahp?tkn=${h.token}`, [...UPGRADE]), status: 101, what: "upgrade with ?tkn=" },
    { q: g("/ahp", [...UPGRADE, ["Sec-WebSocket-Protocol", `berth-ahp, berth-token.${h.token}`]]), status: 101, what: "upgrade with the sub-protocol token" },
    { q: g("/ahp", [...UPGRADE, ["Sec-WebSocket-Protocol", `berth-token.${h.token}x`]]), status: 401, what: "upgrade with a wrong sub-protocol token" },
    { q: g("/other", [...UPGRADE, bearer(`Bearer ${h.token}`)]), status: 404, what: "upgrade elsewhere" },
    { q: g("/ahp", [...UPGRADE, bearer(`Bearer ${h.token}`), ["Origin", "http://evil.example"]]), status: 403, what: "upgrade from a foreign Origin" },
    { q: g("http://[", []), status: 400, what: "finding: an unparsable absolute target is 400, not an internal error" },
    { q: g("http://[", [...UPGRADE, bearer(`Bearer ${h.token}`)]), status: 400, what: "finding: an unparsable absolute target on the upgrade is 400" },
    { q: g("http://a:b:c/", []), status: 400, what: "absolute target with a bad port" },
    { q: g(`http://127.0.0.1:${h.port}/healthz`, []), status: 200, what: "absolute target" },
  ];
  return cases;
}

const METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT", "get", "PROPFIND", "G", "M-SEARCH"];
const PATHS = ["/", "/index.html", "/favicon.ico", "/assets/index-abc.js", "/healthz", "/status", "/sessions", "/providers", "/ahp", "/assets/", "/assets/.hidden", "/secret.txt", "/outside.txt", "*", "http://[", "//evil/x", "/?#", "http://127.0.0.1/assets/index-abc.js"];
const PIECES = ["/", "..", "%2e", "%2f", "%5c", "\\", "%00", "%", "%zz", "é", "😀", "?", "#", ";", "//", "./", "%252e", "\t", "~", "@", ":"];
const ALLOWED = new Set([101, 200, 204, 400, 401, 403, 404, 405, 413, 414, 431, 501, 505]);

function randomRequest(r: Rand, h: HostHandle): Req {
  let target = pick(r, PATHS);
  for (let k = Math.floor(r() * 4); k > 0; k--) {
    const at = Math.floor(r() * (target.length + 1));
    target = target.slice(0, at) + pick(r, PIECES) + target.slice(at);
  }
  if (r() < 0.2) target = target.replace(/ /g, "%20") + `?tkn=${r() < 0.5 ? h.token : "x"}`;
  const headers: Array<[string, string]> = [];
  const hostValue = pick(r, [`127.0.0.1:${h.port}`, `localhost:${h.port}`, `[::1]:${h.port}`, `LOCALHOST:${h.port}`, `evil.example:${h.port}`, "127.0.0.1", "", `127.0.0.1:${h.port + 1}`]);
  if (r() < 0.95) headers.push(["Host", hostValue]);
  if (r() < 0.2) headers.push(["Origin", pick(r, [`http://127.0.0.1:${h.port}`, "null", "http://evil.example", "file://", `http://localhost:${h.port}`])]);
  if (r() < 0.3) headers.push(["Authorization", pick(r, [`Bearer ${h.token}`, "Bearer ", "Bearer", `Bearer  ${h.token} `, "Bearer x", `Bearer ${h.token}${h.token}`])]);
  if (r() < 0.15) headers.push(...UPGRADE);
  if (r() < 0.1) headers.push(["Sec-WebSocket-Protocol", pick(r, ["berth-ahp", `berth-token.${h.token}`, "berth-token.", ",,,", "berth-ahp, berth-token.x"])]);
  if (r() < 0.05) headers.push(["X-Fill", "y".repeat(Math.floor(r() * 30_000))]);
  if (r() < 0.05) for (let k = 0; k < 120; k++) headers.push([`X-H${k}`, "v"]);
  let body: Buffer | undefined;
  if (r() < 0.15) {
    const n = Math.floor(r() * (r() < 0.2 ? 1 << 20 : 500));
    body = Buffer.alloc(n, 120);
    headers.push(r() < 0.8 ? ["Content-Length", String(r() < 0.9 ? n : n + 10)] : ["Transfer-Encoding", "chunked"]);
  }
  const truncated = r() < 0.03;
  if (!truncated) headers.push(["Connection", "close"]);
  const q: Req = { method: pick(r, METHODS), target, headers, ...(body !== undefined ? { body } : {}), ...(r() < 0.05 ? { version: pick(r, ["HTTP/1.0", "HTTP/2.0", "HTTP/9", "FOO"]) } : {}) };
  return { ...q, ...(truncated ? { cut: true } : {}) };
}

/** Properties every reply must have, whatever was asked. */
function checkReply(h: HostHandle, rep: Reply, what: string): void {
  const all = rep.head + rep.body.toString("latin1");
  assert.ok(!all.includes(h.token), `seed ${SEED}: ${what}: the token was echoed`);
  assert.ok(!all.includes(SENTINEL), `seed ${SEED}: ${what}: a file outside the UI was served`);
  if (rep.status === null) return; // closed without an answer (a truncated request, an idle pre-auth connection)
  assert.ok(ALLOWED.has(rep.status), `seed ${SEED}: ${what}: status ${rep.status}: ${rep.head.slice(0, 200)}`);
  if (rep.status === 200 && /content-type: text\/(html|javascript)/i.test(rep.head)) {
    const b = rep.body.toString("utf8");
    assert.ok(b === "" || b === INDEX || b === ASSET, `seed ${SEED}: ${what}: a 200 UI response that is not a UI file`);
  }
}

test("HTTP listener fuzz: fixed statuses for targeted requests, no internal error, nothing outside the UI", { timeout: 300_000 }, async () => {
  const logs: string[] = [];
  const h = await startHost({ home: tempHome(), log: (m) => logs.push(m), uiDir: uiDir(), preAuthIdleMs: 300 });
  const r = prng(SEED);
  try {
    for (const c of targeted(h)) {
      const rep = await rawRequest(h.port, encode(c.q), c.q.method === "HEAD");
      checkReply(h, rep, c.what);
      // A server closing with a request body still unread may reset the connection before the answer is read.
      if (!(c.resetOk === true && rep.status === null)) assert.equal(rep.status, c.status, `seed ${SEED}: ${c.what}: ${rep.head.slice(0, 300)}`);
      if (c.status === 101) assert.doesNotMatch(rep.head, /berth-token/i, `${c.what}: the token sub-protocol was echoed`);
    }
    const batch = 16;
    for (let n = 0; n < COUNT; n += batch) {
      const reqs = Array.from({ length: Math.min(batch, COUNT - n) }, () => randomRequest(r, h));
      const reps = await Promise.all(
        reqs.map(async (q) => {
          const t0 = performance.now();
          const rep = await rawRequest(h.port, encode(q), q.method === "HEAD");
          if (process.env.FUZZ_VERBOSE && performance.now() - t0 > 1000)
            process.stderr.write(`slow ${Math.round(performance.now() - t0)} ms: ${encode({ ...q, body: Buffer.alloc(0) }).toString("latin1").replace(/\r\n/g, " | ").slice(0, 600)} body ${q.body?.length ?? 0} -> ${rep.status}\n`);
          return rep;
        }),
      );
      reps.forEach((rep, k) => checkReply(h, rep, `request ${n + k} (${reqs[k]!.method} ${reqs[k]!.target.slice(0, 60)})`));
    }
    const ok = await rawRequest(h.port, encode({ method: "GET", target: "/healthz", headers: [["Host", `127.0.0.1:${h.port}`], ["Connection", "close"]] }));
    assert.equal(ok.status, 200, `seed ${SEED}: the listener still serves`);
  } finally {
    await h.close();
  }
  const bugs = logs.filter((m) => /internal error|bug:/.test(m));
  assert.deepEqual(bugs, [], `seed ${SEED}: the host hit internal errors`);
});
