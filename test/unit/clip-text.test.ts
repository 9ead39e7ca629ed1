/**
 * clipText (core/clip-text.ts): the head and tail the web UI's tool cards show of a long text, and the count of what
 * was left out. Limits at the limit and one past; cuts at line breaks and, without one, off surrogate pairs.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { clipText, cutNote } from "../../src/core/clip-text.js";

test("text of head + tail units comes back whole; one more is cut", () => {
  const at = "x".repeat(20);
  assert.deepEqual(clipText(at, 10, 10), { head: at, tail: "" });
  const past = clipText("x".repeat(21), 10, 10);
  assert.equal(past.head.length + past.tail.length, 20);
  assert.deepEqual(past.cut, { chars: 1 });
  assert.equal(cutNote(past.cut), "1 character not shown");
});

test("lines: the cut-out middle is whole lines, counted", () => {
  const lines = Array.from({ length: 1000 }, (_, i) => `line ${i}`);
  const text = lines.join("\n") + "\n";
  const c = clipText(text, 200, 200);
  assert.ok(c.head.length <= 200 && c.tail.length <= 200);
  assert.ok(c.head.endsWith("\n") && c.head.startsWith("line 0\n"));
  assert.ok(c.tail.endsWith("line 999\n") && /^line \d+\n/.test(c.tail));
  const shown = (c.head + c.tail).split("\n").length - 1;
  assert.equal(c.cut?.lines, 1000 - shown);
  assert.equal(c.head + text.slice(c.head.length, text.length - c.tail.length) + c.tail, text);
  assert.equal(c.cut?.chars, text.length - c.head.length - c.tail.length);
  assert.equal(cutNote({ lines: 24_512, chars: 1 }), "24,512 lines not shown");
  assert.equal(cutNote({ lines: 1, chars: 1 }), "1 line not shown");
});

test("one long line (minified JSON) is cut by characters, never inside a surrogate pair", () => {
  const text = "😀".repeat(100); // 200 UTF-16 units
  const c = clipText(text, 11, 11);
  assert.ok(!/[\ud800-\udbff]$/.test(c.head) && !/^[\udc00-\udfff]/.test(c.tail), JSON.stringify([c.head, c.tail]));
  assert.equal(c.head.length, 10);
  assert.equal(c.tail.length, 10);
  assert.equal(c.cut?.lines, undefined);
  assert.equal(cutNote(c.cut!), "180 characters not shown");
});
