/** Default `runLoop` options for runtime tests: the loopback fake over Chat Completions, built-in tools, no recorder. */
import type { RuntimeEvent } from "../../src/runtime/events.js";
import { createProvider } from "../../src/runtime/providers/index.js";
import { builtinTools } from "../../src/runtime/tools/index.js";
import type { LoopOptions } from "../../src/runtime/turn-loop.js";
import type { FakeProvider } from "../fakes/fake-provider.js";

export function loopOptions(fake: FakeProvider, events: RuntimeEvent[], over: Partial<LoopOptions> = {}): LoopOptions {
  let n = 0;
  return {
    turnId: "t1",
    provider: createProvider("fake", { api: "openai-chat", baseUrl: `${fake.baseUrl}/v1` }, () => Promise.resolve(null)),
    model: "m",
    system: "s",
    messages: [{ role: "user", content: [{ type: "text", text: "go" }] }],
    tools: builtinTools(),
    subagents: true,
    cwd: process.cwd(),
    signal: new AbortController().signal,
    sink: { delta: () => true, event: (e) => void events.push(e) },
    recorder: null,
    maxSteps: 8,
    contextWindow: 100_000,
    compactAtRatio: null,
    newId: () => `id${++n}`,
    ...over,
  };
}
