/**
 * `visibleControls` (src/core/visible-controls.ts): what the web UI shows of a tool call or code block holds no
 * control a browser would obey (a bidi reordering) or hide (C0, C1), and is otherwise the same text.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { visibleControls } from "../../src/core/visible-controls.js";

it("shows bidi controls, C0 but tab and newline, DEL, C1 and line/paragraph separators as <U+XXXX>", () => {
  assert.equal(visibleControls("rm \u202e~ fr-\u202c \u2067x\u2069\u200e\u061c"), "rm <U+202E>~ fr-<U+202C> <U+2067>x<U+2069><U+200E><U+061C>");
  assert.equal(visibleControls("a\x1b[8mb\x00\x7f\u009b"), "a<U+001B>[8mb<U+0000><U+007F><U+009B>");
  assert.equal(visibleControls("p\u2028q\u2029"), "p<U+2028>q<U+2029>");
  assert.equal(visibleControls("a\tb\nc\vd\fe"), "a\tb\nc<U+000B>d<U+000C>e");
});

it("turns CRLF into LF and a lone CR into a line break (a progress line keeps every state)", () => {
  assert.equal(visibleControls("one\r\ntwo\r10%\r100%"), "one\ntwo\n10%\n100%");
});

it("returns text without controls unchanged, non-ASCII and RTL letters included, whatever ran before", () => {
  for (let i = 0; i < 2; i++) for (const s of ["", "plain", "naïve — 中文 😀 שלום مرحبا", "a\nb\tc"]) assert.equal(visibleControls(s), s);
});
