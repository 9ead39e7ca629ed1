/**
 * The five read bounds, for each provider, at exactly the limit (passes) and one byte / one call
 * past it (fails with `limit`, cancels the body, yields no tool_call at all).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { PROVIDER_BOUNDS, type ProviderEvent } from "../../src/runtime/types.js";
import { startFakeProvider, type FakeProvider, type FakeStep, type FakeTurn } from "../fakes/fake-provider.js";
import { APIS, collect, makeProvider, request, terminal, terminalCount, textOf } from "./helpers.js";

const B = PROVIDER_BOUNDS;

/** A JSON object text of exactly `bytes` UTF-8 bytes. */
function argsOfBytes(bytes: number): string {
  return `{"x":"${"a".repeat(bytes - 8)}"}`;
}

function calls(events: ProviderEvent[]): number {
  return events.filter((e) => e.type === "tool_call").length;
}

interface Case {
  name: string;
  at: FakeTurn;
  past: FakeTurn;
  label: string;
  checkAt(events: ProviderEvent[]): void;
}

const smallCall: FakeStep = { toolCall: { name: "first", arguments: { ok: true } } };

const cases: Case[] = [
  {
    name: "SSE event 1 MiB",
    at: { steps: [{ sizedText: B.maxSseEventBytes }] },
    past: { steps: [smallCall, { sizedText: B.maxSseEventBytes + 1 }] },
    label: "one event of the provider's stream exceeds 1 MiB",
    checkAt: (ev) => assert.ok(textOf(ev).length > B.maxSseEventBytes - 300),
  },
  {
    name: "whole response 4 MiB",
    at: { steps: [{ text: "hi" }], totalBytes: B.maxResponseBytes },
    past: { steps: [smallCall, { text: "hi" }], totalBytes: B.maxResponseBytes + 1 },
    label: "provider response exceeds 4 MiB",
    checkAt: (ev) => assert.equal(textOf(ev), "hi"),
  },
  {
    name: "assistant text 1 MiB (UTF-8 bytes)",
    at: { steps: [{ text: "é".repeat(B.maxAssistantTextBytes / 2), chunks: 16 }], compactDone: true },
    past: { steps: [smallCall, { text: `${"é".repeat(B.maxAssistantTextBytes / 2)}a`, chunks: 16 }], compactDone: true },
    label: "assistant text exceeds 1 MiB",
    checkAt: (ev) => assert.equal(Buffer.byteLength(textOf(ev)), B.maxAssistantTextBytes),
  },
  {
    name: "tool arguments 256 KiB",
    at: { steps: [{ toolCall: { name: "big", arguments: argsOfBytes(B.maxToolArgumentBytes), chunks: 8 } }] },
    past: { steps: [smallCall, { toolCall: { name: "big", arguments: argsOfBytes(B.maxToolArgumentBytes + 1), chunks: 8 } }] },
    label: "tool call arguments exceed 256 KiB",
    checkAt: (ev) => {
      const c = ev.find((e) => e.type === "tool_call");
      assert.equal(c?.type === "tool_call" ? (c.arguments["x"] as string).length : -1, B.maxToolArgumentBytes - 8);
    },
  },
  {
    name: "32 tool calls",
    at: { steps: Array.from({ length: B.maxToolCallsPerResponse }, (_, i) => ({ toolCall: { id: `c${i}`, name: "t", arguments: { i } } })) },
    past: { steps: Array.from({ length: B.maxToolCallsPerResponse + 1 }, (_, i) => ({ toolCall: { id: `c${i}`, name: "t", arguments: { i } } })) },
    label: "more than 32 tool calls in one response",
    checkAt: (ev) => assert.equal(calls(ev), B.maxToolCallsPerResponse),
  },
];

for (const api of APIS) {
  describe(`${api} read bounds`, () => {
    let fake: FakeProvider;
    before(async () => {
      fake = await startFakeProvider();
    });
    after(async () => {
      await fake.close();
    });

    for (const c of cases) {
      it(`${c.name}: exactly at the limit passes`, async () => {
        fake.script([c.at]);
        const { provider } = makeProvider(api, fake);
        const events = await collect(provider.stream(request()));
        assert.equal(terminal(events)?.type, "done", JSON.stringify(terminal(events)));
        assert.equal(terminalCount(events), 1);
        c.checkAt(events);
      });

      it(`${c.name}: one past fails with limit, cancels the body, yields no tool call`, async () => {
        const before = fake.requests.length;
        fake.script([c.past]);
        const { provider, delays } = makeProvider(api, fake);
        const events = await collect(provider.stream(request()));
        assert.deepEqual(terminal(events), { type: "error", kind: "limit", retryable: false, message: c.label });
        assert.equal(terminalCount(events), 1);
        assert.equal(calls(events), 0);
        assert.equal(delays.length, 0);
        assert.equal(fake.requests.length, before + 1);
        await fake.requests[before]?.socketClosed;
      });
    }
  });
}
