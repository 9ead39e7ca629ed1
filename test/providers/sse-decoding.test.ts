/**
 * The stream driver's byte → text step (src/runtime/providers/driver.ts, BoundedSse): UTF-8 sequences split across
 * body chunks decode whole, and a leading byte-order mark is dropped (SSE), whatever the chunking.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_RETRY, driveStream, type StreamFetch } from "../../src/runtime/providers/driver.js";
import { ChatDecoder } from "../../src/runtime/providers/openai-chat.js";
import { PROVIDER_BOUNDS, type ProviderEvent } from "../../src/runtime/types.js";

const event = (content: string): string =>
  `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const stop = `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`;

/** A fetch whose response body yields exactly `chunks`. */
function chunked(chunks: Uint8Array[]): StreamFetch {
  return () => {
    let i = 0;
    return Promise.resolve({
      ok: true,
      status: 200,
      headers: { get: () => null },
      body: {
        getReader: () => ({
          read: () => Promise.resolve(i < chunks.length ? { done: false as const, value: chunks[i++]! } : { done: true as const }),
        }),
        cancel: () => Promise.resolve(),
      },
    });
  };
}

async function textOf(chunks: Uint8Array[]): Promise<string> {
  const events: ProviderEvent[] = [];
  for await (const e of driveStream({
    signal: new AbortController().signal,
    credentials: () => Promise.resolve({ kind: "api_key", value: "k" }),
    build: () => ({ url: "http://127.0.0.1:1/v1/chat/completions", headers: {}, body: "{}" }),
    decoder: () => new ChatDecoder(PROVIDER_BOUNDS),
    fetch: chunked(chunks),
    retry: { ...DEFAULT_RETRY, maxAttempts: 1 },
    bounds: PROVIDER_BOUNDS,
  }))
    events.push(e);
  assert.deepEqual(events[events.length - 1], { type: "done", stopReason: "end" });
  return events.map((e) => (e.type === "text_delta" ? e.text : "")).join("");
}

test("UTF-8 split across body chunks decodes whole, at every split point", async () => {
  const body = Buffer.from(event("café ") + event("😀 ok") + stop, "utf8");
  for (let cut = 1; cut < body.length; cut++) {
    assert.equal(await textOf([body.subarray(0, cut), body.subarray(cut)]), "café 😀 ok", `split at byte ${cut}`);
  }
  // One byte per chunk.
  assert.equal(await textOf([...body].map((b) => Uint8Array.of(b))), "café 😀 ok");
});

test("a leading byte-order mark is dropped, even when it arrives split", async () => {
  const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(event("hi") + stop, "utf8")]);
  assert.equal(await textOf([body]), "hi");
  assert.equal(await textOf([body.subarray(0, 1), body.subarray(1, 2), body.subarray(2)]), "hi");
});
