/**
 * The chat's screen through a pseudo-terminal, read back through a virtual terminal (xterm.js): the footer (model,
 * cwd, context gauge, session) stays on the last row while the transcript scrolls above it; Shift-Enter in each form
 * terminals send adds a line to the prompt; a resize (idle, and while an answer streams) redraws the whole transcript
 * at the new width, each line once, with the footer back on the last row; an answer line many screens long is written
 * in bytes linear in its length and shown once.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readlinkSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chatEnv, chatPid, FAKE, home, Proc } from "./helpers.js";
import { VTerm } from "./vterm.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

describe("berth chat screen (pty)", { skip: hasScript ? false : "util-linux script is not installed" }, () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("a working directory whose name holds terminal controls is shown, not obeyed, in the banner, the turn line and the footer", async () => {
    // A tree someone else named (an unpacked archive): an OSC title sequence and an erase-display in the name.
    const cwd = join(realpathSync(mkdtempSync(join(tmpdir(), "berth-scr-"))), "dir\x1b]0;pwned\x07\x1b[2Jname");
    mkdirSync(cwd);
    const env: NodeJS.ProcessEnv = { ...chatEnv(home(fake.port), FAKE), TERM: "xterm-256color" };
    const p = new Proc("script", ["-q", "-e", "-c", `stty rows 12 cols 200; exec ${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env, cwd);
    after(() => p.child.kill("SIGKILL"));
    const vt = new VTerm(200, 12);
    await p.until(/› /);
    const shown = "dir^[]0;pwned^G^[[2Jname";
    let lines = await vt.lines(p.stdout);
    assert.ok(lines.some((l) => l.includes(`· model fake/fake-model · `) && l.endsWith(shown)), lines.join("\n"));
    const mark = p.stdout.length;
    p.write("hi\r");
    await p.until(/── completed[^\n]*\n[\s\S]*› /, mark);
    lines = await vt.lines(p.stdout);
    assert.ok(lines.some((l) => l.startsWith("── completed") && l.includes(shown)), lines.join("\n"));
    const screen = await vt.screen(p.stdout);
    assert.ok(screen[11]!.includes(shown), screen.join("\n"));
    p.write("\x03");
    p.write("\x03");
    assert.equal(await p.exited, 0);
  });

  it("footer pinned to the last row, Shift-Enter newlines, full redraw on resize", async () => {
    const env: NodeJS.ProcessEnv = { ...chatEnv(home(fake.port), FAKE), TERM: "xterm-256color" };
    const p = new Proc("script", ["-q", "-e", "-c", `stty rows 12 cols 60; exec ${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env);
    after(() => p.child.kill("SIGKILL"));
    const vt = new VTerm(60, 12);
    await p.until(/› /);
    let screen = await vt.screen(p.stdout);
    assert.match(screen[11]!, /^fake\/fake-model · \S+ · ctx – · new session$/);

    // Shift-Enter: kitty/CSI-u, ESC CR, xterm modifyOtherKeys, keypad Enter; then Enter sends one prompt.
    const before = fake.requests.length;
    let mark = p.stdout.length;
    p.write("one\x1b[13;2utwo\x1b\rthree\x1b[27;2;13~four\x1bOMfive\r");
    await p.until(/── completed[^\n]*\n/, mark);
    assert.equal(fake.requests.length, before + 1);
    assert.match(fake.requests.at(-1)!.body, /"one\\ntwo\\nthree\\nfour\\nfive"/);
    await p.until(/› /, p.stdout.indexOf("── completed", mark));

    // A long answer scrolls the transcript; the footer stays on the last row and now names the session.
    const answer = Array.from({ length: 30 }, (_, i) => `answer line ${i + 1}`).join("\n") + "\n";
    fake.script([{ steps: [{ text: answer, chunks: 6 }] }]);
    mark = p.stdout.length;
    p.write("long please\r");
    await p.until(/── completed[^\n]*\n[\s\S]*› /, mark);
    screen = await vt.screen(p.stdout);
    const footer = /^fake-model · \S+ · ctx (?:\[[█░]+\] )?\d+%(?: \S+)? · s\S{11}$/.exec(screen[11]!);
    assert.ok(footer !== null, screen.join("\n"));
    assert.equal(screen[10], "› ");
    assert.ok(screen.slice(7, 10).some((l) => l.startsWith("── completed")), screen.join("\n"));
    assert.ok(screen.includes("answer line 30"), screen.join("\n"));
    let lines = await vt.lines(p.stdout);
    // Nothing the footer covered is lost: every answer line is in the buffer once.
    for (let i = 1; i <= 30; i++) assert.equal(lines.filter((l) => l === `answer line ${i}`).length, 1, `answer line ${i}\n${lines.join("\n")}`);

    // Resize while idle (a real window-size change on the pty, which sends SIGWINCH): the transcript is printed
    // again at the new width, each line once, the footer on the new last row, the prompt back.
    const pid = chatPid(p.child.pid!);
    assert.notEqual(pid, null);
    const tty = readlinkSync(`/proc/${pid}/fd/0`);
    vt.resizeAtRedraw(40, 16);
    mark = p.stdout.length;
    execFileSync("stty", ["-F", tty, "rows", "16", "cols", "40"]);
    // The prompt comes back last: readline's refresh (erase down, `› `, cursor to its column).
    await p.until(/\x1b\[3J[\s\S]*\x1b\[0J[\s\S]*› \x1b\[\d+G/, mark);
    screen = await vt.screen(p.stdout);
    assert.equal(screen.length, 16);
    assert.match(screen[15]!, /^fake-model · /);
    assert.equal(screen[14], "› ");
    lines = await vt.lines(p.stdout);
    for (let i = 1; i <= 30; i++) assert.equal(lines.filter((l) => l === `answer line ${i}`).length, 1, lines.join("\n"));
    assert.equal(lines.filter((l) => l === "› one").length, 1, lines.join("\n"));
    assert.ok(lines.includes("… five"), lines.join("\n"));

    // Resize while an answer streams: the answer ends up whole, once, below the redrawn transcript.
    const slow = Array.from({ length: 8 }, (_, i) => `streamed row ${i + 1} with some words to wrap`).join("\n") + "\n";
    fake.script([{ steps: [{ text: slow, chunks: 16 }], chunkDelayMs: 80 }]);
    mark = p.stdout.length;
    p.write("slowly\r");
    await p.until(/streamed row 2/, mark);
    vt.resizeAtRedraw(50, 14);
    execFileSync("stty", ["-F", tty, "rows", "14", "cols", "50"]);
    await p.until(/\x1b\[3J[\s\S]*streamed row 8[\s\S]*── completed[^\n]*\n[\s\S]*› /, mark);
    screen = await vt.screen(p.stdout);
    assert.match(screen[13]!, /^fake-model · /);
    lines = await vt.lines(p.stdout);
    for (let i = 1; i <= 8; i++) assert.equal(lines.filter((l) => l === `streamed row ${i} with some words to wrap`).length, 1, lines.join("\n"));
    assert.equal(lines.filter((l) => l === "answer line 1").length, 1);

    p.write("\x03");
    p.write("\x03");
    assert.equal(await p.exited, 0);
    // On exit the footer is gone and the scroll region reset.
    assert.match(p.stdout.slice(-200), /\x1b\[r/);
  });

  it("an answer line many screens long: written in bytes linear in the answer, and shown once", async () => {
    const env: NodeJS.ProcessEnv = { ...chatEnv(home(fake.port), FAKE), TERM: "xterm-256color" };
    const p = new Proc("script", ["-q", "-e", "-c", `stty rows 12 cols 60; exec ${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env);
    after(() => p.child.kill("SIGKILL"));
    const vt = new VTerm(60, 12);
    await p.until(/› /);
    // The fake streams 3,000 one-word deltas ("word ") and no newline: 15 KB on one line, 250 rows of 60 columns.
    const mark = p.stdout.length;
    p.write("long answer 3000\r");
    const done = await p.until(/── completed/, mark);
    // The unfinished line appended delta by delta (each rewrote the whole line before: 22 MB for this answer).
    const written = Buffer.byteLength(p.stdout.slice(mark, mark + done.index!));
    assert.ok(written < 3 * 15_000, `${written} bytes written for a 15,000-byte answer`);
    await p.until(/── completed[^\n]*\n[\s\S]*› /, mark);
    const lines = await vt.lines(p.stdout);
    // Once: no raw rows of the unfinished line left in the scrollback above the rendered one.
    const shown = lines.filter((l) => l.includes("word"));
    assert.equal(shown.length, 1, lines.join("\n"));
    assert.equal(shown[0]!.replace(/ /g, ""), "word".repeat(3000));
    p.write("\x03");
    p.write("\x03");
    assert.equal(await p.exited, 0);
  });

  it("an unfinished answer line of wide characters, emoji and tabs, wider than the terminal, is replaced whole", async () => {
    const env: NodeJS.ProcessEnv = { ...chatEnv(home(fake.port), FAKE), TERM: "xterm-256color" };
    const p = new Proc("script", ["-q", "-e", "-c", `stty rows 20 cols 40; exec ${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env);
    after(() => p.child.kill("SIGKILL"));
    const vt = new VTerm(40, 20);
    await p.until(/› /);
    // 60 wide characters, 10 emoji, a combining accent and tabs: 150+ columns, in 12 pieces each shown unfinished.
    const wide = "漢字".repeat(30) + "🙂".repeat(10) + " e\u0301\t\tx\t\ty\t\tz end";
    fake.script([{ steps: [{ text: `${wide}\nlast line\n`, chunks: 12 }], chunkDelayMs: 30 }]);
    const mark = p.stdout.length;
    p.write("wide\r");
    await p.until(/── completed[^\n]*\n[\s\S]*› /, mark);
    const lines = await vt.lines(p.stdout);
    // The finished line once, and no leftover rows of its unfinished drawings.
    assert.equal(lines.filter((l) => l.includes("漢字")).length, 1, lines.join("\n"));
    assert.ok(lines.some((l) => l.startsWith("漢字".repeat(30)) && l.endsWith("z end")), lines.join("\n"));
    assert.equal(lines.filter((l) => l === "last line").length, 1, lines.join("\n"));
    p.write("\x03");
    p.write("\x03");
    assert.equal(await p.exited, 0);
  });
});
