/**
 * The provider HTTP/1.1 client (src/runtime/providers/http1.ts, node-fetch.ts) against raw TCP servers that write
 * exact response bytes: framings (chunked with extensions and trailers, Content-Length, until close, none), interim
 * 1xx answers, the head bound at and one past its limit, malformed answers refused with a code naming them, what
 * goes back to the keep-alive pool and what does not, and the request head it writes. The chunked decoder is also
 * fed one response split at every byte boundary.
 */
import assert from "node:assert/strict";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { Duplex } from "node:stream";
import { test } from "node:test";
import { Exchange, MAX_HEAD_BYTES, requestHead } from "../../src/runtime/providers/http1.js";
import { createProvider } from "../../src/runtime/providers/index.js";
import { idleConnections, nodeFetch } from "../../src/runtime/providers/node-fetch.js";
import { apiKey, collect, request, terminal, textOf } from "./helpers.js";
import { until } from "../host/helpers.js";

interface Raw {
  url: string;
  /** Each request's head text and body, in order. */
  requests: Array<{ head: string; body: string; port: number }>;
  /** Connections accepted. */
  accepted: number;
  close(): Promise<void>;
}

/** A TCP server answering each complete request with `answer(n)` (raw bytes); `end` closes after it. */
async function raw(answer: (n: number) => { bytes: string | Buffer; end?: boolean }): Promise<Raw> {
  const requests: Raw["requests"] = [];
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => undefined);
    let buf = Buffer.alloc(0);
    s.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.toString("latin1", 0, end);
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        requests.push({ head, body: buf.toString("utf8", end + 4, end + 4 + length), port: s.remotePort! });
        buf = buf.subarray(end + 4 + length);
        const a = answer(requests.length);
        if (a.end === true) s.end(a.bytes);
        else s.write(a.bytes);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1/x`,
    requests,
    get accepted() {
      return accepted;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const init = (extra: Partial<Parameters<typeof nodeFetch>[1]> = {}): Parameters<typeof nodeFetch>[1] => ({
  method: "POST",
  headers: { "content-type": "application/json" },
  body: '{"q":"é"}',
  signal: new AbortController().signal,
  ...extra,
});

async function readAll(url: string, i = init()): Promise<{ status: number; body: string; type: string | null }> {
  const res = await nodeFetch(url, i);
  const reader = res.body!.getReader();
  const parts: Uint8Array[] = [];
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    parts.push(r.value);
  }
  return { status: res.status, body: Buffer.concat(parts).toString("utf8"), type: res.headers.get("Content-Type") };
}

const code = (e: unknown): unknown => (e as { code?: unknown }).code;

test("chunked, Content-Length and close-delimited bodies; 1xx skipped; 204 has none", async () => {
  const answers = [
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
      "5;name=value\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n",
    "HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nfixed!",
    "HTTP/1.1 204 No Content\r\n\r\n",
  ];
  const srv = await raw((n) => ({ bytes: answers[n - 1]! }));
  const closing = await raw(() => ({ bytes: "HTTP/1.0 200 OK\r\n\r\nuntil close", end: true }));
  try {
    assert.deepEqual(await readAll(srv.url), { status: 200, body: "hello world", type: "text/event-stream" });
    assert.deepEqual(await readAll(srv.url), { status: 200, body: "fixed!", type: null });
    assert.deepEqual(await readAll(srv.url), { status: 204, body: "", type: null });
    assert.equal(srv.accepted, 1, "all three over one kept-alive connection");
    assert.deepEqual(await readAll(closing.url), { status: 200, body: "until close", type: null });
  } finally {
    await srv.close();
    await closing.close();
  }
});

test("the request head: method, path, Host, headers with the last spelling winning, length, keep-alive; URL credentials as Basic", async () => {
  const srv = await raw(() => ({ bytes: "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n" }));
  try {
    await readAll(srv.url, init({ headers: { "X-A": "1", "x-a": "2", "Content-Length": "999", Connection: "close", accept: "text/event-stream" } }));
    const port = new URL(srv.url).port;
    assert.deepEqual(srv.requests[0]!.head.split("\r\n"), ["POST /v1/x HTTP/1.1", `Host: 127.0.0.1:${port}`, "x-a: 2", "accept: text/event-stream", "Content-Length: 10", "Connection: keep-alive"]);
    assert.equal(srv.requests[0]!.body, '{"q":"é"}');
    await readAll(srv.url.replace("http://", "http://us%20er:p%40ss@"));
    assert.match(srv.requests[1]!.head, new RegExp(`\r\nauthorization: Basic ${Buffer.from("us er:p@ss").toString("base64")}\r\n`));
    for (const [headers, c] of [[{ "x-bad": "a\r\nInjected: 1" }, "ERR_INVALID_CHAR"], [{ "bad name": "v" }, "ERR_INVALID_HTTP_TOKEN"]] as const) {
      await assert.rejects(nodeFetch(srv.url, init({ headers })), (e) => code(e) === c && !String(e).includes("Injected"));
    }
    assert.equal(srv.requests.length, 2, "a refused header sends nothing");
  } finally {
    await srv.close();
  }
});

test("the response head is bounded: exactly the limit passes, one byte more is refused", async () => {
  const headOf = (size: number): string => {
    const base = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-pad: \r\n\r\n";
    return base.replace("x-pad: ", `x-pad: ${"p".repeat(size - base.length)}`);
  };
  const srv = await raw((n) => ({ bytes: `${headOf(n === 1 ? MAX_HEAD_BYTES : MAX_HEAD_BYTES + 1)}ok` }));
  try {
    assert.equal(headOf(MAX_HEAD_BYTES).length, MAX_HEAD_BYTES);
    assert.equal((await readAll(srv.url)).body, "ok");
    await assert.rejects(nodeFetch(srv.url, init()), (e) => code(e) === "HTTP_HEAD_TOO_LARGE");
  } finally {
    await srv.close();
  }
});

test("malformed answers are refused with a code naming them, before or after the head", async () => {
  const cases: Array<[string, string]> = [
    ["SSH-2.0-OpenSSH\r\n\r\n", "HTTP_BAD_RESPONSE"],
    ["HTTP/1.1 200 OK\r\ncontent-length: 1, 2\r\n\r\nx", "HTTP_BAD_RESPONSE"],
    ["HTTP/1.1 200 OK\r\n folded: header\r\n\r\n", "HTTP_BAD_RESPONSE"],
    ["HTTP/1.1 101 Switching Protocols\r\n\r\n", "HTTP_BAD_RESPONSE"],
  ];
  const srv = await raw((n) => ({ bytes: cases[n - 1]![0] }));
  try {
    for (const [, c] of cases) await assert.rejects(nodeFetch(srv.url, init()), (e) => code(e) === c);
  } finally {
    await srv.close();
  }
  const bodies = ["zz\r\nxx\r\n0\r\n\r\n", "2\r\nabXY0\r\n\r\n", `${"1".repeat(16)}\r\n`];
  const bad = await raw((n) => ({ bytes: `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${bodies[n - 1]}` }));
  try {
    for (let i = 0; i < bodies.length; i++) await assert.rejects(readAll(bad.url), (e) => code(e) === "HTTP_BAD_RESPONSE");
  } finally {
    await bad.close();
  }
  const cut = await raw(() => ({ bytes: "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort", end: true }));
  const silent = await raw(() => ({ bytes: "", end: true }));
  try {
    await assert.rejects(readAll(cut.url), (e) => code(e) === "ECONNRESET");
    await assert.rejects(nodeFetch(silent.url, init()), (e) => code(e) === "ECONNRESET" && /socket hang up/.test(String(e)));
  } finally {
    await cut.close();
    await silent.close();
  }
});

test("only a complete, kept-alive answer with nothing after it returns its connection to the pool", async () => {
  const answers = [
    "HTTP/1.1 200 OK\r\ncontent-length: 1\r\nkeep-alive: timeout=30\r\n\r\na",
    "HTTP/1.1 200 OK\r\ncontent-length: 1\r\nconnection: close\r\n\r\nb",
    "HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\ncEXTRA",
    "HTTP/1.1 200 OK\r\ncontent-length: 1\r\nkeep-alive: timeout=1\r\n\r\nd",
    "HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\ne",
  ];
  const srv = await raw((n) => ({ bytes: answers[n - 1]! }));
  try {
    const ports: number[] = [];
    for (let i = 0; i < answers.length; i++) {
      const before = idleConnections(srv.url);
      assert.equal((await readAll(srv.url)).body, "abcde"[i]);
      ports.push(srv.requests[i]!.port);
      // a: pooled; b: the server closes; c: bytes past its end; d: a 1 s hint leaves no time to reuse it; e: pooled
      await until(() => idleConnections(srv.url) === (i === 0 || i === 4 ? before + 1 : 0), 3000, `the pool after answer ${i + 1}`);
    }
    assert.equal(ports[1], ports[0], "the second request reused the first connection");
    assert.deepEqual(new Set(ports.slice(1)).size, 4, "each later one needed a new connection");
  } finally {
    await srv.close();
  }
});

test("aborting before or after the head destroys the connection; a pending read rejects", async () => {
  let sockets = 0;
  const srv = await raw(() => {
    sockets++;
    return { bytes: "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n" };
  });
  try {
    const ctl = new AbortController();
    const res = await nodeFetch(srv.url, init({ signal: ctl.signal }));
    const reader = res.body!.getReader();
    assert.equal(Buffer.from((await reader.read()).value!).toString(), "abc");
    const pending = reader.read();
    ctl.abort();
    await assert.rejects(pending, (e) => (e as Error).name === "AbortError");
    assert.equal(idleConnections(srv.url), 0);
    const early = new AbortController();
    early.abort();
    await assert.rejects(nodeFetch(srv.url, init({ signal: early.signal })), (e) => (e as Error).name === "AbortError");
    assert.equal(sockets, 1, "an aborted signal sends nothing");
  } finally {
    await srv.close();
  }
});

test("a chunked response split at every byte boundary decodes to the same body and completes once", async () => {
  const bytes = Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n4;x="y"\r\nabcd\r\nA\r\n0123456789\r\n0\r\nT: v\r\n\r\n', "latin1");
  const splits = [[...bytes].map((b) => Buffer.from([b]))];
  for (let cut = 1; cut < bytes.length; cut++) splits.push([bytes.subarray(0, cut), bytes.subarray(cut)]);
  for (const parts of splits) {
    const socket = new Duplex({ read: () => undefined, write: (_c, _e, cb) => cb() });
    let status = 0;
    const done: boolean[] = [];
    const ex = new Exchange(socket as unknown as Socket, (h) => (status = h.status), (reusable) => done.push(reusable), (e) => assert.fail(e));
    ex.requestComplete = true;
    for (const p of parts) socket.push(p);
    await new Promise((r) => setImmediate(r));
    const label = `split into ${parts.map((p) => p.length).join("+")}`;
    assert.equal(status, 200, label);
    assert.deepEqual(done, [true], label);
    const first = await ex.read();
    assert.equal(first.done ? "" : Buffer.from(first.value).toString(), "abcd0123456789", label);
    assert.deepEqual(await ex.read(), { done: true }, label);
  }
});

test("requestHead names Host unless the headers do", () => {
  assert.equal(requestHead("POST", "/p", "[::1]:8080", { Host: "proxy.example" }, 0), "POST /p HTTP/1.1\r\nHost: proxy.example\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n");
  assert.equal(requestHead("POST", "/p", "[::1]:8080", {}, 3), "POST /p HTTP/1.1\r\nHost: [::1]:8080\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\n");
});

test("a provider stream whose chunk framing breaks after output ends naming the code; the text so far is kept", async () => {
  const event = 'data: {"choices":[{"index":0,"delta":{"content":"half"}}]}\n\n';
  const srv = await raw(() => ({ bytes: `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${event.length.toString(16)}\r\n${event}\r\nzz\r\n` }));
  try {
    const provider = createProvider("framing", { api: "openai-chat", baseUrl: srv.url.replace(/\/x$/, "") }, apiKey, { env: {} });
    const events = await collect(provider.stream(request()));
    assert.equal(textOf(events), "half");
    assert.deepEqual(terminal(events), { type: "error", kind: "network", retryable: true, message: "provider stream ended unexpectedly (HTTP_BAD_RESPONSE)" });
  } finally {
    await srv.close();
  }
});
