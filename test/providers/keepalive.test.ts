/**
 * Provider connections are kept alive across requests (src/runtime/providers/node-fetch.ts): a complete answer whose
 * terminal event arrives before the end of the response hands its connection back to the pool instead of destroying
 * it, and a server that keeps sending after the terminal event has its connection cut.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { createProvider } from "../../src/runtime/providers/index.js";
import { idleConnections } from "../../src/runtime/providers/node-fetch.js";
import { apiKey, collect, request, terminal, textOf } from "./helpers.js";
import { chatSse } from "../helpers/chat-sse.js";

async function serve(handler: (req: IncomingMessage, res: ServerResponse, n: number) => void): Promise<{ baseUrl: string; close(): Promise<void> }> {
  let n = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => handler(req, res, ++n));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

test("a complete answer returns its connection to the keep-alive pool even when the terminal event precedes the end", { timeout: 30_000 }, async () => {
  const ports: Array<number | undefined> = [];
  let endFirst: (() => void) | null = null;
  const srv = await serve((req, res, n) => {
    ports.push(req.socket.remotePort);
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(chatSse(`answer ${n}`));
    // The first response stays open after its terminal event until the test ends it.
    if (n === 1) endFirst = () => res.end();
    else res.end();
  });
  try {
    const provider = createProvider("keepalive", { api: "openai-chat", baseUrl: srv.baseUrl }, apiKey, { env: {} });
    const first = await collect(provider.stream(request()));
    assert.equal(textOf(first), "answer 1");
    assert.deepEqual(terminal(first), { type: "done", stopReason: "end" });
    assert.ok(endFirst !== null, "the stream ended before its response did");
    const idle = idleConnections();
    (endFirst as () => void)();
    while (idleConnections() <= idle) await new Promise((r) => setImmediate(r));
    const second = await collect(provider.stream(request()));
    assert.equal(textOf(second), "answer 2");
    assert.equal(ports.length, 2);
    assert.equal(ports[1], ports[0], "the second request came over the first one's connection");
  } finally {
    await srv.close();
  }
});

test("a server that keeps sending after the terminal event has its connection cut", async () => {
  let closed!: Promise<void>;
  const srv = await serve((req, res) => {
    closed = new Promise<void>((r) => req.socket.once("close", () => r()));
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(chatSse("done already"));
    // 128 KiB of SSE comments, never ending the response.
    for (let i = 0; i < 128; i++) res.write(`: ${"x".repeat(1020)}\n`);
  });
  try {
    const provider = createProvider("keepalive", { api: "openai-chat", baseUrl: srv.baseUrl }, apiKey, { env: {} });
    const events = await collect(provider.stream(request()));
    assert.equal(textOf(events), "done already");
    await closed; // the client destroyed the connection after reading past the bound
  } finally {
    await srv.close();
  }
});
