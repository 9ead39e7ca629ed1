/**
 * A response body compressed unasked (Berth sends no Accept-Encoding, which allows any coding): gzip, x-gzip, deflate
 * and br streams decode event by event; an error body decodes for its category; a coding Berth cannot decode, a
 * corrupt or cut-short compressed stream and a body that inflates without end each fail with their own label. Against
 * the loopback fake provider, or a raw node:http server where the body must be exact bytes.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { constants, deflateRawSync, deflateSync, gzipSync } from "node:zlib";
import { terminalEvent } from "../../src/runtime/session/project.js";
import type { ProviderEvent, ProviderApi } from "../../src/runtime/types.js";
import { startFakeProvider, type FakeProvider, type FakeTurn } from "../fakes/fake-provider.js";
import { collect, makeProvider, request, terminal, textOf } from "./helpers.js";

const answer = (contentEncoding: string): FakeTurn => ({
  contentEncoding,
  steps: [{ text: "compressed answer", chunks: 4 }, { toolCall: { id: "call_1", name: "read", arguments: { path: "a.txt" } } }],
  usage: { input: 12, output: 7 },
});

function assertAnswer(events: ProviderEvent[]): void {
  assert.equal(textOf(events), "compressed answer");
  assert.deepEqual(events.filter((e) => e.type === "tool_call"), [{ type: "tool_call", id: "call_1", name: "read", arguments: { path: "a.txt" } }]);
  assert.deepEqual(terminal(events), { type: "done", stopReason: "tool_use" });
}

/** A server answering every request with `respond` (exact bytes: a cut or corrupt compressed body, a bomb). */
async function rawServer(respond: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ fake: FakeProvider; requests: () => number; close: () => Promise<void> }> {
  let n = 0;
  const server = createServer((req, res) => {
    n++;
    req.resume();
    respond(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    fake: { baseUrl } as FakeProvider,
    requests: () => n,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A server repeating `chunk` under `coding` until the client leaves: the stream ends at the response bound. */
async function tripsResponseBound(coding: string, chunk: Buffer): Promise<void> {
  const s = await rawServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": coding });
    endless(res, chunk);
  });
  try {
    const { provider } = makeProvider("openai-chat", s.fake);
    const events = await collect(provider.stream(request()));
    assert.deepEqual(events, [{ type: "error", kind: "limit", retryable: false, message: "provider response exceeds 4 MiB" }]);
  } finally {
    await s.close();
  }
}

/** Writes `chunk` again and again, as fast as the client reads, until it goes away. */
function endless(res: ServerResponse, chunk: Buffer): void {
  let gone = false;
  res.on("close", () => void (gone = true));
  const more = (): void => {
    while (!gone && res.write(chunk));
    if (!gone) res.once("drain", more);
  };
  more();
}

describe("openai-chat: a compressed event stream", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(async () => {
    await fake.close();
  });

  for (const coding of ["gzip", "x-gzip", "deflate", "br", "identity", "GZip"]) {
    it(`content-encoding ${coding}: decodes the stream (text, tool call, usage)`, async () => {
      fake.script([answer(coding)]);
      const { provider } = makeProvider("openai-chat", fake);
      const events = await collect(provider.stream(request()));
      assertAnswer(events);
      assert.ok(events.some((e) => e.type === "usage" && e.inputTokens === 12 && e.outputTokens === 7));
    });
  }

  it("decodes as it arrives: the first delta comes before the server sends the rest", async () => {
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    fake.script([{ contentEncoding: "gzip", steps: [{ text: "first" }, { hold }, { text: " second" }] }]);
    // A client that waited for the whole body would wait for the idle timeout instead (then fail the test).
    const { provider } = makeProvider("openai-chat", fake, { idleTimeoutMs: 5000, retry: { maxAttempts: 1 } });
    const events: ProviderEvent[] = [];
    for await (const e of provider.stream(request())) {
      events.push(e);
      if (e.type === "text_delta") release(); // the server writes the rest only now
    }
    assert.equal(textOf(events), "first second");
    assert.deepEqual(terminal(events), { type: "done", stopReason: "end" });
  });

  it("an error body in gzip is decoded for its category", async () => {
    fake.script([{ status: 404, contentEncoding: "gzip", body: JSON.stringify({ error: { code: "model_not_found", message: "no such model" } }) }]);
    const { provider } = makeProvider("openai-chat", fake);
    const events = await collect(provider.stream(request()));
    assert.deepEqual(events, [{ type: "error", kind: "http", retryable: false, message: "provider returned an error status (HTTP 404 model_not_found)" }]);
  });

  it("a coding Berth cannot decode fails at once, naming it, not retried", async () => {
    const before = fake.requests.length;
    fake.script([answer("compress")]);
    const { provider, delays } = makeProvider("openai-chat", fake);
    const events = await collect(provider.stream(request()));
    assert.deepEqual(events, [{ type: "error", kind: "protocol", retryable: false, message: "provider answered with a content-encoding Berth cannot decode (compress)" }]);
    assert.equal(delays.length, 0);
    assert.equal(fake.requests.length, before + 1);
  });

  it("a body that is not what its gzip header says is a corrupt compressed response, not retried", async () => {
    fake.script([{ headers: { "content-encoding": "gzip" }, body: `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "plain" } }] })}\n\n` }]);
    const { provider, delays } = makeProvider("openai-chat", fake);
    const events = await collect(provider.stream(request()));
    assert.deepEqual(events, [{ type: "error", kind: "protocol", retryable: false, message: "provider's compressed response is corrupt (gzip Z_DATA_ERROR)" }]);
    assert.equal(delays.length, 0);
  });
});

/** A Chat Completions answer of `n` distinct text deltas, then its end. */
function chatBody(n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: `<${i}>` }, finish_reason: null }] })}\n\n`;
  return `${s}data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`;
}

describe("openai-chat: a broken or hostile compressed body", () => {
  it("a gzip stream cut short (the body itself ends cleanly) keeps the text so far and fails as ended early", async () => {
    const whole = gzipSync(chatBody(400));
    const cut = whole.subarray(0, whole.length >> 1);
    const s = await rawServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "gzip", "content-length": cut.length });
      res.end(cut);
    });
    try {
      const { provider } = makeProvider("openai-chat", s.fake);
      const events = await collect(provider.stream(request()));
      assert.match(textOf(events), /^<0><1><2>/);
      assert.deepEqual(terminal(events), { type: "error", kind: "network", retryable: true, message: "provider's compressed response ended early (gzip Z_BUF_ERROR)" });
      assert.equal(s.requests(), 1, "output was yielded: not retried");
    } finally {
      await s.close();
    }
  });

  it("a gzip body that inflates without end trips the response bound", async () => {
    // Each member inflates ~1 MiB of comment lines from ~1 KiB; the server sends members until the client leaves.
    const member = gzipSync(`: ${"a".repeat(1022)}\n`.repeat(1024));
    assert.ok(member.length < 8 * 1024, `a member is ${member.length} bytes`);
    await tripsResponseBound("gzip", member);
  });

  it("a gzip body inflating into one endless event trips the event bound", async () => {
    const member = gzipSync("a".repeat(1024 * 1024));
    const s = await rawServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "gzip" });
      res.write(gzipSync("data: "));
      endless(res, member);
    });
    try {
      const { provider } = makeProvider("openai-chat", s.fake);
      const events = await collect(provider.stream(request()));
      assert.deepEqual(events, [{ type: "error", kind: "limit", retryable: false, message: "one event of the provider's stream exceeds 1 MiB" }]);
    } finally {
      await s.close();
    }
  });
});

describe("openai-chat: deflate with or without its zlib wrapper", () => {
  /** The answer of a server sending `body` under `content-encoding: deflate`, written in `parts` pieces. */
  async function deflated(body: Buffer, cuts: number[] = []): Promise<{ events: ProviderEvent[]; requests: number; delays: number }> {
    const s = await rawServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "deflate" });
      let at = 0;
      for (const cut of cuts) {
        res.write(body.subarray(at, cut));
        at = cut;
      }
      res.end(body.subarray(at));
    });
    try {
      const { provider, delays } = makeProvider("openai-chat", s.fake);
      return { events: await collect(provider.stream(request())), requests: s.requests(), delays: delays.length };
    } finally {
      await s.close();
    }
  }
  const expected = Array.from({ length: 300 }, (_, i) => `<${i}>`).join("");

  it("zlib-wrapped (RFC 1950, as HTTP defines deflate) decodes", async () => {
    const { events } = await deflated(deflateSync(chatBody(300)));
    assert.equal(textOf(events), expected);
    assert.deepEqual(terminal(events), { type: "done", stopReason: "end" });
  });

  it("raw (RFC 1951, no zlib header, as some servers and proxies send it) decodes", async () => {
    const { events } = await deflated(deflateRawSync(chatBody(300)));
    assert.equal(textOf(events), expected);
    assert.deepEqual(terminal(events), { type: "done", stopReason: "end" });
  });

  it("either form decodes when its first two bytes arrive apart", async () => {
    for (const body of [deflateSync(chatBody(300)), deflateRawSync(chatBody(300))]) {
      const { events } = await deflated(body, [1, 2]);
      assert.equal(textOf(events), expected);
    }
  });

  it("a raw deflate body that inflates without end trips the response bound", async () => {
    // Non-final blocks ending on a byte boundary (a sync flush): their concatenation is one endless raw stream.
    const blocks = deflateRawSync(`: ${"a".repeat(1022)}\n`.repeat(1024), { finishFlush: constants.Z_SYNC_FLUSH });
    await tripsResponseBound("deflate", blocks);
  });

  const corrupt = "provider's compressed response is corrupt (deflate Z_DATA_ERROR)";
  for (const [name, body] of [
    ["a zlib header then a reserved block type", Buffer.from([0x78, 0x9c, 0x07, 0x00, 0x00])],
    ["raw with a reserved block type", Buffer.from([0x07, 0x00, 0x00])],
    ["an uncompressed event stream", Buffer.from(chatBody(3))],
  ] as const) {
    it(`corrupt: ${name} fails as a corrupt compressed response, not retried`, async () => {
      const r = await deflated(body);
      assert.deepEqual(r.events, [{ type: "error", kind: "protocol", retryable: false, message: corrupt }]);
      assert.equal(r.requests, 1);
      assert.equal(r.delays, 0);
    });
  }
});

for (const api of ["anthropic", "openai-responses"] satisfies ProviderApi[]) {
  describe(`${api}: a compressed event stream`, () => {
    it("gzip decodes the stream (text, tool call)", async () => {
      const fake = await startFakeProvider();
      try {
        fake.script([answer("gzip")]);
        const { provider } = makeProvider(api, fake);
        assertAnswer(await collect(provider.stream(request())));
      } finally {
        await fake.close();
      }
    });
  });
}

describe("a failed turn's message for a compressed answer", () => {
  const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 1 };
  const message = (label: string): string =>
    (terminalEvent({ sessionId: "s1", turnId: "t1" }, { status: "failed", assistantText: "", reason: "provider", message: label, usage }, undefined) as { message: string }).message;

  it("names the coding and the fix", () => {
    assert.equal(
      message("provider answered with a content-encoding Berth cannot decode (compress)"),
      "the provider request failed: provider answered with a content-encoding Berth cannot decode (compress); configure the server, or the proxy in front of it, to send identity (no compression), gzip, deflate or br",
    );
    assert.equal(
      message("provider's compressed response is corrupt (gzip Z_DATA_ERROR)"),
      "the provider request failed: provider's compressed response is corrupt (gzip Z_DATA_ERROR); if it persists, configure the server, or the proxy in front of it, to send the stream uncompressed (identity)",
    );
  });
});
