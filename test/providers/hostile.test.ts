/**
 * A provider that is hostile or broken after the answer is in: a bad usage object behind the tool calls, and a
 * server that keeps a stream alive with SSE comments but never sends an event. Each against the loopback fake.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { APIS, collect, makeProvider, request, terminal } from "./helpers.js";

for (const api of APIS) {
  describe(`${api}: hostile endings`, () => {
    let fake: FakeProvider;
    beforeEach(async () => {
      fake = await startFakeProvider();
    });
    afterEach(async () => {
      await fake.close();
    });

    it("a malformed usage after the tool calls fails the response without yielding any call", async () => {
      fake.script([{ steps: [{ toolCall: { name: "bash", arguments: { command: "rm -rf build" } } }], usage: { input: -1 } }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.deepEqual(terminal(events), { type: "error", kind: "protocol", retryable: false, message: "malformed provider stream" });
      assert.deepEqual(events.filter((e) => e.type === "tool_call"), [], "a call of a failed response was yielded");
    });
  });
}
