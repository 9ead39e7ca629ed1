/**
 * The screen's transcript bound (screen.ts): a resize prints the kept transcript again, the newest
 * `MAX_TRANSCRIPT_CHARS` characters in whole lines. At the bound everything is printed; one line past it, the
 * oldest line is dropped and a note says so. A terminal that cannot redraw keeps nothing and redraws nothing.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { MAX_TRANSCRIPT_CHARS, REDRAW, Screen, TRIMMED_NOTE } from "../../src/cli/chat/screen.js";

/** A stand-in for the terminal's stdout: records what is written (rows 0: no footer). */
function fakeOut(): NodeJS.WriteStream & { text: string } {
  const out = Object.assign(new EventEmitter(), {
    text: "",
    columns: 80,
    rows: 0,
    isTTY: true,
    write(s: string): boolean {
      out.text += s;
      return true;
    },
  });
  return out as unknown as NodeJS.WriteStream & { text: string };
}

/** What the last redraw printed. */
const redrawn = (out: { text: string }): string => out.text.slice(out.text.lastIndexOf(REDRAW) + REDRAW.length);

describe("chat screen transcript", () => {
  it("keeps exactly MAX_TRANSCRIPT_CHARS; one line more drops the oldest line with a note", () => {
    const out = fakeOut();
    const screen = new Screen(out, true);
    const first = "a".repeat(99) + "\n";
    const rest = "b".repeat(MAX_TRANSCRIPT_CHARS - first.length - 1) + "\n";
    screen.write(first);
    screen.write(rest);
    screen.redraw();
    assert.equal(redrawn(out), first + rest);
    screen.line("c");
    screen.redraw();
    assert.equal(redrawn(out), TRIMMED_NOTE + rest + "c\n");
    screen.stop();
  });

  it("a terminal that cannot redraw keeps nothing", () => {
    const out = fakeOut();
    const screen = new Screen(out, false);
    screen.line("hello");
    screen.redraw();
    assert.equal(out.text, "hello\n");
    screen.stop();
  });
});
