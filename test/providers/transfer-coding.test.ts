/**
 * Transfer codings applied before `chunked` (RFC 9112 §7: `Transfer-Encoding: gzip, chunked`), or alone on a body
 * read until the server closes: `gzip`, `x-gzip` and `deflate` are decoded after the chunking is removed, under the
 * content codings' bounds (decoded bytes, at most two codings stacked with the content codings), with the same
 * errors; any other transfer coding is refused naming it. Against a raw loopback socket server writing exact bytes.
 */
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { describe, it } from "node:test";
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from "node:zlib";
import { createProvider } from "../../src/runtime/providers/index.js";
import { terminalEvent } from "../../src/runtime/session/project.js";
import type { Provider, ProviderEvent } from "../../src/runtime/types.js";
import type { FakeProvider } from "../fakes/fake-provider.js";
import { apiKey, collect, makeProvider, request, terminal, textOf } from "./helpers.js";

const chat = (content: string): string => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const STOP = `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`;
const ANSWER = chat("transfer ") + chat("coded") + STOP;

/** `body` in chunks of at most `size` bytes, then the last chunk. */
function chunked(body: Buffer, size = 100): Buffer {
  const parts: Buffer[] = [];
  for (let at = 0; at < body.length; at += size) {
    const c = body.subarray(at, at + size);
    parts.push(Buffer.from(`${c.length.toString(16)}\r\n`, "latin1"), c, Buffer.from("\r\n", "latin1"));
  }
  parts.push(Buffer.from("0\r\n\r\n", "latin1"));
  return Buffer.concat(parts);
}

const head = (headers: string): Buffer => Buffer.from(`HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n${headers}\r\n`, "latin1");

/**
 * A server that reads each whole request (head and Content-Length body: none left unread, so its close is no reset)
 * and answers with `answer(socket)`: it writes the exact bytes, and ends the connection when told to.
 */
async function socketServer(answer: (socket: Socket) => void): Promise<{ fake: FakeProvider; requests: () => number; close: () => Promise<void> }> {
  let n = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket)).on("error", () => undefined);
    let got = Buffer.alloc(0);
    socket.on("data", (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/content-length: *(\d+)/i.exec(got.toString("latin1", 0, end))?.[1] ?? 0);
      if (got.length < end + 4 + length) return;
      got = got.subarray(end + 4 + length);
      n++;
      answer(socket);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as { port: number }).port;
  return {
    fake: { baseUrl: `http://127.0.0.1:${port}` } as FakeProvider,
    requests: () => n,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** The events of one openai-chat stream against a server answering every request with `bytes` (then closing). */
async function answered(bytes: Buffer, provider?: (fake: FakeProvider) => Provider): Promise<{ events: ProviderEvent[]; requests: number }> {
  const s = await socketServer((socket) => socket.end(bytes));
  try {
    const p = provider?.(s.fake) ?? makeProvider("openai-chat", s.fake, { baseUrl: `${s.fake.baseUrl}/v1` }).provider;
    return { events: await collect(p.stream(request())), requests: s.requests() };
  } finally {
    await s.close();
  }
}

function assertAnswer(events: ProviderEvent[]): void {
  assert.equal(textOf(events), "transfer coded");
  assert.deepEqual(terminal(events), { type: "done", stopReason: "end" });
}

describe("openai-chat: a transfer-coded body", () => {
  const body = Buffer.from(ANSWER, "utf8");
  for (const [te, coded] of [
    ["gzip, chunked", gzipSync(body)],
    ["x-gzip, chunked", gzipSync(body)],
    ["deflate, chunked", deflateSync(body)],
    ["deflate, chunked", deflateRawSync(body)],
    ["GZip ,Chunked", gzipSync(body)],
    ["identity, gzip, chunked", gzipSync(body)],
  ] as const) {
    it(`transfer-encoding ${te} (${coded[0] === 0x1f ? "gzip" : coded[0] === 0x78 ? "zlib" : "raw"}): decoded after the chunking`, async () => {
      assertAnswer((await answered(Buffer.concat([head(`Transfer-Encoding: ${te}\r\n`), chunked(coded)]))).events);
    });
  }

  it("transfer-encoding gzip without chunked (read until the server closes): decoded", async () => {
    assertAnswer((await answered(Buffer.concat([head("Transfer-Encoding: gzip\r\nConnection: close\r\n"), gzipSync(body)]))).events);
  });

  it("two codings in all (a gzip transfer coding over a br content coding) decode: the limit", async () => {
    const bytes = Buffer.concat([head("Content-Encoding: br\r\nTransfer-Encoding: gzip, chunked\r\n"), chunked(gzipSync(brotliCompressSync(body)))]);
    assertAnswer((await answered(bytes)).events);
    const two = Buffer.concat([head("Transfer-Encoding: deflate, gzip, chunked\r\n"), chunked(gzipSync(deflateSync(body)))]);
    assertAnswer((await answered(two)).events);
  });

  it("three codings in all are refused, not retried", async () => {
    const r = await answered(Buffer.concat([head("Content-Encoding: br, gzip\r\nTransfer-Encoding: gzip, chunked\r\n"), chunked(gzipSync(gzipSync(brotliCompressSync(body))))]));
    assert.deepEqual(r.events, [{ type: "error", kind: "protocol", retryable: false, message: "provider answered with a transfer-encoding Berth cannot decode (3 stacked codings)" }]);
    assert.equal(r.requests, 1);
  });

  for (const [te, named] of [
    ["compress, chunked", "compress"],
    ["br, chunked", "br"],
    ["chunked, gzip", "chunked not last"],
    ["x-custom;q=1, chunked", "an unnamed coding"],
  ] as const) {
    it(`transfer-encoding ${te}: refused naming it (${named}), not retried`, async () => {
      const r = await answered(Buffer.concat([head(`Transfer-Encoding: ${te}\r\n`), chunked(body)]));
      assert.deepEqual(r.events, [{ type: "error", kind: "protocol", retryable: false, message: `provider answered with a transfer-encoding Berth cannot decode (${named})` }]);
      assert.equal(r.requests, 1);
    });
  }

  it("a corrupt gzip transfer coding fails as a corrupt compressed response", async () => {
    const r = await answered(Buffer.concat([head("Transfer-Encoding: gzip, chunked\r\n"), chunked(body)]));
    assert.deepEqual(r.events, [{ type: "error", kind: "protocol", retryable: false, message: "provider's compressed response is corrupt (gzip Z_DATA_ERROR)" }]);
  });

  it("a gzip transfer coding that inflates without end trips the response bound (it counts decoded bytes)", async () => {
    const member = gzipSync(`: ${"a".repeat(1022)}\n`.repeat(1024));
    const piece = Buffer.concat([Buffer.from(`${member.length.toString(16)}\r\n`, "latin1"), member, Buffer.from("\r\n", "latin1")]);
    const s = await socketServer((socket) => {
      socket.write(head("Transfer-Encoding: gzip, chunked\r\n"));
      let gone = false;
      socket.on("close", () => void (gone = true));
      const more = (): void => {
        while (!gone && socket.write(piece));
        if (!gone) socket.once("drain", more);
      };
      more();
    });
    try {
      const { provider } = makeProvider("openai-chat", s.fake, { baseUrl: `${s.fake.baseUrl}/v1` });
      const events = await collect(provider.stream(request()));
      assert.deepEqual(events, [{ type: "error", kind: "limit", retryable: false, message: "provider response exceeds 4 MiB" }]);
    } finally {
      await s.close();
    }
  });

  it("through the global fetch (which removes only the chunking too): decoded", async () => {
    const bytes = Buffer.concat([head("Transfer-Encoding: gzip, chunked\r\n"), chunked(gzipSync(body))]);
    const r = await answered(bytes, (fake) => createProvider("t", { api: "openai-chat", baseUrl: `${fake.baseUrl}/v1` }, apiKey, { fetch: globalThis.fetch, retry: { maxAttempts: 1 }, env: {} }));
    assertAnswer(r.events);
  });

  it("a failed turn's message names the fix", () => {
    const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 1 };
    const message = (terminalEvent({ sessionId: "s1", turnId: "t1" }, { status: "failed", assistantText: "", reason: "provider", message: "provider answered with a transfer-encoding Berth cannot decode (compress)", usage }, undefined) as { message: string }).message;
    assert.equal(
      message,
      "the provider request failed: provider answered with a transfer-encoding Berth cannot decode (compress); configure the server, or the proxy in front of it, to send the stream with no transfer coding but chunked (or with gzip or deflate before chunked)",
    );
  });
});
