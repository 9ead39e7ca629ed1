/**
 * The turn's durability gate (src/runtime/durable-gate.ts): nothing reaches the sink before the user record is
 * durable; what was held is delivered in order before any delta; a callback registered on the same durability promise
 * after the gate was built (the provider request's last byte: `ProviderRequest.gate`) runs before the held events are
 * delivered; after a failed record everything is dropped.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { gatedSink } from "../../src/runtime/durable-gate.js";
import type { RuntimeEvent, TurnSink } from "../../src/runtime/events.js";

function recorder(): { sink: TurnSink; log: string[] } {
  const log: string[] = [];
  return {
    log,
    sink: {
      delta: (text) => {
        log.push(`delta ${text}`);
        return true;
      },
      event: (e) => void log.push(`event ${e.type}`),
    },
  };
}

const context: RuntimeEvent = { type: "context", currentTokens: 1, maxTokens: 10, reasoningTokens: null, requestSequence: 1, source: "fallback_estimate" };

test("held events follow the request's gate callback and precede every delta; later output passes straight through", async () => {
  let open!: () => void;
  const durable = new Promise<void>((r) => (open = r));
  const { sink, log } = recorder();
  const gated = gatedSink(sink, durable);
  gated.event(context);
  // Registered after the gate was built, as the provider request's last byte is.
  void durable.then(() => log.push("request complete"));
  const early = gated.delta("a");
  assert.deepEqual(log, [], "nothing reaches the sink before the record is durable");
  open();
  assert.equal(await early, true);
  assert.equal(gated.delta("b"), true);
  gated.event(context);
  assert.deepEqual(log, ["request complete", "event context", "delta a", "delta b", "event context"]);
});

test("after a failed record nothing is delivered and deltas are refused", async () => {
  let fail!: (e: Error) => void;
  const durable = new Promise<void>((_, r) => (fail = r));
  const { sink, log } = recorder();
  const gated = gatedSink(sink, durable);
  gated.event(context);
  const early = gated.delta("a");
  fail(new Error("fsync failed"));
  assert.equal(await early, false);
  gated.event(context);
  assert.equal(gated.delta("b"), false);
  assert.deepEqual(log, []);
});
