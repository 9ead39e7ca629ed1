/** Each provider against the fake: HTTP errors, retries, aborts, malformed events, disconnects. */
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, it } from "node:test";
import type { ProviderEvent } from "../../src/runtime/types.js";
import { ERROR_BODY_SECRET, startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { APIS, collect, makeProvider, request, terminal, terminalCount, textOf } from "./helpers.js";

function assertNoLeak(events: ProviderEvent[]): void {
  const s = JSON.stringify(events);
  assert.ok(!s.includes("SECRETMARKER"), "credential leaked");
  assert.ok(!s.includes(ERROR_BODY_SECRET), "provider body leaked");
  assert.ok(!s.includes("127.0.0.1"), "URL leaked");
}

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

for (const api of APIS) {
  describe(`${api} failures`, () => {
    let fake: FakeProvider;
    beforeEach(async () => {
      fake = await startFakeProvider();
    });
    afterEach(async () => {
      await fake.close();
    });

    it("HTTP 400 is an in-band error with a fixed label, no retry, no body leak", async () => {
      fake.script([{ status: 400 }]);
      const { provider, delays } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.deepEqual(events, [{ type: "error", kind: "http", retryable: false, message: "provider returned an error status (HTTP 400 fake_error)" }]);
      assert.equal(delays.length, 0);
      assert.equal(fake.requests.length, 1);
      assertNoLeak(events);
    });

    it("the error body's category (OpenAI code, else type; Anthropic error.type) is named, never its message", async () => {
      const openai = JSON.stringify({ error: { message: `Incorrect API key provided: sk-${ERROR_BODY_SECRET}`, type: "invalid_request_error", code: "invalid_api_key" } });
      const anthropic = JSON.stringify({ type: "error", error: { type: "not_found_error", message: `model: ${ERROR_BODY_SECRET}` } });
      const sentence = JSON.stringify({ error: { type: `bad ${ERROR_BODY_SECRET}`, code: null } });
      const big = JSON.stringify({ error: { type: "too_big", pad: "x".repeat(16 * 1024) } });
      fake.script([{ status: 401, body: openai }, { status: 404, body: anthropic }, { status: 400, body: sentence }, { status: 400, body: big }, { status: 400, body: "not json" }]);
      const { provider } = makeProvider(api, fake);
      const messages: string[] = [];
      for (let i = 0; i < 5; i++) {
        const events = await collect(provider.stream(request()));
        assertNoLeak(events);
        messages.push((terminal(events) as { message: string }).message);
      }
      assert.deepEqual(messages, [
        "provider rejected the credential (HTTP 401 invalid_api_key)",
        "provider returned an error status (HTTP 404 not_found_error)",
        "provider returned an error status (HTTP 400)",
        "provider returned an error status (HTTP 400)",
        "provider returned an error status (HTTP 400)",
      ]);
    });

    it("HTTP 401 is an auth error", async () => {
      fake.script([{ status: 401 }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.deepEqual(events, [{ type: "error", kind: "auth", retryable: false, message: "provider rejected the credential (HTTP 401 fake_error)" }]);
      assertNoLeak(events);
    });

    it("retries 503 and 429 (honouring Retry-After, capped) before any output, then succeeds", async () => {
      fake.script([{ status: 503 }, { status: 429, headers: { "retry-after": "120" } }, { steps: [{ text: "finally" }] }]);
      const { provider, delays } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.equal(textOf(events), "finally");
      assert.deepEqual(delays, [250, 10_000]);
      assert.equal(fake.requests.length, 3);
      assert.equal(terminalCount(events), 1);
    });

    it("gives up after the attempt limit with a retryable http error", async () => {
      fake.script([{ status: 500 }, { status: 502 }, { status: 529 }, { steps: [{ text: "never" }] }]);
      const { provider, delays } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.deepEqual(events, [{ type: "error", kind: "http", retryable: true, message: "provider overloaded or unavailable (HTTP 529 fake_error; 3 attempts)" }]);
      assert.deepEqual(delays, [250, 500]);
      assert.equal(fake.requests.length, 3);
      assertNoLeak(events);
    });

    it("retries a connection reset before any byte", async () => {
      fake.script([{ resetBeforeHeaders: true }, { steps: [{ text: "ok" }] }]);
      const { provider, delays } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.equal(textOf(events), "ok");
      assert.equal(delays.length, 1);
    });

    it("connection refused: retried, then a network error", async () => {
      const port = await closedPort();
      const base = api === "anthropic" ? `http://127.0.0.1:${port}` : `http://127.0.0.1:${port}/v1`;
      const { provider, delays } = makeProvider(api, fake, { baseUrl: base });
      const events = await collect(provider.stream(request()));
      assert.deepEqual(events, [{ type: "error", kind: "network", retryable: true, message: "provider connection failed (ECONNREFUSED; 3 attempts)" }]);
      assert.equal(delays.length, 2);
      assertNoLeak(events);
    });

    it("no retry once output was yielded: mid-stream disconnect is a network error", async () => {
      fake.script([{ steps: [{ text: "partial" }, { disconnect: true }], end: false }, { steps: [{ text: "never" }] }]);
      const { provider, delays } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.equal(textOf(events), "partial");
      assert.deepEqual(terminal(events), { type: "error", kind: "network", retryable: true, message: "provider stream ended unexpectedly (ECONNRESET)" });
      assert.equal(terminalCount(events), 1);
      assert.equal(delays.length, 0);
      assert.equal(fake.requests.length, 1);
    });

    it("a clean end of body without the terminal event is an error", async () => {
      fake.script([{ steps: [{ text: "partial" }], end: false }, { steps: [{ text: "never" }] }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.equal(terminal(events)?.type, "error");
      assert.equal(fake.requests.length, 1);
    });

    it("a request refused as longer than the context window is named context_length_exceeded, whatever the server's shape", async () => {
      const bodies = [
        JSON.stringify({ error: { message: `This model's maximum context length is 8192 tokens ${ERROR_BODY_SECRET}`, type: "invalid_request_error", code: "context_length_exceeded" } }),
        JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: `prompt is too long: 210000 tokens > 200000 maximum ${ERROR_BODY_SECRET}` } }),
        JSON.stringify({ object: "error", message: `This model's maximum context length is 4096 tokens. ${ERROR_BODY_SECRET}`, type: "BadRequestError", code: 400 }),
        JSON.stringify({ error: { code: 400, message: `the request exceeds the available context size ${ERROR_BODY_SECRET}`, type: "exceed_context_size_error" } }),
        JSON.stringify({ error: `Trying to keep the first 5000 tokens when context the overflows. The model is loaded with context length of only 4096 tokens ${ERROR_BODY_SECRET}` }),
        // OpenAI Responses over HTTP, and Mistral (its code null: only the message says so).
        JSON.stringify({ error: { message: `Your input exceeds the context window of this model. ${ERROR_BODY_SECRET}`, type: "invalid_request_error", param: "input", code: "context_length_exceeded" } }),
        JSON.stringify({ object: "error", message: `Prompt contains 40000 tokens, too large for model with 32768 maximum context length ${ERROR_BODY_SECRET}`, type: "invalid_request_error", param: null, code: null }),
        // Gemini's OpenAI-compatible endpoint: a JSON array of one Google error; and Google's own single error object.
        JSON.stringify([{ error: { code: 400, message: `The input token count (1200293) exceeds the maximum number of tokens allowed (1048576). ${ERROR_BODY_SECRET}`, status: "INVALID_ARGUMENT" } }]),
        JSON.stringify({ error: { code: 400, message: `The input token count (81881) exceeds the maximum number of tokens allowed (65536). ${ERROR_BODY_SECRET}`, status: "INVALID_ARGUMENT" } }),
        // Not an overflow: the category stays the server's.
        JSON.stringify({ error: { type: "invalid_request_error", message: `messages: text content blocks must be non-empty ${ERROR_BODY_SECRET}` } }),
        JSON.stringify([{ error: { code: 400, message: `Invalid JSON payload received. Unknown name "x": Cannot find field. ${ERROR_BODY_SECRET}`, status: "INVALID_ARGUMENT" } }]),
        // Google's kind of refusal is in `status` (its `code` is the HTTP number): named, never its message.
        JSON.stringify([{ error: { code: 400, message: `User location is not supported for the API use. ${ERROR_BODY_SECRET}`, status: "FAILED_PRECONDITION" } }]),
        JSON.stringify({ error: { code: 400, message: `API key not valid. ${ERROR_BODY_SECRET}`, status: "INVALID_ARGUMENT", details: [] } }),
        JSON.stringify({ error: { code: 400, message: `bad ${ERROR_BODY_SECRET}`, status: "not an identifier!" } }),
      ];
      fake.script(bodies.map((body) => ({ status: 400, body })));
      const { provider } = makeProvider(api, fake);
      const messages: string[] = [];
      for (let i = 0; i < bodies.length; i++) {
        const events = await collect(provider.stream(request()));
        assertNoLeak(events);
        messages.push((terminal(events) as { message: string }).message);
      }
      assert.deepEqual(messages, [
        ...Array(9).fill("provider returned an error status (HTTP 400 context_length_exceeded)"),
        "provider returned an error status (HTTP 400 invalid_request_error)",
        "provider returned an error status (HTTP 400 INVALID_ARGUMENT)",
        "provider returned an error status (HTTP 400 FAILED_PRECONDITION)",
        "provider returned an error status (HTTP 400 INVALID_ARGUMENT)",
        "provider returned an error status (HTTP 400)",
      ]);
    });

    it("a 429 or 5xx whose body speaks of tokens per minute is a rate limit or an overload, never a context overflow", async () => {
      const tpm = `Too many tokens per minute, please wait before trying again. ${ERROR_BODY_SECRET}`;
      fake.script([
        { status: 429, body: JSON.stringify({ type: "error", error: { type: "rate_limit_error", message: tpm } }) },
        { status: 429, body: JSON.stringify({ error: { message: `Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 45000. ${ERROR_BODY_SECRET}`, type: "tokens", code: "rate_limit_exceeded" } }) },
        { status: 429, body: JSON.stringify({ error: tpm }) },
        { status: 503, body: JSON.stringify({ error: { message: `${tpm} The maximum context length is busy.`, type: "overloaded" } }) },
      ]);
      const { provider } = makeProvider(api, fake, { retry: { maxAttempts: 1 } });
      const got: unknown[] = [];
      for (let i = 0; i < 4; i++) {
        const events = await collect(provider.stream(request()));
        assertNoLeak(events);
        got.push(terminal(events));
      }
      assert.deepEqual(got, [
        { type: "error", kind: "http", retryable: true, message: "provider rate limit (HTTP 429 rate_limit_error)" },
        { type: "error", kind: "http", retryable: true, message: "provider rate limit (HTTP 429 rate_limit_exceeded)" },
        { type: "error", kind: "http", retryable: true, message: "provider rate limit (HTTP 429)" },
        { type: "error", kind: "http", retryable: true, message: "provider overloaded or unavailable (HTTP 503 overloaded)" },
      ]);
    });

    it("an in-stream rate limit or overload whose message speaks of tokens is retried as one, never an overflow", async () => {
      const tpm = `Too many tokens per minute; the maximum context length is not the problem. ${ERROR_BODY_SECRET}`;
      const step =
        api === "anthropic"
          ? { sse: JSON.stringify({ type: "error", error: { type: "rate_limit_error", message: tpm } }), event: "error" }
          : api === "openai-responses"
            ? { sse: JSON.stringify({ type: "response.failed", response: { id: "r", object: "response", status: "failed", error: { code: "rate_limit_exceeded", message: tpm } } }), event: "response.failed" }
            : { sse: JSON.stringify({ error: { message: tpm, type: "tokens", param: null, code: "rate_limit_exceeded" } }) };
      fake.script([{ steps: [step], end: false }]);
      const { provider } = makeProvider(api, fake, { retry: { maxAttempts: 1 } });
      const events = await collect(provider.stream(request()));
      assertNoLeak(events);
      const category = api === "anthropic" ? "rate_limit_error" : "rate_limit_exceeded";
      // A chat error object carries no reliable retry signal (module contract of openai-chat.ts): named, not retried.
      const label = api === "openai-chat" ? `provider reported an error (${category})` : `provider rate limit (${category})`;
      assert.deepEqual(terminal(events), { type: "error", kind: "http", retryable: api !== "openai-chat", message: label });
    });

    it("a 2xx answer that is not an event stream is named for what it is, not retried", async () => {
      const page = `<!doctype html><html><body>${"<p>Sign in to continue</p>".repeat(4000)}</body></html>`;
      const whole = JSON.stringify({ id: "x", choices: [{ message: { role: "assistant", content: "not streamed" } }] });
      fake.script([
        { body: page, headers: { "content-type": "text/html; charset=utf-8" } },
        { body: whole, headers: { "content-type": "application/json" } },
        // No blank line in 2 MiB: it overflows the event bound, and is still named as not a stream.
        { body: "x".repeat(2 * 1024 * 1024), headers: { "content-type": "text/plain" } },
        { body: "", headers: { "content-type": "" } },
      ]);
      const { provider, delays } = makeProvider(api, fake);
      const messages: unknown[] = [];
      for (let i = 0; i < 4; i++) {
        const events = await collect(provider.stream(request()));
        assert.equal(terminalCount(events), 1);
        assert.equal(textOf(events), "");
        const t = terminal(events) as { kind: string; retryable: boolean; message: string };
        assert.equal(t.kind, "protocol");
        assert.equal(t.retryable, false);
        messages.push(t.message);
        assertNoLeak(events);
      }
      assert.deepEqual(messages, [
        "provider did not answer with an event stream (HTML page)",
        "provider did not answer with an event stream (JSON body)",
        "provider did not answer with an event stream (plain text)",
        "provider did not answer with an event stream (no content type)",
      ]);
      assert.equal(delays.length, 0, "not retried");
      assert.equal(fake.requests.length, 4);
    });

    it("an event stream that ends before any event is still a dropped stream, retried", async () => {
      fake.script([{ body: "" }, { body: ": keep-alive\n\n" }, { steps: [{ text: "third time" }] }]);
      const { provider, delays } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.equal(textOf(events), "third time");
      assert.equal(delays.length, 2);
      assert.equal(fake.requests.length, 3);
    });

    it("an in-stream provider error before output", async () => {
      const code = api === "anthropic" ? "overloaded_error" : "server_error";
      fake.script([{ steps: [{ streamError: code }], end: false }, { steps: [{ text: "second" }] }]);
      const { provider, delays } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assertNoLeak(events);
      if (api === "openai-chat") {
        // A chat error object carries no reliable retry signal: not retried.
        assert.deepEqual(events, [{ type: "error", kind: "http", retryable: false, message: "provider reported an error (server_error)" }]);
      } else {
        assert.equal(textOf(events), "second");
        assert.equal(delays.length, 1);
      }
    });

    it("a malformed event stops the stream with a protocol error", async () => {
      fake.script([{ steps: [{ text: "a" }, { malformed: true }, { text: "b" }] }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.equal(textOf(events), "a");
      assert.deepEqual(terminal(events), { type: "error", kind: "protocol", retryable: false, message: "malformed provider stream" });
      assert.equal(terminalCount(events), 1);
    });

    it("a tool call with invalid JSON arguments fails the response and yields no call", async () => {
      fake.script([{ steps: [{ toolCall: { name: "ok", arguments: { a: 1 } } }, { toolCall: { name: "bad", arguments: '{"a":' } }] }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.equal(events.filter((e) => e.type === "tool_call").length, 0);
      assert.deepEqual(terminal(events), { type: "error", kind: "protocol", retryable: false, message: "tool arguments are not a JSON object" });
    });

    it("abort before the first byte: aborted error, socket closed, no retry", async () => {
      fake.script([{ waitForAbortBeforeHeaders: true }]);
      const { provider, delays } = makeProvider(api, fake);
      const ctl = new AbortController();
      const it = provider.stream(request({ signal: ctl.signal }))[Symbol.asyncIterator]();
      const first = it.next();
      const [rec] = await fake.waitForRequests(1);
      ctl.abort();
      const r = await first;
      assert.deepEqual(r.value, { type: "error", kind: "aborted", retryable: false, message: "request aborted" });
      assert.equal((await it.next()).done, true);
      await rec?.socketClosed;
      assert.equal(delays.length, 0);
    });

    it("abort mid-stream: aborted error after the text so far, socket closed", async () => {
      fake.script([{ steps: [{ text: "first" }, { waitForAbort: true }] }]);
      const { provider } = makeProvider(api, fake);
      const ctl = new AbortController();
      const events: ProviderEvent[] = [];
      for await (const ev of provider.stream(request({ signal: ctl.signal }))) {
        events.push(ev);
        if (ev.type === "text_delta") ctl.abort();
      }
      assert.equal(textOf(events), "first");
      assert.deepEqual(terminal(events), { type: "error", kind: "aborted", retryable: false, message: "request aborted" });
      assert.equal(terminalCount(events), 1);
      await fake.requests[0]?.socketClosed;
    });

    it("an already-aborted signal sends nothing", async () => {
      const ctl = new AbortController();
      ctl.abort();
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request({ signal: ctl.signal })));
      assert.deepEqual(events, [{ type: "error", kind: "aborted", retryable: false, message: "request aborted" }]);
      assert.equal(fake.requests.length, 0);
    });

    it("abort during a retry delay ends with aborted", async () => {
      fake.script([{ status: 503 }]);
      const ctl = new AbortController();
      const { provider } = makeProvider(api, fake, {
        retry: {
          sleep: (_ms, signal) => {
            ctl.abort();
            return signal.aborted ? Promise.reject(new Error("aborted")) : Promise.resolve();
          },
        },
      });
      const events = await collect(provider.stream(request({ signal: ctl.signal })));
      assert.deepEqual(events, [{ type: "error", kind: "aborted", retryable: false, message: "request aborted" }]);
      assert.equal(fake.requests.length, 1);
    });

    it("a consumer that stops iterating closes the socket", async () => {
      fake.script([{ steps: [{ text: "one" }, { waitForAbort: true }] }]);
      const { provider } = makeProvider(api, fake);
      for await (const ev of provider.stream(request())) {
        if (ev.type === "text_delta") break;
      }
      await fake.requests[0]?.socketClosed;
    });

    it("slow streams deliver every delta", async () => {
      fake.script([{ steps: [{ text: "abcdef", chunks: 6 }], chunkDelayMs: 2 }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.equal(events.filter((e) => e.type === "text_delta").length, 6);
      assert.equal(textOf(events), "abcdef");
    });
  });
}
