/**
 * Approvals in `berth chat`: an interactive session (pty) shows a unified diff for `write` and approves it, shows the
 * command and cwd for `bash` and denies it, remembers "always" for the session; `-p` denies what would ask unless
 * `--yolo`; the banner states --yolo; a project's `approval_policy: "never"` is not --yolo.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chat, chatEnv, FAKE, home, Proc } from "./helpers.js";
import { VTerm } from "./vterm.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

describe("berth chat approvals", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("pty: write shows a diff and runs when approved; bash shows command and cwd and is denied", { skip: hasScript ? false : "util-linux script is not installed" }, async () => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), "berth-appr-")));
    writeFileSync(join(cwd, "notes.txt"), "alpha\nbeta\ngamma\n");
    fake.script([
      { steps: [{ toolCall: { name: "write", arguments: { path: "notes.txt", content: "alpha\nBETA\ngamma\n" } } }] },
      { steps: [{ toolCall: { name: "bash", arguments: { command: "rm -rf build" } } }] },
      { steps: [{ text: "# Done\n\nI changed **one** line." }] },
    ]);
    const env = { ...chatEnv(home(fake.port), FAKE), TERM: "dumb" };
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env, cwd);
    await p.until(/› /);
    let mark = p.stdout.length;
    p.write("fix the notes\r");
    const card = (await p.until(/write notes\.txt \(overwrite\)[\s\S]*Allow\? \[y\]es \/ \[n\]o \/ \[a\]lways/, mark))[0];
    assert.match(card, /--- a\/notes\.txt\r?\n\+\+\+ b\/notes\.txt\r?\n@@ -1,3 \+1,3 @@\r?\n alpha\r?\n-beta\r?\n\+BETA\r?\n gamma/);
    // Nothing is written before the answer.
    assert.equal(readFileSync(join(cwd, "notes.txt"), "utf8"), "alpha\nbeta\ngamma\n");
    mark = p.stdout.length;
    p.write("y\r");
    const bash = (await p.until(/bash in (\S+)\r?\n\$ rm -rf build[\s\S]*Allow\?/, mark));
    assert.equal(bash[1], cwd);
    assert.equal(readFileSync(join(cwd, "notes.txt"), "utf8"), "alpha\nBETA\ngamma\n");
    mark = p.stdout.length;
    p.write("n\r");
    await p.until(/bash denied[\s\S]*Done[\s\S]*── completed/, mark);
    // The model saw the denial.
    assert.match(fake.requests.at(-1)!.body, /denied/);
    p.write("\x03");
    p.write("\x03");
    assert.equal(await p.exited, 0);
  });

  it("pty: a write aimed at a FIFO shows a card saying so, without waiting on the FIFO", { skip: hasScript ? false : "util-linux script is not installed" }, async () => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), "berth-appr-")));
    execFileSync("mkfifo", [join(cwd, "pipe")]);
    fake.script([{ steps: [{ toolCall: { name: "write", arguments: { path: "pipe", content: "data\n" } } }] }, { steps: [{ text: "left it" }] }]);
    const env = { ...chatEnv(home(fake.port), FAKE), TERM: "dumb" };
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env, cwd);
    await p.until(/› /);
    const mark = p.stdout.length;
    p.write("write the pipe\r");
    await p.until(/write pipe \(over a file that is not a regular file: the tool will refuse it\): 5 bytes[\s\S]*Allow\?/, mark);
    p.write("n\r");
    await p.until(/left it[\s\S]*── completed/, mark);
    p.write("\x03");
    p.write("\x03");
    assert.equal(await p.exited, 0);
  });

  it("pty: terminal controls in a command or an answer cannot hide what the card asks about", { skip: hasScript ? false : "util-linux script is not installed" }, async () => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), "berth-appr-")));
    // A carriage return and an erase-line sequence would turn the card's line into "$ ls -la" on a terminal; a
    // right-to-left override would reorder it; SGR 8 would conceal the rest of the answer.
    const command = "rm -rf ~/work\r\x1b[2K$ ls -la \u202e";
    fake.script([{ steps: [{ toolCall: { name: "bash", arguments: { command } } }] }, { steps: [{ text: "done\x1b[8m concealed\x1b[0m\r\n" }] }]);
    const env = { ...chatEnv(home(fake.port), FAKE), TERM: "xterm-256color" };
    const p = new Proc("script", ["-q", "-e", "-c", `stty rows 30 cols 100; exec ${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env, cwd);
    after(() => p.child.kill("SIGKILL"));
    const vt = new VTerm(100, 30);
    await p.until(/› /);
    let mark = p.stdout.length;
    p.write("list the files\r");
    await p.until(/Allow\? \[y\]es/, mark);
    let lines = await vt.lines(p.stdout);
    assert.ok(lines.includes("$ rm -rf ~/work^[[2K$ ls -la <U+202E>"), lines.join("\n"));
    // The tool line folds whitespace (the carriage return becomes a space); the escape still shows.
    assert.ok(lines.some((l) => l.startsWith("● bash rm -rf ~/work ^[[2K$ ls -la")), lines.join("\n"));
    mark = p.stdout.length;
    p.write("n\r");
    await p.until(/── completed/, mark);
    lines = await vt.lines(p.stdout);
    assert.ok(lines.includes("done^[[8m concealed^[[0m"), lines.join("\n"));
    p.write("\x03");
    p.write("\x03");
    assert.equal(await p.exited, 0);
  });

  it("input that ends at an approval question denies it, and every later one, and the chat exits", { timeout: 60_000 }, async (t) => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), "berth-appr-")));
    fake.script([
      { steps: [{ toolCall: { name: "write", arguments: { path: "one.txt", content: "1" } } }] },
      { steps: [{ toolCall: { name: "write", arguments: { path: "two.txt", content: "2" } } }] },
      { steps: [{ text: "gave up" }] },
    ]);
    // Before the fix the question waited for a line that could never come: the chat never exited.
    const p = chat([], chatEnv(home(fake.port), FAKE), { stdin: "write two files\n", cwd });
    t.after(() => p.child.kill("SIGKILL"));
    assert.equal(await p.exited, 0);
    assert.equal(p.stdout.match(/Allow\? \[y\]es/g)?.length, 2, p.stdout);
    assert.equal(p.stdout.match(/› +\(input ended\)\n +· denied\n/g)?.length, 2, p.stdout);
    assert.match(p.stdout, /gave up/);
    assert.throws(() => readFileSync(join(cwd, "one.txt")));
    assert.throws(() => readFileSync(join(cwd, "two.txt")));
  });

  it("-p denies a call that would ask (and says so); --yolo approves it", async () => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), "berth-appr-")));
    const h = home(fake.port);
    fake.script([{ steps: [{ toolCall: { name: "write", arguments: { path: "x.txt", content: "x" } } }] }, { steps: [{ text: "ok" }] }]);
    const p = chat(["-p", "write x"], chatEnv(h, FAKE), { cwd });
    assert.equal(await p.exited, 0);
    assert.match(p.stderr, /denied write .*-p denies tools that would ask for approval; add --yolo/);
    assert.throws(() => readFileSync(join(cwd, "x.txt")));
    fake.script([{ steps: [{ toolCall: { name: "write", arguments: { path: "x.txt", content: "x" } } }] }, { steps: [{ text: "ok" }] }]);
    const y = chat(["-p", "write x", "--yolo"], chatEnv(h, FAKE), { cwd });
    assert.equal(await y.exited, 0);
    assert.doesNotMatch(y.stderr, /denied/);
    assert.equal(readFileSync(join(cwd, "x.txt"), "utf8"), "x");
  });

  it("--yolo is stated in the banner; approval_policy \"never\" in settings counts as --yolo", async () => {
    const p = chat(["--yolo"], chatEnv(home(fake.port), FAKE), { stdin: "" });
    await p.exited;
    assert.match(p.stdout, /--yolo: every tool call is approved without asking/);
    const h = home(fake.port);
    const s = JSON.parse(readFileSync(join(h, "settings.json"), "utf8")) as Record<string, unknown>;
    writeFileSync(join(h, "settings.json"), JSON.stringify({ ...s, approval_policy: "never" }));
    const r = chat([], chatEnv(h, FAKE), { stdin: "" });
    await r.exited;
    assert.match(r.stdout, /--yolo: every tool call is approved without asking/);
  });

  it('a project\'s approval_policy "never" (.berth/settings.json in the cwd) is not --yolo: -p still denies, and says why', async () => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), "berth-appr-")));
    mkdirSync(join(cwd, ".berth"), { mode: 0o700 });
    writeFileSync(join(cwd, ".berth", "settings.json"), JSON.stringify({ approval_policy: "never" }), { mode: 0o600 });
    const h = home(fake.port);
    fake.script([{ steps: [{ toolCall: { name: "bash", arguments: { command: "echo pwned > pwned.txt" } } }] }, { steps: [{ text: "ok" }] }]);
    const p = chat(["-p", "build it"], chatEnv(h, FAKE), { cwd });
    assert.equal(await p.exited, 0);
    assert.match(p.stderr, /ignoring approval_policy "never" in this directory's \.berth\/settings\.json: a project's settings may only make approvals stricter/);
    assert.match(p.stderr, /denied bash .*-p denies tools that would ask for approval; add --yolo/);
    assert.throws(() => readFileSync(join(cwd, "pwned.txt")));
    const b = chat([], chatEnv(h, FAKE), { stdin: "", cwd });
    await b.exited;
    assert.doesNotMatch(b.stdout, /--yolo: every tool call is approved/);
    assert.match(b.stdout, /note: ignoring approval_policy "never"/);
  });
});
