/** Runtime-level compaction: fitting the summary request to the window, and failed attempts that let the turn go on. */
import { it } from "node:test";
import assert from "node:assert/strict";
import { fitForSummary } from "../../src/runtime/compaction.js";
import { estimateTokens } from "../../src/runtime/context.js";
import type { RuntimeEvent } from "../../src/runtime/events.js";
import { builtinTools } from "../../src/runtime/tools/index.js";
import { runLoop, type LoopOptions } from "../../src/runtime/turn-loop.js";
import type { Message } from "../../src/runtime/types.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { loopOptions } from "./loop-options.js";

/** Loop options for compaction tests: compaction at 80 % of the window, no subagents. */
const loop = (fake: FakeProvider, events: RuntimeEvent[], over: Partial<LoopOptions>): LoopOptions =>
  loopOptions(fake, events, { subagents: false, compactAtRatio: 0.8, ...over });

const est = (m: Message[]): number => estimateTokens("", m, []);

it("fitForSummary cuts the largest texts in the middle until the request fits, without touching the input", () => {
  const big = "H".repeat(6000) + "M".repeat(20_000) + "T".repeat(6000);
  const request: Message[] = [
    { role: "user", content: [{ type: "text", text: "goal" }] },
    { role: "assistant", content: [{ type: "text", text: "a".repeat(9000) }, { type: "tool_call", id: "c", name: "read", arguments: {} }] },
    { role: "tool", toolCallId: "c", toolName: "read", content: big, isError: false },
    { role: "user", content: [{ type: "text", text: "s".repeat(5000) }] }, // the instruction: never cut
  ];
  const copy = structuredClone(request);
  assert.equal(fitForSummary(request, 1_000_000, est), request, "a request that fits is returned as is");
  const out = fitForSummary(request, 8000, est)!;
  assert.ok(est(out) <= 8000);
  assert.deepEqual(request, copy, "input untouched");
  const tool = out[2] as Extract<Message, { role: "tool" }>;
  assert.ok(tool.content.startsWith("H".repeat(6000)) && tool.content.endsWith("T".repeat(6000)) && tool.content.includes("characters omitted for the summary"));
  assert.equal(out[3], request[3]);
  assert.equal(out[1], request[1], "only what is needed is cut (the largest first)");
  // Nothing left to cut: null.
  assert.equal(fitForSummary(request, 1000, est), null);
  // A cut never splits a surrogate pair.
  const emoji: Message[] = [{ role: "tool", toolCallId: "c", toolName: "read", content: "a" + "😀".repeat(5000), isError: false }, request[3]!];
  const cut = (fitForSummary(emoji, 3000, est)![0] as Extract<Message, { role: "tool" }>).content;
  assert.ok(!/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(cut), "no lone surrogate");
});


const statuses = (ev: RuntimeEvent[]): string[] => ev.flatMap((e) => (e.type === "compaction" ? [e.status] : []));

it("a failed compaction while the context still fits lets the turn continue, and is not retried in the turn @req AS-TURN-37", async () => {
  const fake = await startFakeProvider();
  try {
    const o = loop(fake, [], {});
    const e0 = estimateTokens(o.system, o.messages, builtinTools().map((t) => t.spec));
    // Step 0 (≈ e0 ≈ 1,000) stays under 0.8·W; after 2,000 characters of answer, a call and its error result
    // (≈ 520 tokens) it is over 0.8·W, under 0.95·W (the summary request fits), and stays under W.
    const window = Math.round((e0 + 250) / 0.7);
    fake.script([
      { steps: [{ text: "x".repeat(2000) }, { toolCall: { id: "a", name: "nope", arguments: {} } }] },
      { status: 400 }, // the summary request fails
      { steps: [{ toolCall: { id: "b", name: "nope", arguments: {} } }] },
      { steps: [{ text: "end" }] },
    ]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events, { contextWindow: window }));
    assert.equal(out.status, "completed");
    assert.deepEqual(statuses(events), ["triggered", "running", "failed"]);
    assert.equal(fake.requests.length, 4, "no second compaction attempt");
    assert.ok(fake.requests[1]!.body.includes("Summarize the conversation"));

    // At turn start (earlier history over the threshold), a failed attempt under the window continues too.
    const history: Message[] = [
      { role: "user", content: [{ type: "text", text: "earlier" }] },
      { role: "assistant", content: [{ type: "text", text: "y".repeat(4000) }] },
      { role: "user", content: [{ type: "text", text: "go" }] },
    ];
    fake.script([{ status: 400 }, { steps: [{ text: "fine" }] }]);
    const ev2: RuntimeEvent[] = [];
    const start = estimateTokens("s", history, builtinTools().map((t) => t.spec));
    const out2 = await runLoop(loop(fake, ev2, { messages: history, contextWindow: Math.round(start / 0.85) }));
    assert.equal(out2.status, "completed");
    assert.equal(out2.assistantText, "fine");
    assert.deepEqual(statuses(ev2), ["triggered", "running", "failed"]);
  } finally {
    await fake.close();
  }
});

it("fast mode reaches every request of the turn, the compaction summary included @req AS-CFG-TURN-02", async () => {
  const fake = await startFakeProvider();
  try {
    const o = loop(fake, [], { fast: true });
    const e0 = estimateTokens(o.system, o.messages, builtinTools().map((t) => t.spec));
    fake.script([
      { steps: [{ text: "x".repeat(2000) }, { toolCall: { id: "a", name: "nope", arguments: {} } }] },
      { steps: [{ text: "the summary" }] },
      { steps: [{ text: "end" }] },
    ]);
    const out = await runLoop(loop(fake, [], { fast: true, contextWindow: Math.round((e0 + 250) / 0.7) }));
    assert.equal(out.status, "completed");
    assert.equal(fake.requests.length, 3);
    assert.ok(fake.requests[1]!.body.includes("Summarize the conversation"));
    for (const r of fake.requests) assert.equal((r.json as { service_tier?: string }).service_tier, "priority");
  } finally {
    await fake.close();
  }
});

it("a compaction whose summary request fails, with the context over the window, ends the turn with that failure", async () => {
  const fake = await startFakeProvider();
  try {
    const history: Message[] = [
      { role: "user", content: [{ type: "text", text: "earlier" }] },
      { role: "assistant", content: [{ type: "text", text: "y".repeat(4000) }] },
      { role: "user", content: [{ type: "text", text: "go" }] },
    ];
    const start = estimateTokens("s", history, builtinTools().map((t) => t.spec));
    // Over the window at turn start: compaction is the only way on, and the provider refuses the summary request.
    fake.script([{ status: 401 }]);
    const events: RuntimeEvent[] = [];
    const out = await runLoop(loop(fake, events, { messages: history, contextWindow: Math.round(start / 1.05) }));
    assert.deepEqual(statuses(events), ["triggered", "running", "failed"]);
    assert.equal(fake.requests.length, 1);
    // Not "no longer fits even after compaction" (no compaction happened): the summary request's own failure.
    assert.equal(out.status, "failed");
    assert.equal(out.reason, "credential");
    assert.equal(out.message, "provider rejected the credential (HTTP 401 fake_error)");
  } finally {
    await fake.close();
  }
});
