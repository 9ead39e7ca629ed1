/**
 * Usage summed over a turn's requests (and a request's input plus its cache reads, and a subagent's aggregate) stays
 * an exact integer: each provider count is clamped to Number.MAX_SAFE_INTEGER alone (providers/accumulate.ts), and
 * every sum of them is clamped too, so what a client sees (the turn's terminal usage, its usage and context
 * activity) never holds an inexact 2^53 or more, nor Infinity (serialised as null).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { RuntimeEvent } from "../../src/runtime/events.js";
import { terminalEvent } from "../../src/runtime/session/project.js";
import { runLoop } from "../../src/runtime/turn-loop.js";
import { startFakeProvider, type FakeProvider, type FakeTurn } from "../fakes/fake-provider.js";
import { loopOptions } from "./loop-options.js";

const MAX = Number.MAX_SAFE_INTEGER;

/** A turn of two requests (a tool call, then the answer) reporting `first` then `second` as each count. */
function twoRequests(first: number, second: number): FakeTurn[] {
  return [
    { steps: [{ toolCall: { id: "a", name: "ls", arguments: {} } }], usage: { input: first, output: first, cacheRead: first } },
    { steps: [{ text: "end" }], usage: { input: second, output: second, cacheRead: second } },
  ];
}

/** The turn's usage as its terminal event carries it to a client (JSON), and the turn's events. */
async function turnUsage(fake: FakeProvider, turns: FakeTurn[]): Promise<{ usage: Record<string, number>; events: RuntimeEvent[] }> {
  fake.script(turns);
  const events: RuntimeEvent[] = [];
  const out = await runLoop(loopOptions(fake, events, { approval: { policy: () => "auto", ask: () => Promise.resolve("approve") } }));
  assert.equal(out.status, "completed");
  const wire = JSON.parse(JSON.stringify(terminalEvent({ sessionId: "s1", turnId: "t1" }, out, undefined))) as { usage: Record<string, number> };
  return { usage: wire.usage, events };
}

describe("usage totals over a turn's requests", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(async () => {
    await fake.close();
  });

  it("a sum reaching MAX_SAFE_INTEGER exactly is kept as is", async () => {
    const { usage } = await turnUsage(fake, twoRequests(MAX - 1, 1));
    assert.deepEqual(usage, { inputTokens: MAX, outputTokens: MAX, cacheReadTokens: MAX, requests: 2 });
  });

  it("a sum one past MAX_SAFE_INTEGER is clamped to it, an exact integer", async () => {
    const { usage } = await turnUsage(fake, twoRequests(MAX - 1, 2));
    assert.deepEqual(usage, { inputTokens: MAX, outputTokens: MAX, cacheReadTokens: MAX, requests: 2 });
    for (const v of Object.values(usage)) assert.ok(Number.isSafeInteger(v), `${v} is exact`);
  });

  it("sums of the largest counts over many requests stay at MAX_SAFE_INTEGER", async () => {
    const turns: FakeTurn[] = [];
    for (let i = 0; i < 4; i++) turns.push({ steps: [{ toolCall: { id: `c${i}`, name: "ls", arguments: {} } }], usage: { input: MAX, output: MAX, cacheRead: MAX } });
    turns.push({ steps: [{ text: "end" }], usage: { input: MAX, output: MAX, cacheRead: MAX } });
    const { usage } = await turnUsage(fake, turns);
    assert.deepEqual(usage, { inputTokens: MAX, outputTokens: MAX, cacheReadTokens: MAX, requests: 5 });
  });

  it("a request's input plus its cache reads, and its context size, are clamped too", async () => {
    const { events } = await turnUsage(fake, [{ steps: [{ text: "end" }], usage: { input: MAX, output: MAX, cacheRead: MAX } }]);
    const usage = events.find((e) => e.type === "usage");
    const context = events.find((e) => e.type === "context" && e.source === "provider_exact");
    assert.equal(usage?.type === "usage" ? usage.effectiveInput : -1, MAX);
    assert.equal(context?.type === "context" ? context.currentTokens : -1, MAX);
  });

  it("a subagent's aggregate usage (input plus cache reads) is clamped", async () => {
    fake.script([
      { steps: [{ toolCall: { id: "t", name: "task", arguments: { description: "look", prompt: "look around" } } }] },
      { steps: [{ text: "child done" }], usage: { input: MAX, output: 1, cacheRead: MAX } },
      { steps: [{ text: "end" }] },
    ]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loopOptions(fake, events, { approval: { policy: () => "auto", ask: () => Promise.resolve("approve") } }));
    assert.equal(out.status, "completed");
    const aggregate = events.find((e) => e.type === "usage" && e.source === "subagent_aggregate");
    assert.equal(aggregate?.type === "usage" ? aggregate.effectiveInput : -1, MAX);
  });
});
