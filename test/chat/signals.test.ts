/**
 * The interactive chat stopped by a signal through a pseudo-terminal (`kill`, a closed terminal window, a service
 * manager): SIGTERM and SIGHUP cancel the running turn (the session keeps its partial answer and records the end)
 * and exit 143 and 129 with the terminal given back as it was: line mode and echo, no scroll region, no bracketed
 * paste. The shell running the chat reports the exit status and the terminal's modes after it. Ctrl-Z suspends the
 * chat with the terminal given back the same way, and `fg` brings it back working.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chatEnv, chatPid, FAKE, home, Proc } from "./helpers.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const hasBash = spawnSync("bash", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** `berth chat` in a 12×60 pseudo-terminal; after it the shell prints its status and the line-mode and echo flags. */
function chatInPty(h: string): Proc {
  const env: NodeJS.ProcessEnv = { ...chatEnv(h, FAKE), TERM: "xterm-256color" };
  const after = `s=$?; echo; echo "EXIT=$s"; stty -a | tr ' ' '\\n' | grep -x -e '-\\?icanon' -e '-\\?echo' | tr '\\n' ' '; echo END`;
  return new Proc("script", ["-q", "-e", "-c", `stty rows 12 cols 60; ${q(process.execPath)} ${q(BERTH_BIN)} chat; ${after}`, "/dev/null"], env);
}

/** What the chat wrote from `mark` on, its exit status and the terminal's modes after it. */
async function ending(p: Proc, mark: number): Promise<{ out: string; code: number; modes: string }> {
  const m = await p.until(/EXIT=(\d+)\r?\n(.*?) ?END/, mark);
  return { out: p.stdout.slice(mark, p.stdout.indexOf("EXIT=", mark)), code: Number(m[1]), modes: m[2]! };
}

describe("berth chat stopped by a signal (pty)", { skip: hasScript ? false : "util-linux script is not installed" }, () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("SIGTERM during a streaming answer: the turn is cancelled and kept, exit 143, the terminal restored", async () => {
    const h = home(fake.port);
    const p = chatInPty(h);
    after(() => p.child.kill("SIGKILL"));
    await p.until(/› /);
    fake.script([{ steps: [{ text: "partial words" }, { waitForAbort: true }] }]);
    const mark = p.stdout.length;
    p.write("tell me\r");
    await p.until(/partial words/, mark);
    const signalled = p.stdout.length;
    process.kill(chatPid(p.child.pid!)!, "SIGTERM");
    const end = await ending(p, signalled);
    assert.equal(end.code, 143);
    assert.equal(end.modes, "icanon echo");
    // Bracketed paste off, and the footer's scroll region given back to the whole screen.
    assert.ok(end.out.includes("\x1b[?2004l"), JSON.stringify(end.out));
    assert.ok(end.out.includes("\x1b[r"), JSON.stringify(end.out));
    const file = readdirSync(join(h, "sessions")).find((f) => f.endsWith(".jsonl"))!;
    const last = JSON.parse(readFileSync(join(h, "sessions", file), "utf8").trim().split("\n").at(-1)!) as Record<string, unknown>;
    assert.equal(last["kind"], "terminal");
    assert.equal(last["status"], "cancelled");
    assert.equal(last["assistant_text"], "partial words");
  });

  it("SIGHUP at the idle prompt: exit 129, the terminal restored", async () => {
    const p = chatInPty(home(fake.port));
    after(() => p.child.kill("SIGKILL"));
    await p.until(/› /);
    const signalled = p.stdout.length;
    process.kill(chatPid(p.child.pid!)!, "SIGHUP");
    const end = await ending(p, signalled);
    assert.equal(end.code, 129);
    assert.equal(end.modes, "icanon echo");
    assert.ok(end.out.includes("\x1b[?2004l"), JSON.stringify(end.out));
    assert.ok(end.out.includes("\x1b[r"), JSON.stringify(end.out));
  });

  it("Ctrl-Z gives the terminal back to the shell; fg brings the chat back, and it answers", { skip: hasBash ? false : "bash is not installed" }, async () => {
    const env: NodeJS.ProcessEnv = { ...chatEnv(home(fake.port), FAKE), TERM: "xterm-256color" };
    // An interactive shell with job control, as a user's terminal has.
    const p = new Proc("script", ["-q", "-c", "bash --norc --noprofile -i", "/dev/null"], env);
    after(() => p.child.kill("SIGKILL"));
    await p.until(/[$#] $/);
    p.write("PS1='SHELL> '\r");
    await p.until(/SHELL> $/);
    p.write(`stty rows 12 cols 60; ${q(process.execPath)} ${q(BERTH_BIN)} chat\r`);
    await p.until(/› /);
    let mark = p.stdout.length;
    p.write("\x1a");
    await p.until(/Stopped[\s\S]*SHELL> /, mark);
    const suspended = p.stdout.slice(mark, p.stdout.indexOf("Stopped", mark));
    assert.ok(suspended.includes("\x1b[?2004l"), JSON.stringify(suspended));
    assert.ok(suspended.includes("\x1b[r"), JSON.stringify(suspended));
    mark = p.stdout.length;
    p.write("stty -a | tr ' ' '\\n' | grep -x -e '-\\?icanon' -e '-\\?echo' | tr '\\n' ' '; echo END\r");
    assert.equal((await p.until(/(-?icanon -?echo) END/, mark))[1], "icanon echo");
    await p.until(/SHELL> /, mark);
    mark = p.stdout.length;
    p.write("fg\r");
    await p.until(/› /, mark);
    p.write("after the break\r");
    await p.until(/echo: after the break[\s\S]*── completed/, mark);
    p.write("\x03");
    p.write("\x03");
    p.write("exit\r");
  });
});
