/**
 * A failure that came after a retried one carries `; N attempts` in its label (`… (HTTP 400 context_length_exceeded;
 * 2 attempts)`). Every consumer of labels still recognises its category: reactive compaction, the turn's failure
 * reason, and the fix a door appends.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import type { RuntimeEvent } from "../../src/runtime/events.js";
import { createProvider } from "../../src/runtime/providers/index.js";
import { terminalEvent } from "../../src/runtime/session/project.js";
import { runLoop, type LoopOptions } from "../../src/runtime/turn-loop.js";
import type { Message, ProviderEvent } from "../../src/runtime/types.js";
import { startFakeProvider, type FakeProvider, type FakeStep, type FakeTurn } from "../fakes/fake-provider.js";
import { loopOptions } from "./loop-options.js";

/** OpenAI's answer to a request over the window. */
const OVERFLOW: FakeTurn = {
  status: 400,
  body: JSON.stringify({ error: { message: "This model's maximum context length is 8192 tokens.", type: "invalid_request_error", code: "context_length_exceeded" } }),
};
/** A passing outage, retried: the failure after it says how many attempts were made. */
const OUTAGE: FakeTurn = { status: 503 };

const history = (): Message[] => [
  { role: "user", content: [{ type: "text", text: "EARLIER-QUESTION" }] },
  { role: "assistant", content: [{ type: "text", text: "EARLIER-ANSWER" }] },
  { role: "user", content: [{ type: "text", text: "NEW-PROMPT" }] },
];

/** Retries without waiting: the provider's own retry loop, its backoff sleeps resolved at once. */
const noWait = { retry: { sleep: (): Promise<void> => Promise.resolve() } };

function loop(fake: FakeProvider, events: RuntimeEvent[], over: Partial<LoopOptions> = {}): LoopOptions {
  const provider = createProvider("fake", { api: "openai-chat", baseUrl: `${fake.baseUrl}/v1` }, () => Promise.resolve(null), noWait);
  return loopOptions(fake, events, { provider, subagents: false, compactAtRatio: 0.8, messages: history(), ...over });
}

const statuses = (ev: RuntimeEvent[]): string[] => ev.flatMap((e) => (e.type === "compaction" ? [e.status] : []));

it("an overflow refused after a retried outage is still compacted and sent again; the turn completes", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([OUTAGE, OVERFLOW, { steps: [{ text: "SUMMARY" }] }, { steps: [{ text: "the answer" }] }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events));
    assert.equal(out.status, "completed", `${out.reason ?? ""} ${out.message ?? ""}`);
    assert.equal(out.assistantText, "the answer");
    assert.deepEqual(statuses(events), ["triggered", "running", "completed"]);
    assert.equal(fake.requests.length, 4);
  } finally {
    await fake.close();
  }
});

it("a retried overflow that cannot be compacted fails the turn as a context failure, its label kept whole", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([OUTAGE, OVERFLOW]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events, { compactAtRatio: null }));
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "compaction");
    assert.equal(out.message, "provider returned an error status (HTTP 400 context_length_exceeded; 2 attempts)");
  } finally {
    await fake.close();
  }
});

it("a tool-call limit hit after a retried outage is still a tool limit", async () => {
  const fake = await startFakeProvider();
  try {
    const calls: FakeStep[] = Array.from({ length: 33 }, (_, i) => ({ toolCall: { id: `c${i}`, name: "nope", arguments: {} } }));
    fake.script([OUTAGE, { steps: calls }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events));
    assert.equal(out.status, "failed");
    assert.equal(out.message, "more than 32 tool calls in one response (2 attempts)");
    assert.equal(out.reason, "tool_limit");
  } finally {
    await fake.close();
  }
});

it("a bare 404 after a retried connection reset still gets the base_url fix", async () => {
  const fake = await startFakeProvider();
  try {
    fake.script([{ resetBeforeHeaders: true }, { status: 404, body: "" }]);
    const provider = createProvider("fake", { api: "openai-chat", baseUrl: `${fake.baseUrl}/v1` }, () => Promise.resolve(null), noWait);
    const events: ProviderEvent[] = [];
    for await (const ev of provider.stream({ model: "m", system: "s", messages: history(), tools: [], signal: new AbortController().signal })) events.push(ev);
    const label = (events.at(-1) as { message: string }).message;
    assert.equal(label, "provider returned an error status (HTTP 404; 2 attempts)");
    const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 1 };
    const ev = terminalEvent({ sessionId: "s1", turnId: "t1" }, { status: "failed", assistantText: "", reason: "provider", message: label, usage }, undefined) as { message: string };
    assert.equal(
      ev.message,
      `the provider request failed: ${label}; check the provider's base_url in settings.json (OpenAI-compatible servers usually want it to end in /v1) and the model name`,
    );
  } finally {
    await fake.close();
  }
});
