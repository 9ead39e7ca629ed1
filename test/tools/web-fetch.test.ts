import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { TLSSocket } from "node:tls";
import { createServer as createTcpServer, type AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { htmlToText } from "../../src/runtime/tools/html-text.js";
import { blockedReason } from "../../src/runtime/tools/net-guard.js";
import { createWebFetchTool, MAX_PAGE_BYTES, MAX_REDIRECTS, type WebFetchOptions } from "../../src/runtime/tools/web-fetch.js";
import { executeToolCall } from "../../src/runtime/tool-exec.js";
import { TEST_CA_PEM, TEST_LEAF_CERT_PEM, TEST_LEAF_KEY_PEM } from "../fixtures/tls.js";
import { loopbackProxy, type LoopbackProxy } from "../helpers/loopback-proxy.js";
import { call, makeCtx } from "./helpers.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

async function server(t: { after(fn: () => Promise<void> | void): void }, handler: Handler): Promise<{ port: number; seen: IncomingMessage[] }> {
  const seen: IncomingMessage[] = [];
  const s = createServer((req, res) => {
    seen.push(req);
    handler(req, res);
  });
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  t.after(
    () =>
      new Promise<void>((r) => {
        s.closeAllConnections();
        s.close(() => r());
      }),
  );
  return { port: (s.address() as AddressInfo).port, seen };
}

const ctx = makeCtx(process.cwd());
// No proxy variables from the environment the tests run in (the proxy tests below set their own).
const allow = (port: number, extra: Partial<WebFetchOptions> = {}): WebFetchOptions => ({ allow: [{ host: "127.0.0.1", port }], env: {}, ...extra });

void test("address policy: public unicast only, IPv6 forms embedding refused IPv4 addresses are refused", () => {
  const refused = [
    "0.0.0.0", "10.1.2.3", "100.64.0.1", "100.127.255.255", "127.0.0.1", "127.255.0.9", "169.254.169.254", "172.16.0.1",
    "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.88.99.1", "192.168.1.1", "198.18.0.1", "198.19.255.1", "198.51.100.7",
    "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
    "::", "::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::10.0.0.1",
    "64:ff9b::a9fe:a9fe", "64:ff9b:1::1.2.3.4", "2002:7f00:1::", "2002:c0a8:101::1", "2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "2001:db8::1", "2001:10::1", "3fff::1", "5f00::1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1",
    "100::1", "::ffff:0:0", "not-an-ip", "1.2.3", "",
  ];
  for (const ip of refused) assert.notEqual(blockedReason(ip), null, `${ip} must be refused`);
  const allowed = ["1.1.1.1", "8.8.8.8", "100.63.255.255", "100.128.0.1", "172.15.0.1", "172.32.0.1", "192.0.1.1", "198.17.0.1", "223.255.255.255",
    "2606:4700:4700::1111", "2a00:1450:4001::200e", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1"];
  for (const ip of allowed) assert.equal(blockedReason(ip), null, `${ip} must be allowed`);
});

void test("production policy refuses loopback, private and metadata URLs before connecting; the test allowance is port-exact", async (t) => {
  const s = await server(t, (_q, res) => res.end("hi"));
  const prod = createWebFetchTool();
  for (const url of [
    `http://127.0.0.1:${s.port}/`, `http://localhost:${s.port}/`, "http://169.254.169.254/latest/meta-data/", "http://[::1]/", "http://[::ffff:127.0.0.1]/",
    "http://2130706433/", "http://0x7f.1/", "http://10.0.0.1/", "http://[fd00::1]/",
  ]) {
    const r = await call(prod, { url }, ctx);
    assert.equal(r.isError, true, url);
    assert.match(r.content, /refused/, url);
  }
  assert.equal(s.seen.length, 0, "nothing reached the loopback server");
  // The allowance names one address and one port: another port on the same address stays refused.
  const other = createWebFetchTool({ allow: [{ host: "127.0.0.1", port: s.port + 1 === 65536 ? 1 : s.port + 1 }] });
  assert.match((await call(other, { url: `http://127.0.0.1:${s.port}/` }, ctx)).content, /refused/);
  const ok = await call(createWebFetchTool(allow(s.port)), { url: `http://127.0.0.1:${s.port}/` }, ctx);
  assert.equal(ok.isError, false);
  assert.match(ok.content, /\n\nhi$/);
  for (const url of ["ftp://example.com/", "file:///etc/passwd", "http://user:pw@127.0.0.1/", "not a url"]) {
    const r = await call(createWebFetchTool(allow(s.port)), { url }, ctx);
    assert.equal(r.isError, true, url);
  }
});

void test("every resolved address is checked; the connection goes to the checked address (no second DNS lookup)", async (t) => {
  const s = await server(t, (req, res) => res.end(`host=${req.headers.host}`));
  // One bad address among the answers refuses the fetch.
  const mixed = createWebFetchTool(allow(s.port, { resolve: () => Promise.resolve([{ address: "127.0.0.1", family: 4 }, { address: "10.0.0.5", family: 4 }]) }));
  assert.match((await call(mixed, { url: `http://site.test:${s.port}/` }, ctx)).content, /refused: site\.test is not a public address \(private\)/);
  // A name the system resolver cannot resolve is fetched through the checked answer only; a resolver that
  // rebinds on later calls is never asked again for the same hop.
  let calls = 0;
  const rebinding = createWebFetchTool(
    allow(s.port, { resolve: () => Promise.resolve(calls++ === 0 ? [{ address: "127.0.0.1", family: 4 }] : [{ address: "169.254.169.254", family: 4 }]) }),
  );
  const r = await call(rebinding, { url: `http://rebind.invalid:${s.port}/x` }, ctx);
  assert.equal(r.isError, false, r.content);
  assert.match(r.content, new RegExp(`host=rebind\\.invalid:${s.port}`));
  assert.equal(calls, 1);
});

void test("redirects: each target is re-checked, at most 5 are followed; no cookies, credentials or referrer; loopback never proxied", async (t) => {
  const s = await server(t, (req, res) => {
    const m = /^\/hop\/(\d+)$/.exec(req.url ?? "");
    if (m !== null) {
      const n = Number(m[1]);
      res.writeHead(302, { location: n > 0 ? `/hop/${n - 1}` : "/done", "set-cookie": "sid=1" });
      return res.end();
    }
    if (req.url === "/to-metadata") {
      res.writeHead(301, { location: "http://169.254.169.254/latest/meta-data/" });
      return res.end();
    }
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(JSON.stringify({ cookie: req.headers.cookie ?? null, referer: req.headers.referer ?? null, auth: req.headers.authorization ?? null }));
  });
  // A loopback URL never goes through the proxy the environment names: the proxy sees nothing.
  const proxy = await server(t, (_q, res) => res.end("proxied"));
  const via = `http://127.0.0.1:${proxy.port}`;
  const tool = createWebFetchTool(allow(s.port, { env: { HTTP_PROXY: via, http_proxy: via, HTTPS_PROXY: via, https_proxy: via } }));
  let r = await call(tool, { url: `http://127.0.0.1:${s.port}/hop/${MAX_REDIRECTS - 1}` }, ctx);
  assert.equal(proxy.seen.length, 0, "no request went through the proxy");
  assert.equal(r.isError, false, r.content);
  assert.match(r.content, /URL: http:\/\/127\.0\.0\.1:\d+\/done/);
  assert.match(r.content, /\{"cookie":null,"referer":null,"auth":null\}/);
  r = await call(tool, { url: `http://127.0.0.1:${s.port}/hop/${MAX_REDIRECTS}` }, ctx);
  assert.equal(r.isError, true);
  assert.match(r.content, /more than 5 redirects/);
  r = await call(tool, { url: `http://127.0.0.1:${s.port}/to-metadata` }, ctx);
  assert.match(r.content, /refused: 169\.254\.169\.254 is not a public address \(link-local\)/);
});

void test("content: HTML to text with numbered links, JSON passed through, binary refused before download, gzip decoded", async (t) => {
  const s = await server(t, (req, res) => {
    if (req.url === "/page") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      return res.end(
        `<!doctype html><html><head><title>The &amp; Title</title><style>.x{}</style><script>evil()</script></head><body>` +
          `<h1>Heading</h1><p>Read <a href="/docs#frag">the docs</a> and <a href="https://example.com/x">this</a>.</p>` +
          `<ul><li>one</li><li>two &lt;3</li></ul><a href="javascript:alert(1)">js</a><a href="/docs">again</a></body></html>`,
      );
    }
    if (req.url === "/json") {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end('{"a":[1,2]}');
    }
    if (req.url === "/bin") {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.write(Buffer.alloc(1024));
      // The body never ends: a tool that read it would run into its timeout; one that refuses on the header returns.
      return;
    }
    if (req.url === "/sniff") {
      res.writeHead(200);
      return res.end(Buffer.from([0x89, 0x50, 0, 0, 1]));
    }
    if (req.url === "/gz") {
      res.writeHead(200, { "content-type": "text/plain", "content-encoding": "gzip" });
      return res.end(gzipSync("zipped text"));
    }
    if (req.url === "/404") {
      res.writeHead(404, { "content-type": "text/plain" });
      return res.end("nope");
    }
    res.end();
  });
  const tool = createWebFetchTool(allow(s.port));
  const base = `http://127.0.0.1:${s.port}`;
  let r = await call(tool, { url: `${base}/page` }, ctx);
  assert.equal(r.isError, false);
  assert.equal(
    r.content,
    `URL: ${base}/page\nStatus: 200\nContent-Type: text/html\n\nTitle: The & Title\n\n# Heading\n\nRead the docs [1] and this [2].\n\n- one\n- two <3\njsagain [1]\n\nLinks:\n[1] ${base}/docs\n[2] https://example.com/x`,
  );
  r = await call(tool, { url: `${base}/json` }, ctx);
  assert.match(r.content, /\n\n\{"a":\[1,2\]\}$/);
  r = await call(tool, { url: `${base}/bin` }, ctx);
  assert.equal(r.isError, true);
  assert.match(r.content, /application\/octet-stream, not text; binary content is not downloaded/);
  r = await call(tool, { url: `${base}/sniff` }, ctx);
  assert.match(r.content, /looks like binary content/);
  r = await call(tool, { url: `${base}/gz` }, ctx);
  assert.match(r.content, /\n\nzipped text$/);
  r = await call(tool, { url: `${base}/404` }, ctx);
  assert.equal(r.isError, true);
  assert.match(r.content, /Status: 404[\s\S]*nope/);
});

void test("bounds: download cut at the limit (exact limit is not a cut), pages with offset, timeout, cancellation", async (t) => {
  const text = "a".repeat(MAX_PAGE_BYTES) + "b".repeat(100);
  const s = await server(t, (req, res) => {
    if (req.url === "/hang") return; // never answers
    res.writeHead(200, { "content-type": "text/plain" });
    if (req.url === "/exact") return res.end("x".repeat(1000));
    if (req.url === "/over") return res.end("x".repeat(1001));
    res.end(text);
  });
  const base = `http://127.0.0.1:${s.port}`;
  const small = createWebFetchTool(allow(s.port, { maxDownloadBytes: 1000 }));
  let r = await call(small, { url: `${base}/exact` }, ctx);
  assert.doesNotMatch(r.content, /download stopped/);
  assert.ok(r.content.endsWith("x".repeat(1000)));
  r = await call(small, { url: `${base}/over` }, ctx);
  assert.match(r.content, /x{1000}\n\n\[download stopped at 1000 bytes; the rest of the document was not fetched\]$/);
  const tool = createWebFetchTool(allow(s.port));
  r = await call(tool, { url: `${base}/long` }, ctx);
  assert.match(r.content, new RegExp(`\\[characters 0-${MAX_PAGE_BYTES} of ${MAX_PAGE_BYTES + 100}; continue with offset=${MAX_PAGE_BYTES}\\]$`));
  assert.ok(!r.content.includes("b"));
  r = await call(tool, { url: `${base}/long`, offset: MAX_PAGE_BYTES }, ctx);
  assert.ok(r.content.endsWith(`\n\n${"b".repeat(100)}`));
  r = await call(tool, { url: `${base}/long`, offset: MAX_PAGE_BYTES + 100 }, ctx);
  assert.match(r.content, /offset \d+ is past the end/);
  // A resolver that never answers is bounded by the same timeout.
  const stuckDns = createWebFetchTool({ timeoutMs: 200, resolve: () => new Promise(() => undefined) });
  r = await call(stuckDns, { url: "http://never.resolves.test/" }, ctx);
  assert.equal(r.timedOut, true);
  const slow = createWebFetchTool(allow(s.port, { timeoutMs: 200 }));
  r = await call(slow, { url: `${base}/hang` }, ctx);
  assert.equal(r.isError, true);
  assert.equal(r.timedOut, true);
  assert.match(r.content, /timed out/);
  const ctl = new AbortController();
  const pending = call(tool, { url: `${base}/hang` }, makeCtx(process.cwd(), ctl.signal));
  await new Promise<void>((resolve) => {
    const poll = (): void => (s.seen.filter((q) => q.url === "/hang").length >= 2 ? resolve() : void setTimeout(poll, 10));
    poll();
  });
  ctl.abort();
  r = await pending;
  assert.equal(r.errorKind, "cancelled");
});

void test("approval: network risk asks, except https URLs on auto-approved hosts", async () => {
  const tool = createWebFetchTool({ autoApproveHosts: ["Docs.Example.com"], resolve: () => Promise.resolve([{ address: "10.0.0.1", family: 4 }]) });
  assert.equal(tool.autoApprove?.({ url: "https://docs.example.com/a" }), true);
  assert.equal(tool.autoApprove?.({ url: "http://docs.example.com/a" }), false, "plain http always asks");
  assert.equal(tool.autoApprove?.({ url: "https://evil.example.com/a" }), false);
  assert.equal(tool.autoApprove?.({ url: "https://u:p@docs.example.com/a" }), false);
  const asked: string[] = [];
  const events: unknown[] = [];
  const run = (url: string) =>
    executeToolCall(
      { id: "c1", name: "web_fetch", arguments: { url } },
      {
        turnId: "t",
        cwd: process.cwd(),
        signal: new AbortController().signal,
        sink: { delta: () => true, event: (e) => events.push(e) },
        lookup: () => tool,
        approval: { policy: () => "ask", ask: (q) => (asked.push(String(q.arguments["url"])), Promise.resolve("deny" as const)) },
      },
    );
  const denied = await run("https://other.example.net/");
  assert.equal(denied.errorKind, "denied");
  assert.deepEqual(asked, ["https://other.example.net/"]);
  // Auto-approved: the gate is not asked (the fetch itself is then refused by the address policy).
  const auto = await run("https://docs.example.com/");
  assert.equal(auto.errorKind, "failed");
  assert.match(auto.content, /refused/);
  assert.deepEqual(asked, ["https://other.example.net/"]);
});

void test("htmlToText: a hostile page (long whitespace runs, markup never closed) converts in one linear pass", () => {
  // Megabytes of newlines in a <pre> before each block, and of spaces ending in a letter: the end-anchored patterns
  // this used rescanned each run from every position (hours at these sizes, on the event loop all sessions share).
  const newlines = "\n".repeat(1_000_000);
  const page = `<pre>${newlines}x</pre>` + "<p>a</p>".repeat(1000) + `<p>${" ".repeat(1_000_000)}y  </p>`;
  const text = htmlToText(page, "http://x/");
  assert.ok(text.startsWith("x\n\na\n\na"), JSON.stringify(text.slice(0, 20)));
  assert.ok(text.endsWith("a\n\ny"), JSON.stringify(text.slice(-20)));
  // Megabytes of tags and declarations never closed: each was retried from every later `<`. As in a browser, markup
  // still open at the end of the page is not text.
  for (const open of ["<a", "<style", "<!", "<?"])
    assert.equal(htmlToText("<p>kept</p>" + open.repeat(400_000), "http://x/"), "kept", JSON.stringify(open));
  assert.equal(htmlToText("<p>kept</p><img alt=" + "<img alt=".repeat(400_000), "http://x/"), "kept\n\n[image: <img]");
  assert.equal(htmlToText("a<b and c>d", "http://x/"), "ad");
});

void test("htmlToText: pre keeps whitespace, entities, link cap shares numbers for duplicates", () => {
  assert.equal(htmlToText("<pre>a  b\n  c</pre>", "http://x/"), "a  b\n  c");
  assert.equal(htmlToText("&#x41;&#66;&eacute;&bogus;", "http://x/"), "AB&eacute;&bogus;");
  const many = Array.from({ length: 250 }, (_, i) => `<a href="/p${i}">l${i}</a>`).join(" ");
  const out = htmlToText(many, "http://x/");
  assert.match(out, /\[200\] http:\/\/x\/p199$/);
  assert.match(out, /l200 l201/);
});

void test("https: the certificate is verified for the URL's name on the pinned address; auto-approved calls stay on listed hosts", async (t) => {
  const seen: Array<{ url: string; servername: string | false | null }> = [];
  const s = createHttpsServer({ cert: TEST_LEAF_CERT_PEM, key: TEST_LEAF_KEY_PEM }, (req, res) => {
    seen.push({ url: req.url ?? "", servername: (req.socket as TLSSocket).servername });
    if (req.url === "/inside") {
      res.writeHead(302, { location: "/page" });
      return res.end();
    }
    if (req.url === "/outside") {
      res.writeHead(302, { location: `https://other.fetch.test:${port}/page` });
      return res.end();
    }
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("secure hello");
  });
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (s.closeAllConnections(), s.close(() => r()))));
  const port = (s.address() as AddressInfo).port;
  const resolve = () => Promise.resolve([{ address: "127.0.0.1", family: 4 }]);
  const opts = { allow: [{ host: "127.0.0.1", port }], resolve, autoApproveHosts: ["docs.fetch.test"], env: {} };
  // Without the test CA the chain is untrusted: verification is on.
  let r = await call(createWebFetchTool(opts), { url: `https://docs.fetch.test:${port}/page` }, ctx);
  assert.equal(r.isError, true);
  assert.match(r.content, /request failed \((UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)\)/);
  const tool = createWebFetchTool({ ...opts, ca: TEST_CA_PEM });
  r = await call(tool, { url: `https://docs.fetch.test:${port}/page` }, ctx);
  assert.equal(r.isError, false, r.content);
  assert.match(r.content, /secure hello$/);
  assert.equal(seen.at(-1)?.servername, "docs.fetch.test", "SNI carries the URL's name, not the pinned address");
  // A name the certificate does not cover fails, although the address is the same.
  r = await call(createWebFetchTool({ ...opts, ca: TEST_CA_PEM }), { url: `https://wrong.fetch.test:${port}/page` }, ctx);
  assert.match(r.content, /request failed \(ERR_TLS_CERT_ALTNAME_INVALID\)/);
  // Auto-approved: a redirect within the listed host is followed; one to another host is named, not followed.
  assert.equal(tool.autoApprove?.({ url: `https://docs.fetch.test:${port}/inside` }), true);
  r = await call(tool, { url: `https://docs.fetch.test:${port}/inside` }, ctx);
  assert.match(r.content, /secure hello$/);
  const before = seen.length;
  r = await call(tool, { url: `https://docs.fetch.test:${port}/outside` }, ctx);
  assert.equal(r.isError, false);
  assert.match(r.content, new RegExp(`redirects to https://other\\.fetch\\.test:${port}/page, whose host is not auto-approved`));
  assert.deepEqual(seen.slice(before).map((x) => x.url), ["/outside"], "the other host was not fetched");
  // The same redirect from a call the user approved (not auto-approved) is followed.
  r = await call(createWebFetchTool({ allow: opts.allow, resolve, ca: TEST_CA_PEM, env: {} }), { url: `https://docs.fetch.test:${port}/outside` }, ctx);
  assert.match(r.content, /URL: https:\/\/other\.fetch\.test:\d+\/page[\s\S]*secure hello$/);
});

/** A loopback proxy: CONNECT to 127.0.0.1:<port> tunnelled; an absolute-form request answered by the proxy itself. */
async function proxyServer(t: { after(fn: () => Promise<void> | void): void }, auth: string | null): Promise<LoopbackProxy> {
  const proxy = await loopbackProxy({ auth, tunnel: /^CONNECT 127\.0\.0\.1:(\d+) HTTP\/1\.1$/ });
  t.after(() => proxy.close());
  return proxy;
}

void test("through HTTPS_PROXY / HTTP_PROXY: a tunnel to, or a request naming, the checked address; NO_PROXY and failures", async (t) => {
  const https = createHttpsServer({ cert: TEST_LEAF_CERT_PEM, key: TEST_LEAF_KEY_PEM }, (req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`secure ${req.url} sni=${(req.socket as TLSSocket).servername}`);
  });
  await new Promise<void>((r) => https.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (https.closeAllConnections(), https.close(() => r()))));
  const port = (https.address() as AddressInfo).port;
  const auth = `Basic ${Buffer.from("me:pr0xy").toString("base64")}`;
  const proxy = await proxyServer(t, auth);
  const via = `http://me:pr0xy@127.0.0.1:${proxy.port}`;
  const resolve = () => Promise.resolve([{ address: "127.0.0.1", family: 4 }]);
  const opts = (env: Record<string, string>): WebFetchOptions => ({ allow: [{ host: "127.0.0.1", port }], resolve, ca: TEST_CA_PEM, env });

  // https: CONNECT to the checked address with the proxy's credentials; TLS inside verifies the URL's name.
  let r = await call(createWebFetchTool(opts({ HTTPS_PROXY: via })), { url: `https://docs.fetch.test:${port}/page?q=1` }, ctx);
  assert.equal(r.isError, false, r.content);
  assert.match(r.content, /secure \/page\?q=1 sni=docs\.fetch\.test$/);
  assert.equal(proxy.heads.length, 1);
  assert.match(proxy.heads[0]!, new RegExp(`^CONNECT 127\\.0\\.0\\.1:${port} HTTP/1\\.1\\r\\nHost: 127\\.0\\.0\\.1:${port}\\r\\nProxy-Authorization: ${auth}$`));
  // A name the certificate does not cover still fails inside the tunnel.
  r = await call(createWebFetchTool(opts({ HTTPS_PROXY: via })), { url: `https://wrong.fetch.test:${port}/page` }, ctx);
  assert.match(r.content, /request failed \(ERR_TLS_CERT_ALTNAME_INVALID\)/);

  // http: an absolute-form request naming the checked address, the name in Host, through http_proxy (lower case first).
  const n = proxy.heads.length;
  r = await call(createWebFetchTool(opts({ http_proxy: via, HTTP_PROXY: "http://127.0.0.1:1" })), { url: `http://docs.fetch.test:${port}/a?b=1` }, ctx);
  assert.equal(r.isError, false, r.content);
  assert.match(r.content, new RegExp(`proxied GET http://127\\.0\\.0\\.1:${port}/a\\?b=1 HTTP/1\\.1 host=docs\\.fetch\\.test:${port}$`));
  assert.equal(proxy.heads.length, n + 1);

  // NO_PROXY names the host: direct.
  r = await call(createWebFetchTool(opts({ HTTPS_PROXY: via, NO_PROXY: ".fetch.test" })), { url: `https://docs.fetch.test:${port}/direct` }, ctx);
  assert.match(r.content, /secure \/direct sni=docs\.fetch\.test$/);
  assert.equal(proxy.heads.length, n + 1, "the proxy saw nothing");

  // The address policy comes first: a private address is refused without asking the proxy.
  r = await call(createWebFetchTool({ env: { HTTPS_PROXY: via } }), { url: "https://10.0.0.1/" }, ctx);
  assert.match(r.content, /refused: 10\.0\.0\.1 is not a public address/);
  assert.equal(proxy.heads.length, n + 1);

  // Failures name the variable and the code; the proxy's credentials are never shown.
  const bad = `http://127.0.0.1:${proxy.port}`;
  r = await call(createWebFetchTool(opts({ HTTPS_PROXY: bad })), { url: `https://docs.fetch.test:${port}/page` }, ctx);
  assert.equal(r.content, "web_fetch: the connection through HTTPS_PROXY failed (PROXY_HTTP_407)");
  r = await call(createWebFetchTool(opts({ HTTPS_PROXY: "socks5://127.0.0.1:1" })), { url: `https://docs.fetch.test:${port}/page` }, ctx);
  assert.equal(r.content, "web_fetch: the connection through HTTPS_PROXY failed (PROXY_SCHEME_UNSUPPORTED)");
  const closed = createTcpServer();
  await new Promise<void>((res) => closed.listen(0, "127.0.0.1", res));
  const gone = (closed.address() as AddressInfo).port;
  await new Promise<void>((res) => closed.close(() => res()));
  r = await call(createWebFetchTool(opts({ HTTP_PROXY: `http://me:pr0xy@127.0.0.1:${gone}` })), { url: `http://docs.fetch.test:${port}/a` }, ctx);
  assert.equal(r.content, "web_fetch: the connection through HTTP_PROXY failed (PROXY_ECONNREFUSED)");
  r = await call(createWebFetchTool(opts({ HTTPS_PROXY: `http://me:pr0xy@127.0.0.1:${gone}` })), { url: `https://docs.fetch.test:${port}/a` }, ctx);
  assert.equal(r.content, "web_fetch: the connection through HTTPS_PROXY failed (PROXY_ECONNREFUSED)");
});

void test("a proxy that never answers CONNECT: the call's time bound ends it and closes the connection to the proxy", async (t) => {
  let closed!: Promise<void>;
  const silent = createTcpServer((s) => {
    closed = new Promise((r) => s.on("close", () => r()));
    s.on("error", () => undefined).resume(); // reads (and ignores) the CONNECT, so the client's close is seen
  });
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => silent.close(() => r())));
  const resolve = () => Promise.resolve([{ address: "127.0.0.1", family: 4 }]);
  const tool = createWebFetchTool({ allow: [{ host: "127.0.0.1", port: 443 }], resolve, timeoutMs: 300, env: { HTTPS_PROXY: `http://127.0.0.1:${(silent.address() as AddressInfo).port}` } });
  const r = await call(tool, { url: "https://docs.fetch.test/" }, ctx);
  assert.equal(r.content, "web_fetch: timed out after 300 ms");
  await closed;
});

void test("a server that answers at once but drips its body is cut at the call's deadline", async (t) => {
  const s = await server(t, (_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.write("x");
    const drip = setInterval(() => (res.destroyed ? clearInterval(drip) : res.write("x")), 10);
    res.on("close", () => clearInterval(drip));
  });
  const tool = createWebFetchTool(allow(s.port, { timeoutMs: 200 }));
  const r = await call(tool, { url: `http://127.0.0.1:${s.port}/drip` }, ctx);
  assert.equal(r.errorKind, "failed");
  assert.equal(r.timedOut, true);
  assert.equal(r.content, "web_fetch: timed out after 200 ms");
});
