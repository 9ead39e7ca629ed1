/**
 * `onceHandled` (src/runtime/after-first-event.ts), the layer that starts deferred MCP servers after a turn's first
 * provider event: items pass through unchanged; `then` runs exactly once, when the item after the first counted one is
 * asked for, or when the stream ends, fails or is closed first; the source is closed with it.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { onceHandled } from "../../src/runtime/after-first-event.js";

/** A source of `items` (then a throw when `fail`) that records how far it was read and whether it was closed. */
function source(items: number[], fail = false): { it: AsyncIterable<number>; log: string[] } {
  const log: string[] = [];
  async function* gen(): AsyncGenerator<number, void, undefined> {
    try {
      for (const x of items) {
        log.push(`yield ${x}`);
        yield await Promise.resolve(x);
      }
      if (fail) throw new Error("boom");
    } finally {
      log.push("closed");
    }
  }
  return { it: gen(), log };
}

it("items pass through; then runs once, when the item after the first counted one is asked for", async () => {
  const s = source([0, 0, 5, 6, 7]);
  let fired = 0;
  const seen: number[] = [];
  const firedWhen: number[] = [];
  for await (const x of onceHandled(s.it, (x) => x > 0, () => fired++)) {
    firedWhen.push(fired);
    seen.push(x);
  }
  assert.deepEqual(seen, [0, 0, 5, 6, 7]);
  // Not while the empty items and the first counted one (5) were handled; by the time 6 was.
  assert.deepEqual(firedWhen, [0, 0, 0, 1, 1]);
  assert.equal(fired, 1);
  assert.equal(s.log.at(-1), "closed");
});

it("a stream that ends, fails or is closed before a counted item was handed on runs then once", async () => {
  let fired = 0;
  for await (const x of onceHandled(source([0, 0]).it, (x) => x > 0, () => fired++)) assert.equal(x, 0);
  assert.equal(fired, 1, "ended");

  fired = 0;
  const failing = source([0], true);
  await assert.rejects(async () => {
    for await (const x of onceHandled(failing.it, (x) => x > 0, () => fired++)) assert.equal(x, 0);
  }, /boom/);
  assert.equal(fired, 1, "failed");

  fired = 0;
  const closed = source([0, 1, 2]);
  for await (const x of onceHandled(closed.it, (x) => x > 0, () => fired++)) if (x === 0) break;
  assert.equal(fired, 1, "closed before");
  assert.deepEqual(closed.log, ["yield 0", "closed"]);
});

it("closing right after the first counted item runs then once and closes the source", async () => {
  let fired = 0;
  const s = source([3, 4]);
  for await (const x of onceHandled(s.it, (x) => x > 0, () => fired++)) if (x === 3) break;
  assert.equal(fired, 1);
  assert.deepEqual(s.log, ["yield 3", "closed"]);

  fired = 0;
  const later = source([3, 4, 5]);
  for await (const x of onceHandled(later.it, (x) => x > 0, () => fired++)) if (x === 4) break;
  assert.equal(fired, 1, "closed after then ran");
  assert.deepEqual(later.log, ["yield 3", "yield 4", "closed"]);
});
