/**
 * Usage counts a provider reports absurdly large (1e300) reach the runtime clamped to Number.MAX_SAFE_INTEGER: a
 * usage figure is not worth failing a turn over, but unclamped it flowed into session records and usage sums
 * (which could overflow to Infinity and serialise as null).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { APIS, collect, makeProvider, request, terminal } from "./helpers.js";

const MAX = Number.MAX_SAFE_INTEGER;

for (const api of APIS) {
  describe(`${api}: usage counts`, () => {
    let fake: FakeProvider;
    before(async () => {
      fake = await startFakeProvider();
    });
    after(async () => {
      await fake.close();
    });

    it("a count of 1e300 is clamped to MAX_SAFE_INTEGER, sums included", async () => {
      fake.script([{ steps: [{ text: "hi" }], usage: { input: 1e300, output: 1e300, cacheRead: 1e300, reasoning: 1e300 } }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.deepEqual(terminal(events), { type: "done", stopReason: "end" });
      const usage = events.find((e) => e.type === "usage");
      // Anthropic reports no reasoning count; its input is input + cache writes + cache reads, clamped as a sum.
      assert.deepEqual(usage, { type: "usage", inputTokens: MAX, outputTokens: MAX, cacheReadTokens: MAX, reasoningTokens: api === "anthropic" ? null : MAX });
    });

    it("a count at MAX_SAFE_INTEGER passes as is", async () => {
      fake.script([{ steps: [{ text: "hi" }], usage: { input: MAX, output: 3 } }]);
      const { provider } = makeProvider(api, fake);
      const usage = (await collect(provider.stream(request()))).find((e) => e.type === "usage");
      assert.equal(usage?.type === "usage" ? usage.inputTokens : -1, MAX);
      assert.equal(usage?.type === "usage" ? usage.outputTokens : -1, 3);
    });
  });
}
