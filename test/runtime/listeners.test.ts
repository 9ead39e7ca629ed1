/** `ListenerSet.deliver` keeps `deliver`'s contract with one listener (its fast path) and with several. */
import { it } from "node:test";
import assert from "node:assert/strict";
import { ListenerSet, deliver } from "../../src/runtime/session/listeners.js";
import type { SessionEvent, SessionListener } from "../../src/runtime/session/types.js";

const ev = { type: "assistant_delta", sessionId: "s", turnId: "t", text: "x" } as SessionEvent;

const answers: Array<[string, () => ReturnType<SessionListener>]> = [
  ["undefined", () => undefined],
  ["true", () => true],
  ["false", () => false],
  ["throws", () => {
    throw new Error("boom");
  }],
  ["resolves void", () => Promise.resolve()],
  ["resolves true", () => Promise.resolve(true)],
  ["resolves false", () => Promise.resolve(false)],
  ["rejects", () => Promise.reject(new Error("no"))],
];

it("one listener: the same answer as deliver over a plain set, for every kind of answer", async () => {
  for (const [name, answer] of answers) {
    const ls = new ListenerSet();
    ls.add(answer);
    assert.equal(await ls.deliver(ev), await deliver(new Set([answer]), ev), name);
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

it("several listeners: every kind of answer combines as deliver combines it; one removed mid-delivery is skipped", async () => {
  for (const [name, answer] of answers) {
    const ls = new ListenerSet();
    ls.add(() => true);
    ls.add(answer);
    assert.equal(await ls.deliver(ev), await deliver(new Set<SessionListener>([() => true, answer]), ev), name);
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
