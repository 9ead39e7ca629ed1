/**
 * `berth chat` as a new user meets it: `-p -` typed in a terminal says it is reading the prompt there and how to end
 * it (instead of waiting in silence); `-p --continue` where no earlier session exists says it starts a new one;
 * piped prompts with a `--session` naming none stop as `-p` does (they ran in a new session, exit 0); piped prompts
 * into a reader that is already gone end without a trace.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chat, chatEnv, FAKE, home, Proc } from "./helpers.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

describe("berth chat for a new user", () => {
  let fake: FakeProvider;
  let h: string;
  before(async () => {
    fake = await startFakeProvider();
    h = home(fake.port);
  });
  after(() => fake.close());

  it("-p - in a terminal says it reads the prompt there until Ctrl-D, then runs it", { skip: hasScript ? false : "util-linux script is not installed" }, async () => {
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat -p -`, "/dev/null"], { ...chatEnv(h, FAKE), TERM: "dumb" });
    try {
      await p.until(/berth chat: reading the prompt from the terminal: type it, then press Ctrl-D on an empty line to send it \(or give it after -p\)/);
      p.write("typed in the terminal\n");
      p.write("\x04");
      await p.until(/echo: typed in the terminal/);
      assert.equal(await p.exited, 0, p.stdout);
    } finally {
      if (p.child.exitCode === null) p.child.kill("SIGKILL");
    }
  });

  it("-p - from a pipe writes no such line", async () => {
    const p = chat(["-p", "-"], chatEnv(h, FAKE), { stdin: "from a pipe\n" });
    assert.equal(await p.exited, 0, p.stderr);
    assert.doesNotMatch(p.stderr, /reading the prompt/);
  });

  it("-p --continue with no earlier session in this directory says it starts a new one", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "berth-new-"));
    const p = chat(["-p", "hi", "--continue"], chatEnv(h, FAKE), { cwd });
    assert.equal(await p.exited, 0, p.stderr);
    assert.equal(p.stdout, "echo: hi\n");
    assert.match(p.stderr, /^berth chat: no earlier session in this directory; starting a new one\nsession \S+\n$/);
    // The second run continues it, without the note.
    const again = chat(["-p", "again", "--continue"], chatEnv(h, FAKE), { cwd });
    assert.equal(await again.exited, 0, again.stderr);
    assert.match(again.stderr, /^session \S+\n$/);
  });

  it("piped prompts with a --session that names no session: said once on stderr, no prompt run, exit 1 (as -p)", async () => {
    const before = fake.requests.length;
    const p = chat(["--session", "zzz-no-such"], chatEnv(h, FAKE), { stdin: "hi\n" });
    assert.equal(await p.exited, 1, p.stdout + p.stderr);
    assert.equal(p.stderr, 'berth chat: no saved session starts with "zzz-no-such" (/sessions lists them); no prompt was run\n');
    assert.doesNotMatch(p.stdout, /zzz-no-such|echo: hi/);
    assert.equal(fake.requests.length, before);
  });

  it("a settings.json that is a symbolic link to nothing is named (its settings would be dropped unseen)", async () => {
    const dotfiles = mkdtempSync(join(tmpdir(), "berth-dotfiles-"));
    const hl = mkdtempSync(join(tmpdir(), "berth-link-"));
    symlinkSync(join(dotfiles, "berth", "settings.json"), join(hl, "settings.json"));
    const p = chat(["-p", "hi"], chatEnv(hl, { ANTHROPIC_API_KEY: "sk-ant-not-used" }));
    assert.equal(await p.exited, 1, p.stderr);
    assert.equal(
      p.stderr,
      `berth chat: settings: ${join(hl, "settings.json")} is a symbolic link to ${join(dotfiles, "berth", "settings.json")}, which does not exist; fix the link (or remove it to use no settings)\n`,
    );
    // A project's .berth/settings.json alike.
    const cwd = mkdtempSync(join(tmpdir(), "berth-proj-"));
    mkdirSync(join(cwd, ".berth"));
    symlinkSync("../../gone/settings.json", join(cwd, ".berth", "settings.json"));
    const proj = chat(["-p", "hi"], chatEnv(h, FAKE), { cwd });
    assert.equal(await proj.exited, 1, proj.stderr);
    assert.match(proj.stderr, /^berth chat: settings: \S+\/\.berth\/settings\.json is a symbolic link to \.\.\/\.\.\/gone\/settings\.json, which does not exist; fix the link/);
  });

  it("piped prompts into a reader already gone end quietly (exit 0, as -p does)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "berth-gone-"));
    const gate = join(dir, "gate");
    const script = `set -o pipefail; mkfifo ${q(gate)}; { read -r _ < ${q(gate)}; printf 'one\\ntwo\\n' | ${q(process.execPath)} ${q(BERTH_BIN)} chat; } | { exec 0<&-; echo > ${q(gate)}; }`;
    const p = new Proc("bash", ["-c", script], chatEnv(h, FAKE));
    p.child.stdin!.end();
    assert.equal(await p.exited, 0, p.stderr);
    assert.doesNotMatch(p.stderr, /EPIPE|\n\s+at |Error/);
  });
});
