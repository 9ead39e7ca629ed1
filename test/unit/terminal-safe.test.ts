/**
 * `terminalSafe` (src/cli/terminal-safe.ts): terminal controls in text from outside are shown, not obeyed.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { terminalSafe } from "../../src/cli/terminal-safe.js";

it("shows escape sequences, C0, DEL, C1 and bidi controls; drops carriage returns; keeps tabs", () => {
  assert.equal(terminalSafe("a\x1b[2Kb"), "a^[[2Kb");
  assert.equal(terminalSafe("x\x00y\x07z\x7f"), "x^@y^Gz^?");
  assert.equal(terminalSafe("csi\u009b31m"), "csi<U+009B>31m");
  assert.equal(terminalSafe("abc\u202edef\u2066\u200f"), "abc<U+202E>def<U+2066><U+200F>");
  assert.equal(terminalSafe("line\r\nnext\rover"), "line\nnextover");
  assert.equal(terminalSafe("a\tb"), "a\tb");
});

it("keeps newlines in multi-line text and shows them in one-line text", () => {
  assert.equal(terminalSafe("one\ntwo"), "one\ntwo");
  assert.equal(terminalSafe("one\ntwo", false), "one^Jtwo");
  assert.equal(terminalSafe("tab\there", false), "tab\there");
});

it("returns text without controls unchanged (the same string), non-ASCII included", () => {
  for (const s of ["", "plain", "naïve — 中文 😀", "a\nb"]) assert.equal(terminalSafe(s), s);
  // Repeated calls do not depend on a regex's lastIndex.
  for (let i = 0; i < 3; i++) assert.equal(terminalSafe("q\x1bw"), "q^[w");
});
