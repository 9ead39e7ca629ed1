/**
 * Where a provider request goes (src/runtime/providers/node-fetch.ts): the request URL is parsed once per URL text
 * and reused, so each request must still reach its own server with its own path and `Host` header — two providers
 * on different ports, one after the other and back, an IPv6 literal host, and a URL carrying credentials.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { createProvider } from "../../src/runtime/providers/index.js";
import { apiKey, collect, request, textOf } from "./helpers.js";
import { chatSse } from "../helpers/chat-sse.js";

interface Seen {
  path: string;
  host: string;
}

async function serve(host: string, name: string): Promise<{ port: number; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    seen.push({ path: req.url ?? "", host: req.headers.host ?? "" });
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(chatSse(`${name} ${seen.length}`));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

test("requests to two providers reach their own servers, paths and Host headers, turn after turn", { timeout: 30_000 }, async () => {
  const a = await serve("127.0.0.1", "a");
  const b = await serve("127.0.0.1", "b");
  try {
    const pa = createProvider("target-a", { api: "openai-chat", baseUrl: `http://127.0.0.1:${a.port}/v1` }, apiKey, { env: {} });
    const pb = createProvider("target-b", { api: "openai-chat", baseUrl: `http://127.0.0.1:${b.port}/other/v1` }, apiKey, { env: {} });
    const answers: string[] = [];
    for (const p of [pa, pb, pa, pb]) answers.push(textOf(await collect(p.stream(request()))));
    assert.deepEqual(answers, ["a 1", "b 1", "a 2", "b 2"]);
    assert.deepEqual(a.seen, [
      { path: "/v1/chat/completions", host: `127.0.0.1:${a.port}` },
      { path: "/v1/chat/completions", host: `127.0.0.1:${a.port}` },
    ]);
    assert.deepEqual(b.seen, [
      { path: "/other/v1/chat/completions", host: `127.0.0.1:${b.port}` },
      { path: "/other/v1/chat/completions", host: `127.0.0.1:${b.port}` },
    ]);
  } finally {
    await a.close();
    await b.close();
  }
});

test("an IPv6 literal host is connected to without its brackets and named with them in Host", { timeout: 30_000 }, async (t) => {
  let srv: Awaited<ReturnType<typeof serve>>;
  try {
    srv = await serve("::1", "v6");
  } catch {
    t.skip("no IPv6 loopback on this machine");
    return;
  }
  try {
    const p = createProvider("target-v6", { api: "openai-chat", baseUrl: `http://[::1]:${srv.port}/v1` }, apiKey, { env: {} });
    assert.equal(textOf(await collect(p.stream(request()))), "v6 1");
    assert.equal(textOf(await collect(p.stream(request()))), "v6 2");
    assert.deepEqual(srv.seen[1], { path: "/v1/chat/completions", host: `[::1]:${srv.port}` });
  } finally {
    await srv.close();
  }
});

test("a URL with credentials still reaches its server (it is not taken from the parsed-URL cache)", { timeout: 30_000 }, async () => {
  const srv = await serve("127.0.0.1", "cred");
  try {
    const p = createProvider("target-cred", { api: "openai-chat", baseUrl: `http://user:pw@127.0.0.1:${srv.port}/v1` }, apiKey, { env: {} });
    assert.equal(textOf(await collect(p.stream(request()))), "cred 1");
    assert.equal(textOf(await collect(p.stream(request()))), "cred 2");
    assert.deepEqual(srv.seen[1], { path: "/v1/chat/completions", host: `127.0.0.1:${srv.port}` });
  } finally {
    await srv.close();
  }
});
