/**
 * A provider built with the platform's own `fetch` as `opts.fetch`: that fetch asks for compression
 * (`Accept-Encoding`) and undoes the content codings it knows itself, keeping the `Content-Encoding` header, so
 * Berth must not decode such a body a second time; a body the fetch left as it is (a coding it does not know in the
 * list) is still Berth's to decode or refuse. Against the loopback fake provider, or a raw node:http server where
 * the body must be exact bytes.
 */
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { createProvider } from "../../src/runtime/providers/index.js";
import type { Provider, ProviderEvent } from "../../src/runtime/types.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { apiKey, collect, request, terminal, textOf } from "./helpers.js";

/** An openai-chat provider at `baseUrl` whose requests go through the global `fetch`; no retries. */
function withGlobalFetch(baseUrl: string): Provider {
  return createProvider("test-fetch", { api: "openai-chat", baseUrl }, apiKey, { fetch: globalThis.fetch, retry: { maxAttempts: 1 }, env: {} });
}

const chat = (content: string): string => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const STOP = `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`;

describe("opts.fetch: the global fetch", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(async () => {
    await fake.close();
  });

  for (const coding of ["gzip", "x-gzip", "deflate", "br"]) {
    it(`content-encoding ${coding}: the body fetch decoded is read once (text, tool call, usage)`, async () => {
      fake.script([{ contentEncoding: coding, steps: [{ text: "fetched answer", chunks: 3 }, { toolCall: { id: "c1", name: "read", arguments: { path: "a" } } }], usage: { input: 12, output: 7 } }]);
      const events = await collect(withGlobalFetch(`${fake.baseUrl}/v1`).stream(request()));
      assert.equal(textOf(events), "fetched answer");
      assert.deepEqual(events.filter((e) => e.type === "tool_call"), [{ type: "tool_call", id: "c1", name: "read", arguments: { path: "a" } }]);
      assert.ok(events.some((e) => e.type === "usage" && e.inputTokens === 12 && e.outputTokens === 7));
      assert.deepEqual(terminal(events), { type: "done", stopReason: "tool_use" });
    });
  }

  it("an error body in gzip (decoded by fetch) still gives its category", async () => {
    fake.script([{ status: 404, contentEncoding: "gzip", body: JSON.stringify({ error: { code: "model_not_found", message: "no such model" } }) }]);
    const events = await collect(withGlobalFetch(`${fake.baseUrl}/v1`).stream(request()));
    assert.deepEqual(events, [{ type: "error", kind: "http", retryable: false, message: "provider returned an error status (HTTP 404 model_not_found)" }]);
  });

  it("a coding neither decodes is refused, naming it", async () => {
    fake.script([{ contentEncoding: "compress", steps: [{ text: "x" }] }]);
    const events = await collect(withGlobalFetch(`${fake.baseUrl}/v1`).stream(request()));
    assert.deepEqual(events, [{ type: "error", kind: "protocol", retryable: false, message: "provider answered with a content-encoding Berth cannot decode (compress)" }]);
  });
});

describe("opts.fetch: a body the global fetch left encoded", () => {
  it("`gzip, identity` (a list fetch does not wholly know, so it decodes none of it) is decoded by Berth", async () => {
    const body = gzipSync(chat("left ") + chat("encoded") + STOP);
    const server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "gzip, identity", "content-length": body.length });
      res.end(body);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    try {
      const events: ProviderEvent[] = await collect(withGlobalFetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`).stream(request()));
      assert.equal(textOf(events), "left encoded");
      assert.deepEqual(terminal(events), { type: "done", stopReason: "end" });
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
