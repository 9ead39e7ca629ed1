/**
 * web_fetch's text: control and terminal escape bytes of a text body are made plain (as bash output is), and an
 * HTML page's encoding declared only in `<meta>` is honoured. Loopback HTTP server, the real tool.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type OutgoingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { createWebFetchTool } from "../../src/runtime/tools/web-fetch.js";
import { call, makeCtx } from "./helpers.js";

/** Serves `pages[path]` with its headers; closed after the test. */
async function serve(t: { after(fn: () => Promise<void>): void }, pages: Record<string, { headers: OutgoingHttpHeaders; body: Buffer }>): Promise<number> {
  const s = createServer((req, res) => {
    const p = pages[req.url ?? ""];
    if (p === undefined) return void res.writeHead(404).end();
    res.writeHead(200, p.headers).end(p.body);
  });
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => (s.closeAllConnections(), s.close(() => r()))));
  return (s.address() as AddressInfo).port;
}

const ctx = makeCtx(process.cwd());

async function fetchBody(port: number, path: string): Promise<string> {
  const r = await call(createWebFetchTool({ allow: [{ host: "127.0.0.1", port }], env: {} }), { url: `http://127.0.0.1:${port}${path}` }, ctx);
  assert.equal(r.isError, false, r.content);
  return r.content.slice(r.content.indexOf("\n\n") + 2);
}

void test("web_fetch: NUL, escape sequences and other controls of a text body are made plain", async (t) => {
  const port = await serve(t, {
    "/plain": { headers: { "content-type": "text/plain; charset=utf-8" }, body: Buffer.from("a\u0000b\x1b[31mred\x1b[0m\x1b]0;title\x07 c\r\nd\x07e\u0085f") },
    "/html": { headers: { "content-type": "text/html" }, body: Buffer.from("<p>x&#0;y\x1b[2Jz</p>") },
  });
  assert.equal(await fetchBody(port, "/plain"), "a\u2400bred c\nd\u2407e\uFFFDf");
  assert.doesNotMatch(await fetchBody(port, "/html"), /[\u0000\u001b]/);
});

void test("web_fetch: an encoding declared only in <meta> is honoured; the header's charset and a BOM win over it", async (t) => {
  const gbk = Buffer.from([0xc4, 0xe3, 0xba, 0xc3]); // 你好 in GBK
  const html = (meta: string, text: Buffer): Buffer => Buffer.concat([Buffer.from(`<!doctype html><html><head>${meta}<title>t</title></head><body><p>`), text, Buffer.from("</p></body></html>")]);
  const port = await serve(t, {
    "/gbk": { headers: { "content-type": "text/html" }, body: html('<meta charset="gbk">', gbk) },
    "/latin1": { headers: { "content-type": "text/html" }, body: html('<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">', Buffer.from([0x63, 0x61, 0x66, 0xe9])) },
    "/sniffed": { headers: {}, body: html("<meta charset='gbk'>", gbk) },
    "/header-wins": { headers: { "content-type": "text/html; charset=utf-8" }, body: html('<meta charset="gbk">', Buffer.from("你好")) },
    "/bom-wins": { headers: { "content-type": "text/html" }, body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), html('<meta charset="gbk">', Buffer.from("你好"))]) },
    "/unknown": { headers: { "content-type": "text/html" }, body: html('<meta charset="no-such-encoding">', Buffer.from("你好")) },
  });
  for (const path of ["/gbk", "/sniffed", "/header-wins", "/bom-wins", "/unknown"]) assert.match(await fetchBody(port, path), /你好/, path);
  assert.match(await fetchBody(port, "/latin1"), /café/);
});
