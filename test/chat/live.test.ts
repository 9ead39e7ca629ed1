/**
 * The streaming answer's unfinished line (live.ts) through the chat's screen (screen.ts), read back through a virtual
 * terminal (xterm.js): what a user sees on screen and in the scrollback while a long line streams and once it
 * completes, and the bytes each delta writes. A line taller than the screen shows its last rows only (the first ones
 * leave the screen without entering the scrollback), so the finished line is in the transcript exactly once; each
 * delta writes its own characters and row breaks, never the whole line again.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { rowsOf } from "../../src/cli/chat/live.js";
import { liveAnswerOn } from "./live-rig.js";
import { VTerm } from "./vterm.js";

/** Bytes a delta may write besides its own: a row break that deletes the top row (`\r ESC[nA ESC[M ESC[nB`). */
const ROW_BREAK_BYTES = 16;

/** The chat's screen and a live answer on a terminal of `cols`×`rows` with the footer pinned (as in a chat). */
function chatTerm(cols: number, rows: number) {
  const { out, screen, answer, bytes: written } = liveAnswerOn(cols, rows);
  screen.startFooter(() => "FOOTER");
  screen.live = () => answer.redrawn();
  const vt = new VTerm(cols, rows);
  /**
   * Streams the deltas; returns the most bytes a delta that completes no line wrote beyond its own (tabs counted as
   * the 8 spaces they may become). A delta that completes a line also writes the line rendered, once.
   */
  const stream = (deltas: string[]): number => {
    let most = 0;
    for (const d of deltas) {
      const before = written();
      answer.stream(d);
      if (!d.includes("\n")) most = Math.max(most, written() - before - Buffer.byteLength(d.replace(/\t/g, " ".repeat(8))));
    }
    return most;
  };
  return { out, screen, answer, vt, stream, bytes: written };
}

const words = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `w${from + i} `);
const squeeze = (s: string): string => s.replace(/\s/g, "");
/** The rows the unfinished line should show: the last `n` of its layout at `width`. */
const tail = (text: string, width: number, n: number): string[] => rowsOf(text, width).slice(-n);

describe("chat live answer: the unfinished line", () => {
  it("a line many screens long streams in bounded bytes per delta, shows its last rows, and ends up once", async () => {
    const t = chatTerm(40, 12);
    for (let i = 1; i <= 3; i++) t.screen.line(`before ${i}`);
    const first = words(0, 1500);
    // Each delta writes itself and at most one row break, however long the line already is.
    const mostEarly = t.stream(first);
    assert.ok(mostEarly <= ROW_BREAK_BYTES, `an early delta wrote ${mostEarly} extra bytes`);
    const mostLate = t.stream(words(1500, 3000));
    assert.ok(mostLate <= ROW_BREAK_BYTES, `a late delta wrote ${mostLate} extra bytes`);
    const partial = [...first, ...words(1500, 3000)].join("");
    // On screen: the line's last 11 rows (the scroll region above the footer), the footer below.
    const screen = await t.vt.screen(t.out.text);
    assert.deepEqual(screen.slice(0, 11), tail(partial, 39, 11));
    assert.equal(screen[11], "FOOTER");
    // In the scrollback: the transcript before it, and none of the line's rows that left the screen.
    let lines = await t.vt.lines(t.out.text);
    assert.deepEqual(lines.filter((l) => l !== ""), ["before 1", "before 2", "before 3", ...tail(partial, 39, 11), "FOOTER"]);
    t.answer.stream("end\nnext line\n");
    t.answer.end();
    lines = await t.vt.lines(t.out.text);
    const shown = lines.filter((l) => l.includes("w1 "));
    assert.equal(shown.length, 1, lines.join("\n"));
    assert.equal(squeeze(shown[0]!), squeeze(partial + "end"));
    assert.equal(lines.filter((l) => l === "next line").length, 1);
    for (let i = 1; i <= 3; i++) assert.equal(lines.filter((l) => l === `before ${i}`).length, 1);
    t.screen.stop();
  });

  it("at exactly the screen's rows nothing is deleted; one character more deletes only the first row", async () => {
    const t = chatTerm(20, 8);
    t.screen.line("above");
    // 7 rows of 19 columns fill the scroll region (8 rows, the footer on the last).
    const row = (k: number): string => String.fromCharCode(97 + k).repeat(19);
    const full = Array.from({ length: 7 }, (_, k) => row(k)).join("");
    t.stream(full.match(/.{1,5}/g)!);
    assert.equal(t.out.text.includes("\x1b[M"), false, "no row deleted at the limit");
    let screen = await t.vt.screen(t.out.text);
    assert.deepEqual(screen.slice(0, 7), Array.from({ length: 7 }, (_, k) => row(k)));
    let lines = await t.vt.lines(t.out.text);
    assert.deepEqual(lines.filter((l) => l !== "FOOTER").slice(-8), ["above", ...Array.from({ length: 7 }, (_, k) => row(k))]);
    t.stream(["z"]);
    screen = await t.vt.screen(t.out.text);
    assert.deepEqual(screen.slice(0, 7), [...Array.from({ length: 6 }, (_, k) => row(k + 1)), "z"]);
    lines = await t.vt.lines(t.out.text);
    assert.equal(lines.filter((l) => l === row(0)).length, 0, lines.join("\n"));
    assert.equal(lines.filter((l) => l === "above").length, 1);
    t.answer.end();
    lines = await t.vt.lines(t.out.text);
    assert.deepEqual(lines.filter((l) => l !== "" && l !== "FOOTER"), ["above", full + "z"]);
    t.screen.stop();
  });

  it("wide characters, emoji split between deltas and tabs: rows within the width, the line once", async () => {
    const t = chatTerm(30, 10);
    const text = ("漢字".repeat(13) + "\t🙂x\tab").repeat(12);
    // Three UTF-16 units a delta: most emoji arrive in two halves.
    const deltas = text.match(/[\s\S]{1,3}/g)!;
    assert.ok(t.stream(deltas) <= ROW_BREAK_BYTES);
    const screen = await t.vt.screen(t.out.text);
    assert.deepEqual(screen.slice(0, 9), tail(text, 29, 9));
    assert.equal(screen.join("").includes("\ufffd"), false, "no half of an emoji shown");
    let lines = await t.vt.lines(t.out.text);
    assert.deepEqual(lines.filter((l) => l !== ""), [...tail(text, 29, 9), "FOOTER"]);
    t.answer.end();
    lines = await t.vt.lines(t.out.text);
    const shown = lines.filter((l) => l.includes("漢"));
    assert.equal(shown.length, 1, lines.join("\n"));
    assert.equal(squeeze(shown[0]!), squeeze(text));
    t.screen.stop();
  });

  it("a resize while a long line streams shows its last rows at the new size; the line ends up once", async () => {
    const t = chatTerm(40, 12);
    t.screen.line("before");
    const first = words(0, 800);
    t.stream(first);
    t.out.columns = 30;
    t.out.rows = 9;
    t.vt.resizeAtRedraw(30, 9);
    t.screen.redraw();
    let partial = first.join("");
    let screen = await t.vt.screen(t.out.text);
    assert.deepEqual(screen.slice(0, 8), tail(partial, 29, 8));
    assert.equal(screen[8], "FOOTER");
    let lines = await t.vt.lines(t.out.text);
    assert.deepEqual(lines.filter((l) => l !== ""), ["before", ...tail(partial, 29, 8), "FOOTER"]);
    const more = words(800, 1200);
    assert.ok(t.stream(more) <= ROW_BREAK_BYTES);
    partial += more.join("");
    screen = await t.vt.screen(t.out.text);
    assert.deepEqual(screen.slice(0, 8), tail(partial, 29, 8));
    t.answer.end();
    lines = await t.vt.lines(t.out.text);
    const shown = lines.filter((l) => l.includes("w1 "));
    assert.equal(shown.length, 1, lines.join("\n"));
    assert.equal(squeeze(shown[0]!), squeeze(partial));
    assert.equal(lines.filter((l) => l === "before").length, 1);
    t.screen.stop();
  });

  it("a long code block line and a long table row: bounded while streaming, rendered once", async () => {
    const t = chatTerm(40, 12);
    const code = Array.from({ length: 400 }, (_, i) => `x${i}=${i};`).join("");
    const cell = words(0, 600).join("").trim();
    const text = "```js\n" + code + "\n```\n| a | b |\n|---|---|\n| " + cell + " | end |\n\nafter\n";
    const deltas = text.match(/[\s\S]{1,4}/g)!;
    assert.ok(t.stream(deltas) <= ROW_BREAK_BYTES);
    t.answer.end();
    const lines = await t.vt.lines(t.out.text);
    const codeLines = lines.filter((l) => l.includes("x1="));
    assert.equal(codeLines.length, 1, lines.join("\n"));
    assert.ok(codeLines[0]!.startsWith("  │ x0=0;"), codeLines[0]);
    assert.equal(squeeze(codeLines[0]!), squeeze("│" + code));
    const rows = lines.filter((l) => l.includes("w1 "));
    assert.equal(rows.length, 1, lines.join("\n"));
    assert.ok(rows[0]!.endsWith("│ end"), rows[0]);
    assert.equal(lines.filter((l) => l === "after").length, 1);
    t.screen.stop();
  });
});
