/**
 * A provider built for an http: URL opens its connection at once (src/runtime/providers/node-fetch.ts, `preconnect`):
 * a fresh process builds it while it creates its first session, so the first request finds the connection made.
 * Observed from the server: the connection arrives before any request, and the request comes over it.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { test } from "node:test";
import { createProvider } from "../../src/runtime/providers/index.js";
import { idleConnections, nodeFetch, preconnect } from "../../src/runtime/providers/node-fetch.js";
import { apiKey, collect, request, terminal, textOf } from "./helpers.js";
import { chatSse } from "../helpers/chat-sse.js";

interface Server {
  baseUrl: string;
  /** Client ports of the connections accepted, in order. */
  connections: number[];
  /** Client ports of the requests received, in order. */
  requests: Array<number | undefined>;
  waitForConnections(n: number): Promise<void>;
  close(): Promise<void>;
}

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Server> {
  const connections: number[] = [];
  const requests: Array<number | undefined> = [];
  let waiters: Array<() => void> = [];
  const server = createServer((req, res) => {
    requests.push(req.socket.remotePort);
    req.resume();
    req.on("end", () => handler(req, res));
  });
  server.on("connection", (s: Socket) => {
    connections.push(s.remotePort!);
    for (const w of waiters) w();
    waiters = [];
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    connections,
    requests,
    async waitForConnections(n) {
      while (connections.length < n) await new Promise<void>((r) => waiters.push(r));
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const answer = (req: IncomingMessage, res: ServerResponse): void => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.end(chatSse("hello"));
};

test("an http: provider connects when built; its first request comes over that connection", { timeout: 30_000 }, async () => {
  const srv = await serve(answer);
  try {
    const provider = createProvider("preconnect", { api: "openai-chat", baseUrl: srv.baseUrl }, apiKey, { env: {} });
    // Connected before any request was made.
    await srv.waitForConnections(1);
    assert.equal(srv.requests.length, 0);
    const events = await collect(provider.stream(request()));
    assert.equal(textOf(events), "hello");
    assert.deepEqual(terminal(events), { type: "done", stopReason: "end" });
    assert.deepEqual(srv.requests, [srv.connections[0]], "the request came over the connection opened in advance");
    assert.equal(srv.connections.length, 1);
  } finally {
    await srv.close();
  }
});

test("a second provider for the same server reuses the idle pooled connection instead of opening another", { timeout: 30_000 }, async () => {
  const srv = await serve(answer);
  try {
    const first = createProvider("preconnect", { api: "openai-chat", baseUrl: srv.baseUrl }, apiKey, { env: {} });
    assert.equal(textOf(await collect(first.stream(request()))), "hello");
    // The answer's connection goes back to the pool once its response ended.
    while (idleConnections(srv.baseUrl) === 0) await new Promise((r) => setImmediate(r));
    const second = createProvider("preconnect", { api: "openai-chat", baseUrl: srv.baseUrl }, apiKey, { env: {} });
    assert.equal(textOf(await collect(second.stream(request()))), "hello");
    assert.equal(srv.requests.length, 2);
    assert.deepEqual(srv.connections, [srv.requests[0]], "one connection, opened in advance of the first request");
    assert.equal(srv.requests[1], srv.requests[0], "the second request came over the pooled connection");
  } finally {
    await srv.close();
  }
});

test("a preconnect while a request's connection is in use waits for it: none if it is pooled, one once it closes", { timeout: 30_000 }, async () => {
  for (const close of [false, true]) {
    let finish: (() => void) | null = null;
    const srv = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", ...(close ? { connection: "close" } : {}) });
      res.write("data: first\n\n");
      finish = () => res.end(chatSse("rest"));
    });
    try {
      const r = await nodeFetch(`${srv.baseUrl}/chat/completions`, { method: "POST", headers: {}, body: "{}", signal: new AbortController().signal });
      const body = r.body!.getReader();
      assert.equal((await body.read()).done, false);
      assert.equal(srv.connections.length, 1);
      preconnect(srv.baseUrl); // the answer's connection is still in use
      finish!();
      while (!(await body.read()).done);
      if (close) {
        // The server closed the answer's connection: the waiting preconnect opens one, with no request on it.
        await srv.waitForConnections(2);
        assert.equal(srv.requests.length, 1);
      } else {
        while (idleConnections(srv.baseUrl) === 0) await new Promise((res) => setImmediate(res));
        const again = await nodeFetch(`${srv.baseUrl}/chat/completions`, { method: "POST", headers: {}, body: "{}", signal: new AbortController().signal });
        finish!();
        const b2 = again.body!.getReader();
        while (!(await b2.read()).done);
        assert.deepEqual(srv.connections, [srv.requests[0]], "the kept-alive connection only: nothing opened ahead");
        assert.equal(srv.requests[1], srv.requests[0]);
      }
    } finally {
      await srv.close();
    }
  }
});
