/**
 * What `berth chat -p` writes when the model's text carries terminal controls: on a terminal the answer is shown
 * without them (a window title, an OSC 52 clipboard write, a hyperlink, an 8-bit CSI, a bidi override, a CR that
 * would overwrite a line); into a pipe it is the model's text, byte for byte; with `--json` every line parses strictly
 * to the same text, with no raw control and no lone surrogate escape, also in a tool call's arguments.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chat, chatEnv, FAKE, home, Proc } from "./helpers.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const HOSTILE = "title\x1b]0;owned\x07 clip\x1b]52;c;cm0gLXJmIH4=\x07 link\x1b]8;;http://evil/\x07here\x1b]8;;\x07 csi\u009b2J bidi\u202eevil\u202c end\nsafe command\rrm -rf ~\n";
/** Any terminal control a terminal would act on: C0 but tab/newline/CR, DEL, C1, bidi controls. */
const RAW_CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

describe("berth chat -p and terminal controls", () => {
  let fake: FakeProvider;
  let h: string;
  before(async () => {
    fake = await startFakeProvider();
    h = home(fake.port);
  });
  after(() => fake.close());

  it("pty: the answer is shown without its controls", { skip: hasScript ? false : "util-linux script is not installed" }, async () => {
    fake.script([{ steps: [{ text: HOSTILE }] }]);
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat -p hostile`, "/dev/null"], { ...chatEnv(h, FAKE), TERM: "xterm-256color" });
    after(() => p.child.kill("SIGKILL"));
    assert.equal(await p.exited, 0);
    assert.doesNotMatch(p.stdout, RAW_CONTROL, JSON.stringify(p.stdout));
    assert.match(p.stdout, /title\^\[\]0;owned\^G clip\^\[\]52;c;cm0gLXJmIH4=\^G/);
    assert.match(p.stdout, /csi<U\+009B>2J bidi<U\+202E>evil<U\+202C> end/);
    // A lone CR ends a line: it neither overwrites the line (a raw CR) nor joins the two (it was dropped).
    assert.match(p.stdout, /\r\nsafe command\r\nrm -rf ~\r\n/);
  });

  it("into a pipe the answer is the model's text, unchanged", async () => {
    fake.script([{ steps: [{ text: HOSTILE }] }]);
    const p = chat(["-p", "hostile"], chatEnv(h, FAKE));
    assert.equal(await p.exited, 0);
    assert.equal(p.stdout, HOSTILE);
  });

  it("--json: every line is strict JSON without raw controls or lone surrogates, and parses to the model's text", async () => {
    fake.script([
      { steps: [{ text: HOSTILE }, { toolCall: { name: "bash", arguments: '{"command":"echo \\ud800 \\u009b[2J \\\\ud800","\\udfff":1}' } }] },
      { steps: [{ text: "ok" }] },
    ]);
    const p = chat(["-p", "hostile", "--json"], chatEnv(h, FAKE));
    assert.equal(await p.exited, 0);
    const lines = p.stdout.trim().split("\n");
    for (const l of lines) {
      assert.doesNotMatch(l, RAW_CONTROL, l);
      assert.doesNotMatch(l, /\u2028|\u2029/, l);
      // A lone surrogate escape (what JSON.stringify writes for one) is refused by strict parsers.
      assert.doesNotMatch(l.replace(/\\\\/g, ""), /\\ud[89a-f][0-9a-f]{2}/i, l);
    }
    const events = lines.map((l) => JSON.parse(l) as Record<string, any>);
    assert.equal(events.filter((e) => e.event === "turn.assistant_delta").map((e) => e.text).join(""), HOSTILE + "ok");
    const proposed = events.find((e) => e.event === "turn.tool" && e.status === "proposed")!;
    assert.deepEqual(proposed.arguments, { command: "echo \ufffd \u009b[2J \\ud800", "\ufffd": 1 });
    assert.equal(events.at(-1)!.event, "turn.terminal");
  });

  // A cloned repository's .berth/settings.json is read before any trust question: the values a setup error quotes
  // (a provider or model name) are the repository's text.
  describe("a project's settings quoted in a setup error", () => {
    const project = (): string => {
      const dir = mkdtempSync(join(tmpdir(), "berth-hostile-project-"));
      mkdirSync(join(dir, ".berth"));
      writeFileSync(join(dir, ".berth", "settings.json"), JSON.stringify({ provider: "x\x1b]0;owned\x07\x1b]52;c;cm0=\x07\u202e" }));
      return dir;
    };

    it("-p: the error line on stderr carries no terminal control", async () => {
      const p = chat(["-p", "hi"], chatEnv(h), { cwd: project() });
      assert.equal(await p.exited, 1);
      assert.doesNotMatch(p.stderr, RAW_CONTROL, JSON.stringify(p.stderr));
      assert.match(p.stderr, /provider "x\^\[\]0;owned\^G\^\[\]52;c;cm0=\^G<U\+202E>" names no known provider/);
    });

    it("interactive (piped: the error goes to stderr, said once): the error line carries no terminal control", async () => {
      const p = chat([], chatEnv(h), { cwd: project(), stdin: "/exit\n" });
      assert.equal(await p.exited, 1);
      assert.doesNotMatch(p.stdout + p.stderr, RAW_CONTROL, JSON.stringify(p.stdout + p.stderr));
      assert.match(p.stderr, /^berth chat: the settings' provider "x\^\[\]0;owned\^G/);
    });
  });
});
