/**
 * A request refused as longer than the model's window by an in-stream error (each dialect, in the shapes real servers
 * send) is named `context_length_exceeded` exactly as an HTTP error body saying so is; other in-stream errors keep
 * their own category; an HTTP 413 is named a request too large. The provider's message text never shows.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import { terminalEvent } from "../../src/runtime/session/project.js";
import type { ProviderApi, ProviderEvent } from "../../src/runtime/types.js";
import { ERROR_BODY_SECRET, startFakeProvider, type FakeProvider, type FakeStep } from "../fakes/fake-provider.js";
import { APIS, collect, makeProvider, request, terminal } from "./helpers.js";

const OVERFLOW = "provider reported an error (context_length_exceeded)";

/** In-stream overflow errors of each dialect, as its servers send them (`event: error` is Anthropic's named event). */
const OVERFLOWS: Record<ProviderApi, FakeStep[]> = {
  anthropic: [
    // Anthropic Messages: an `error` event whose type is the generic `invalid_request_error`; only the message says so.
    { sse: JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: `prompt is too long: 210000 tokens > 200000 maximum ${ERROR_BODY_SECRET}` } }), event: "error" },
  ],
  "openai-responses": [
    // OpenAI: `response.failed` with the code (what Codex checks for).
    { sse: JSON.stringify({ type: "response.failed", sequence_number: 2, response: { id: "r", status: "failed", error: { code: "context_length_exceeded", message: `Your input exceeds the context window of this model. ${ERROR_BODY_SECRET}` } } }), event: "response.failed" },
    // A compatible server's `response.failed` that says it in its message only.
    { sse: JSON.stringify({ type: "response.failed", sequence_number: 2, response: { id: "r", status: "failed", error: { code: "invalid_prompt", message: `This model's maximum context length is 4096 tokens. ${ERROR_BODY_SECRET}` } } }), event: "response.failed" },
    // The `error` event: top-level code (the documented shape), or an error object (a compatible server).
    { sse: JSON.stringify({ type: "error", sequence_number: 1, code: "context_length_exceeded", message: ERROR_BODY_SECRET, param: null }), event: "error" },
    { sse: JSON.stringify({ type: "error", sequence_number: 1, code: null, message: `Your input exceeds the context window of this model. ${ERROR_BODY_SECRET}`, param: null }), event: "error" },
    { sse: JSON.stringify({ type: "error", error: { type: "invalid_request_error", code: null, message: `the request exceeds the available context size ${ERROR_BODY_SECRET}` } }), event: "error" },
  ],
  "openai-chat": [
    // vLLM: the error object of its HTTP answer, in a chunk; llama.cpp: its own type; a plain-string error.
    { sse: JSON.stringify({ error: { object: "error", message: `This model's maximum context length is 4096 tokens. ${ERROR_BODY_SECRET}`, type: "BadRequestError", param: null, code: 400 } }) },
    { sse: JSON.stringify({ error: { code: 400, message: ERROR_BODY_SECRET, type: "exceed_context_size_error" } }) },
    { sse: JSON.stringify({ error: `the context window is full ${ERROR_BODY_SECRET}` }) },
  ],
};

/** Not overflows: each keeps the dialect's own category (and retry rule). */
const OTHERS: Record<ProviderApi, { step: FakeStep; label: string }[]> = {
  anthropic: [
    { step: { sse: JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: `messages: text content blocks must be non-empty ${ERROR_BODY_SECRET}` } }), event: "error" }, label: "provider reported an error (invalid_request_error)" },
  ],
  "openai-responses": [
    { step: { sse: JSON.stringify({ type: "response.failed", response: { status: "failed", error: { code: "invalid_prompt", message: ERROR_BODY_SECRET } } }), event: "response.failed" }, label: "provider reported an error (invalid_prompt)" },
    { step: { sse: JSON.stringify({ type: "error", code: "invalid_image", message: ERROR_BODY_SECRET }), event: "error" }, label: "provider reported an error (invalid_image)" },
  ],
  "openai-chat": [
    { step: { sse: JSON.stringify({ error: { message: ERROR_BODY_SECRET, type: "invalid_request_error", code: "invalid_value" } }) }, label: "provider reported an error (invalid_value)" },
  ],
};

function noLeak(events: ProviderEvent[]): void {
  assert.ok(!JSON.stringify(events).includes(ERROR_BODY_SECRET), "provider message leaked");
}

for (const api of APIS) {
  describe(`${api} in-stream overflow`, () => {
    let fake: FakeProvider;
    beforeEach(async () => {
      fake = await startFakeProvider();
    });
    afterEach(async () => {
      await fake.close();
    });

    it("an in-stream refusal as over the window is named context_length_exceeded, not retried, its message never shown", async () => {
      const steps = OVERFLOWS[api];
      fake.script(steps.map((s) => ({ steps: [s], end: false })));
      const { provider, delays } = makeProvider(api, fake);
      const labels: unknown[] = [];
      for (let i = 0; i < steps.length; i++) {
        const events = await collect(provider.stream(request()));
        noLeak(events);
        assert.equal(events.length, 1);
        labels.push(terminal(events));
      }
      assert.deepEqual(labels, steps.map(() => ({ type: "error", kind: "http", retryable: false, message: OVERFLOW })));
      assert.equal(delays.length, 0);
      assert.equal(fake.requests.length, steps.length);
    });

    it("other in-stream errors keep the dialect's category", async () => {
      const cases = OTHERS[api];
      fake.script(cases.map((c) => ({ steps: [c.step], end: false })));
      const { provider } = makeProvider(api, fake);
      for (const c of cases) {
        const events = await collect(provider.stream(request()));
        noLeak(events);
        assert.deepEqual(terminal(events), { type: "error", kind: "http", retryable: false, message: c.label });
      }
    });
  });
}

describe("HTTP 413", () => {
  it("is named a request too large (with its category when the body has one), not retried, not an overflow", async () => {
    const fake = await startFakeProvider();
    try {
      const anthropic = JSON.stringify({ type: "error", error: { type: "request_too_large", message: `Request exceeds the maximum allowed number of bytes. ${ERROR_BODY_SECRET}` } });
      const page = `<html><head><title>413 Request Entity Too Large</title></head><body>nginx ${ERROR_BODY_SECRET}</body></html>`;
      fake.script([{ status: 413, body: anthropic }, { status: 413, body: page, headers: { "content-type": "text/html" } }]);
      const { provider, delays } = makeProvider("anthropic", fake);
      const labels: unknown[] = [];
      for (let i = 0; i < 2; i++) {
        const events = await collect(provider.stream(request()));
        noLeak(events);
        labels.push(terminal(events));
      }
      assert.deepEqual(labels, [
        { type: "error", kind: "http", retryable: false, message: "provider refused the request as too large (HTTP 413 request_too_large)" },
        { type: "error", kind: "http", retryable: false, message: "provider refused the request as too large (HTTP 413)" },
      ]);
      assert.equal(delays.length, 0);
    } finally {
      await fake.close();
    }
  });

  it("a turn it ends names the cause and the fix (fewer or smaller images, clear the session, a proxy's body limit)", () => {
    const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 1 };
    const label = "provider refused the request as too large (HTTP 413 request_too_large)";
    const ev = terminalEvent({ sessionId: "s1", turnId: "t1" }, { status: "failed", assistantText: "", reason: "provider", message: label, usage }, undefined) as { message: string };
    assert.equal(
      ev.message,
      `the provider request failed: ${label}; the request is larger in bytes than the provider, or a proxy in front of it, accepts (Anthropic: 32 MB): attach fewer or smaller images, or clear the session; behind a proxy, raise its request body size limit`,
    );
  });
});
