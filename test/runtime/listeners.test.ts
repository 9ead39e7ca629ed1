/**
 * `ListenerSet.deliver`'s contract with one listener (its fast path) and with several: a throwing listener is skipped,
 * `false` or a promise resolving `false` refuses, a rejection refuses, anything else accepts.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { ListenerSet } from "../../src/runtime/session/listeners.js";
import type { SessionEvent, SessionListener } from "../../src/runtime/session/types.js";

const ev = { type: "assistant_delta", sessionId: "s", turnId: "t", text: "x" } as SessionEvent;

/** Each kind of answer a listener can give, and what a delivery to it alone comes to. */
const answers: Array<[string, () => ReturnType<SessionListener>, boolean]> = [
  ["undefined", () => undefined, true],
  ["true", () => true, true],
  ["false", () => false, false],
  ["throws", () => {
    throw new Error("boom");
  }, true],
  ["resolves void", () => Promise.resolve(), true],
  ["resolves true", () => Promise.resolve(true), true],
  ["resolves false", () => Promise.resolve(false), false],
  ["rejects", () => Promise.reject(new Error("no")), false],
];

it("one listener: every kind of answer accepts or refuses as the contract says", async () => {
  for (const [name, answer, expected] of answers) {
    const ls = new ListenerSet();
    ls.add(answer);
    assert.equal(await ls.deliver(ev), expected, name);
  }
});

it("several listeners, and back to one after unsubscribing, each called once in order", async () => {
  const calls: string[] = [];
  const ls = new ListenerSet();
  ls.add(() => void calls.push("a"));
  const offB = ls.add(() => (calls.push("b"), Promise.resolve(false)));
  assert.equal(await ls.deliver(ev), false, "a promise resolving false refuses");
  offB();
  assert.equal(await ls.deliver(ev), true);
  assert.deepEqual(calls, ["a", "b", "a"]);
  assert.deepEqual([...ls].length, 1);
  const none = new ListenerSet();
  const off = none.add(() => false);
  off();
  assert.equal(none.deliver(ev), true, "no listener accepts");
});

it("several listeners: every kind of answer combines with an accepting one; one removed mid-delivery is skipped", async () => {
  for (const [name, answer, expected] of answers) {
    const ls = new ListenerSet();
    ls.add(() => true);
    ls.add(answer);
    assert.equal(await ls.deliver(ev), expected, name);
  }
  const calls: string[] = [];
  const ls = new ListenerSet();
  let offB = (): void => undefined;
  ls.add(() => {
    calls.push("a");
    offB();
  });
  offB = ls.add(() => void calls.push("b"));
  ls.add(() => void calls.push("c"));
  assert.equal(ls.deliver(ev), true);
  assert.equal(ls.deliver(ev), true);
  assert.deepEqual(calls, ["a", "c", "a", "c"]);
});
