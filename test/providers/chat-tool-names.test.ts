/**
 * Chat Completions tool-call names: the first non-empty `function.name` of a call is its name (OpenAI sends it once,
 * whole; some compatible servers repeat it in later deltas), and a name over 1,024 UTF-8 bytes fails the response.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { ProviderEvent } from "../../src/runtime/types.js";
import { startFakeProvider, type FakeProvider, type FakeStep } from "../fakes/fake-provider.js";
import { collect, makeProvider, request, terminal } from "./helpers.js";

/** One Chat Completions chunk whose delta holds these tool-call deltas. */
const calls = (...tool_calls: Record<string, unknown>[]): FakeStep => ({
  sse: JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", choices: [{ index: 0, delta: { tool_calls }, finish_reason: null }] }),
});

const toolCalls = (events: ProviderEvent[]): ProviderEvent[] => events.filter((e) => e.type === "tool_call");

describe("openai-chat: tool-call names", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(async () => {
    await fake.close();
  });

  it("a name repeated in full in later deltas is the call's name once", async () => {
    fake.script([
      {
        steps: [
          calls({ index: 0, id: "call_1", type: "function", function: { name: "read", arguments: "" } }),
          calls({ index: 0, function: { name: "read", arguments: '{"path":' } }),
          calls({ index: 0, function: { name: "read", arguments: '"a.txt"}' } }),
          calls({ index: 1, id: "call_2", type: "function", function: { name: "", arguments: "" } }),
          calls({ index: 1, function: { name: "write", arguments: "{}" } }),
          calls({ index: 1, function: { name: "write" } }),
        ],
        stopReason: "tool_use",
      },
    ]);
    const { provider } = makeProvider("openai-chat", fake);
    const events = await collect(provider.stream(request()));
    assert.deepEqual(toolCalls(events), [
      { type: "tool_call", id: "call_1", name: "read", arguments: { path: "a.txt" } },
      { type: "tool_call", id: "call_2", name: "write", arguments: {} },
    ]);
    assert.deepEqual(terminal(events), { type: "done", stopReason: "tool_use" });
  });

  it("a name of 1,024 UTF-8 bytes passes", async () => {
    const name = "é".repeat(512);
    fake.script([{ steps: [calls({ index: 0, id: "call_1", type: "function", function: { name, arguments: "{}" } })], stopReason: "tool_use" }]);
    const { provider } = makeProvider("openai-chat", fake);
    const events = await collect(provider.stream(request()));
    assert.deepEqual(toolCalls(events), [{ type: "tool_call", id: "call_1", name, arguments: {} }]);
  });

  it("a name of 1,025 UTF-8 bytes fails the response, naming the bound, with no call", async () => {
    const name = `${"é".repeat(512)}a`;
    fake.script([{ steps: [calls({ index: 0, id: "call_1", type: "function", function: { name, arguments: "{}" } })], stopReason: "tool_use" }]);
    const { provider, delays } = makeProvider("openai-chat", fake);
    const events = await collect(provider.stream(request()));
    assert.deepEqual(toolCalls(events), []);
    assert.deepEqual(terminal(events), { type: "error", kind: "protocol", retryable: false, message: "provider sent a tool name longer than 1024 bytes" });
    assert.equal(delays.length, 0);
  });
});
