/**
 * The stream driver's byte → text step (src/runtime/providers/driver.ts, BoundedSse): UTF-8 sequences split across
 * body chunks decode whole, and a leading byte-order mark is dropped (SSE), whatever the chunking. And its batches:
 * one per body chunk, except that the stream's first output is handed over alone, before the rest of its chunk is
 * decoded; an abort between two events of an unsettled batch ends the stream as aborted.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_RETRY, driveBatches, driveStream, type DriveParams, type StreamFetch } from "../../src/runtime/providers/driver.js";
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

function params(chunks: Uint8Array[], signal = new AbortController().signal): DriveParams {
  return {
    signal,
    credentials: () => Promise.resolve({ kind: "api_key", value: "k" }),
    build: () => ({ url: "http://127.0.0.1:1/v1/chat/completions", headers: {}, body: "{}" }),
    decoder: () => new ChatDecoder(PROVIDER_BOUNDS),
    fetch: chunked(chunks),
    retry: { ...DEFAULT_RETRY, maxAttempts: 1 },
    bounds: PROVIDER_BOUNDS,
  };
}

async function textOf(chunks: Uint8Array[]): Promise<string> {
  const events: ProviderEvent[] = [];
  for await (const e of driveStream(params(chunks))) events.push(e);
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

test("SSE lines split anywhere across chunks (LF, CRLF, CR, comments, multi-line data) decode the same", async () => {
  const multi = `data: {"id":"c1","choices":[{"index":0,\ndata: "delta":{"content":"two lines"},"finish_reason":null}]}\n\n`;
  const bodies = [
    event("one ") + ": a comment\n" + multi + "event: ignored\n" + event(" three") + stop,
    (event("one ") + multi + event(" three") + stop).replaceAll("\n", "\r\n"),
    (event("one ") + multi + event(" three") + stop).replaceAll("\n", "\r"),
  ];
  for (const text of bodies) {
    const body = Buffer.from(text, "utf8");
    for (let cut = 1; cut < body.length; cut++) {
      assert.equal(await textOf([body.subarray(0, cut), body.subarray(cut)]), "one two lines three", `split at byte ${cut}`);
    }
    for (let a = 1; a < body.length; a += 7) {
      const b = Math.min(body.length - 1, a + 1 + ((a * 13) % 61));
      assert.equal(await textOf([body.subarray(0, a), body.subarray(a, b), body.subarray(b)]), "one two lines three", `split at ${a}, ${b}`);
    }
  }
});

test("a leading byte-order mark is dropped, even when it arrives split", async () => {
  const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(event("hi") + stop, "utf8")]);
  assert.equal(await textOf([body]), "hi");
  assert.equal(await textOf([body.subarray(0, 1), body.subarray(1, 2), body.subarray(2)]), "hi");
});

async function batchesOf(chunks: Uint8Array[]): Promise<Array<{ types: string[]; settled: boolean }>> {
  const got: Array<{ types: string[]; settled: boolean }> = [];
  for await (const b of driveBatches(params(chunks))) got.push({ types: b.events.map((e) => (e.type === "text_delta" ? e.text : e.type)), settled: b.settled });
  return got;
}

test("batches follow body chunks, the first output alone; only the terminal batch is settled", async () => {
  const chunks = [Buffer.from(event("a") + event("b") + event("c")), Buffer.from(event("d") + stop)];
  assert.deepEqual(await batchesOf(chunks), [
    { types: ["a"], settled: false },
    { types: ["b", "c"], settled: false },
    { types: ["d", "done"], settled: true },
  ]);
  // Events without output before the first (a role-only chunk, comments) do not count; a whole answer in one chunk.
  const role = `data: ${JSON.stringify({ id: "c1", choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] })}\n\n`;
  assert.deepEqual(await batchesOf([Buffer.from(role + ": keep-alive\n\n" + event("a") + event("b") + stop)]), [
    { types: ["a"], settled: false },
    { types: ["b", "done"], settled: true },
  ]);
  // A first output that is the terminal, or the chunk's last event: the chunk is one batch.
  assert.deepEqual(await batchesOf([Buffer.from(stop)]), [{ types: ["done"], settled: true }]);
  assert.deepEqual(await batchesOf([Buffer.from(event("a")), Buffer.from(event("b") + stop)]), [
    { types: ["a"], settled: false },
    { types: ["b", "done"], settled: true },
  ]);
});

test("a failure later in the first output's chunk ends the stream as before: the output, then the error", async () => {
  const big = `data: ${"x".repeat(PROVIDER_BOUNDS.maxSseEventBytes + 1)}\n\n`;
  for (const [bad, kind] of [["data: {not json\n\n", "protocol"], [big, "limit"]] as const) {
    const events: ProviderEvent[] = [];
    for await (const e of driveStream(params([Buffer.from(event("a") + event("b") + bad + event("c") + stop)]))) events.push(e);
    assert.deepEqual(events.slice(0, 2), [{ type: "text_delta", text: "a" }, { type: "text_delta", text: "b" }]);
    assert.equal(events.length, 3);
    assert.equal(events[2]?.type === "error" ? events[2].kind : null, kind);
  }
});

test("an abort between two events of a chunk ends the event stream as aborted, with nothing after it", async () => {
  const ctl = new AbortController();
  const chunks = [Buffer.from(event("a") + event("b") + event("c")), Buffer.from(event("d") + stop)];
  const seen: ProviderEvent[] = [];
  for await (const e of driveStream(params(chunks, ctl.signal))) {
    seen.push(e);
    if (e.type === "text_delta" && e.text === "a") ctl.abort();
  }
  assert.deepEqual(seen.slice(0, 1), [{ type: "text_delta", text: "a" }]);
  assert.equal(seen.length, 2);
  assert.equal(seen[1]?.type, "error");
  assert.equal(seen[1]?.type === "error" ? seen[1].kind : null, "aborted");
});
