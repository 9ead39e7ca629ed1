/**
 * Reactive compaction against each dialect's real wire: an in-stream refusal as over the window (in the shape its
 * servers send), one that comes after only usage or keep-alive events, and a request refused as too large in bytes
 * (HTTP 413), or over the window by Gemini's OpenAI-compatible endpoint (HTTP 400, a JSON array body), are each compacted
 * once and sent again; the turn completes.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import type { RuntimeEvent } from "../../src/runtime/events.js";
import { createProvider } from "../../src/runtime/providers/index.js";
import type { LoopOptions } from "../../src/runtime/turn-loop.js";
import { runLoop } from "../../src/runtime/turn-loop.js";
import type { Message, ProviderApi } from "../../src/runtime/types.js";
import { ERROR_BODY_SECRET, startFakeProvider, type FakeProvider, type FakeStep, type FakeTurn } from "../fakes/fake-provider.js";
import { loopOptions } from "./loop-options.js";

const APIS: ProviderApi[] = ["anthropic", "openai-responses", "openai-chat"];

/** Each dialect's in-stream refusal of a request over the window, as its servers send it. */
const OVERFLOW: Record<ProviderApi, FakeStep> = {
  anthropic: { sse: JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: `prompt is too long: 210000 tokens > 200000 maximum ${ERROR_BODY_SECRET}` } }), event: "error" },
  "openai-responses": { sse: JSON.stringify({ type: "response.failed", response: { id: "r", status: "failed", error: { code: "context_length_exceeded", message: ERROR_BODY_SECRET } } }), event: "response.failed" },
  "openai-chat": { sse: JSON.stringify({ error: { object: "error", message: `This model's maximum context length is 4096 tokens. ${ERROR_BODY_SECRET}`, type: "BadRequestError", param: null, code: 400 } }) },
};

/**
 * What a server may send before refusing, none of it output: an SSE comment (a proxy's keep-alive) and the dialect's
 * usage or keep-alive event (Anthropic's `message_start` with its usage is always sent first by the fake).
 */
const BEFORE: Record<ProviderApi, FakeStep[]> = {
  anthropic: [{ raw: ": keep-alive\n\n" }, { sse: JSON.stringify({ type: "ping" }), event: "ping" }],
  "openai-responses": [{ raw: ": keep-alive\n\n" }, { sse: JSON.stringify({ type: "response.in_progress", response: { id: "r", status: "in_progress" } }), event: "response.in_progress" }],
  "openai-chat": [{ raw: ": keep-alive\n\n" }, { sse: JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 9000, completion_tokens: 0, total_tokens: 9000 } }) }],
};

const history = (): Message[] => [
  { role: "user", content: [{ type: "text", text: "EARLIER-QUESTION" }] },
  { role: "assistant", content: [{ type: "text", text: "EARLIER-ANSWER" }] },
  { role: "user", content: [{ type: "text", text: "NEW-PROMPT" }] },
];

function loop(fake: FakeProvider, api: ProviderApi, events: RuntimeEvent[], over: Partial<LoopOptions> = {}, attempts?: number): LoopOptions {
  const retry = attempts !== undefined ? { retry: { maxAttempts: attempts } } : {};
  const provider = createProvider("fake", { api, baseUrl: api === "anthropic" ? fake.baseUrl : `${fake.baseUrl}/v1` }, () => Promise.resolve(null), retry);
  return loopOptions(fake, events, { provider, subagents: false, compactAtRatio: 0.8, messages: history(), ...over });
}

const statuses = (ev: RuntimeEvent[]): string[] => ev.flatMap((e) => (e.type === "compaction" ? [e.status] : []));

/** Runs a turn against `script`; asserts it compacted once, retried with the summary and completed. */
async function assertCompactedAndRetried(api: ProviderApi, refusal: FakeTurn): Promise<void> {
  const fake = await startFakeProvider();
  try {
    fake.script([refusal, { steps: [{ text: "SUMMARY-OF-EARLIER" }] }, { steps: [{ text: "the answer" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, api, events));
    assert.equal(out.status, "completed", `${api}: ${out.reason ?? ""} ${out.message ?? ""}`);
    assert.equal(out.assistantText, "the answer");
    assert.deepEqual(statuses(events), ["triggered", "running", "completed"]);
    assert.equal(fake.requests.length, 3);
    const retry = fake.requests[2]!.body;
    assert.ok(retry.includes("SUMMARY-OF-EARLIER") && retry.includes("NEW-PROMPT") && !retry.includes("EARLIER-ANSWER"), "the retry carries the compacted context");
    assert.ok(!JSON.stringify(events).includes(ERROR_BODY_SECRET), "provider message leaked");
  } finally {
    await fake.close();
  }
}

for (const api of APIS) {
  it(`${api}: an in-stream refusal as over the window before any output is compacted and sent again`, async () => {
    await assertCompactedAndRetried(api, { steps: [OVERFLOW[api]], end: false });
  });

  it(`${api}: a refusal after only usage and keep-alive events still comes before any output`, async () => {
    await assertCompactedAndRetried(api, { steps: [...BEFORE[api], OVERFLOW[api]], end: false });
  });
}

it("HTTP 413 (Anthropic's request_too_large, or a proxy's bare 413) is compacted and sent again once", async () => {
  const anthropic = JSON.stringify({ type: "error", error: { type: "request_too_large", message: `Request exceeds the maximum allowed number of bytes. ${ERROR_BODY_SECRET}` } });
  await assertCompactedAndRetried("anthropic", { status: 413, body: anthropic });
  const page = `<html><head><title>413 Request Entity Too Large</title></head><body>${ERROR_BODY_SECRET}</body></html>`;
  await assertCompactedAndRetried("openai-chat", { status: 413, body: page, headers: { "content-type": "text/html" } });
});

it("Gemini's OpenAI-compatible endpoint: a 400 whose JSON array body counts more input tokens than allowed is compacted and sent again", async () => {
  // The shape generativelanguage.googleapis.com/v1beta/openai answers with: an array of one Google error.
  const message = `The input token count (1200293) exceeds the maximum number of tokens allowed (1048576). ${ERROR_BODY_SECRET}`;
  const gemini = JSON.stringify([{ error: { code: 400, message, status: "INVALID_ARGUMENT" } }]);
  await assertCompactedAndRetried("openai-chat", { status: 400, body: gemini });
});

it("a 413 on the retry too ends the turn failed naming the size refusal, not the context window", async () => {
  const fake = await startFakeProvider();
  try {
    const tooLarge: FakeTurn = { status: 413, body: JSON.stringify({ type: "error", error: { type: "request_too_large", message: ERROR_BODY_SECRET } }) };
    fake.script([tooLarge, { steps: [{ text: "S" }] }, tooLarge, { steps: [{ text: "never" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, "anthropic", events));
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "provider");
    assert.equal(out.message, "provider refused the request as too large (HTTP 413 request_too_large)");
    assert.deepEqual(statuses(events), ["triggered", "running", "completed"]);
    assert.equal(fake.requests.length, 3, "one reactive attempt per turn");
  } finally {
    await fake.close();
  }
});

it("a 429 whose body speaks of too many tokens per minute takes the rate-limit path: no compaction, the turn fails naming the limit", async () => {
  const fake = await startFakeProvider();
  try {
    const tpm = { status: 429, body: JSON.stringify({ type: "error", error: { type: "rate_limit_error", message: `Too many tokens per minute. ${ERROR_BODY_SECRET}` } }) };
    fake.script([tpm, { steps: [{ text: "S" }] }, { steps: [{ text: "never" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, "anthropic", events, {}, 1));
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "provider");
    assert.equal(out.message, "provider rate limit (HTTP 429 rate_limit_error)");
    assert.deepEqual(statuses(events), [], "no compaction");
    assert.equal(fake.requests.length, 1);
  } finally {
    await fake.close();
  }
});
