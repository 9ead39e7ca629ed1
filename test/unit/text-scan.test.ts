/**
 * The linear string scans of core/text-scan.ts: the same result as the regular expressions they replace (the
 * reference, below) for every short input over the characters that matter, and megabytes of a run that is not
 * followed by what those expressions needed (each rescanned the rest of the run: hours at these sizes) finish.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { randomStrings } from "../helpers/prng.js";
import { collapseBreaks, trimEndChars } from "../../src/core/text-scan.js";


it("trimEndChars is the end-anchored character-class replace", () => {
  for (const s of randomStrings(20_000, 12, " \ta!。\n", 5)) {
    assert.equal(trimEndChars(s, " \t"), s.replace(/[ \t]+$/, ""), JSON.stringify(s));
    assert.equal(trimEndChars(s, "!。"), s.replace(/[!。]+$/u, ""), JSON.stringify(s));
  }
  assert.equal(trimEndChars("", "x"), "");
  assert.equal(trimEndChars("xxx", "x"), "");
});

it("collapseBreaks is the whitespace-around-line-breaks replace", () => {
  for (const s of randomStrings(20_000, 12, " \t\n\r\u00a0ab", 9)) assert.equal(collapseBreaks(s), s.replace(/\s*\n\s*/g, " "), JSON.stringify(s));
});

it("both stay linear on megabytes of a run followed by something else", () => {
  const spaces = "a" + " \t".repeat(1_000_000) + "b";
  assert.equal(trimEndChars(spaces, " \t"), spaces);
  assert.equal(trimEndChars(spaces + "  ", " \t"), spaces);
  assert.equal(collapseBreaks(spaces + "\n"), spaces + " ");
  const bangs = "!".repeat(2_000_000) + "x";
  assert.equal(trimEndChars(bangs, "!"), bangs);
});
