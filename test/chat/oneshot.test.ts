/** `berth chat -p` and `--json` against the spawned service and the loopback fake provider. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { chat, chatEnv, FAKE, home } from "./helpers.js";

describe("berth chat one-shot", () => {
  let fake: FakeProvider;
  let h: string;
  before(async () => {
    fake = await startFakeProvider();
    h = home(fake.port);
  });
  after(() => fake.close());

  it("-p prints only the final answer and exits 0", async () => {
    const p = chat(["-p", "hello one-shot"], chatEnv(h, FAKE));
    assert.equal(await p.exited, 0);
    assert.equal(p.stdout, "echo: hello one-shot\n");
    // The session ID goes to stderr (and nothing else).
    assert.match(p.stderr, /^session \S+\n$/);
  });

  it("--json prints the turn's events as JSON lines, ordered, ending with the terminal", async () => {
    const p = chat(["-p", "json please", "--json"], chatEnv(h, FAKE));
    assert.equal(await p.exited, 0);
    const events = p.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, any>);
    assert.equal(events[0]!.event, "turn.started");
    const last = events.at(-1)!;
    assert.equal(last.event, "turn.terminal");
    assert.equal(last.status, "completed");
    assert.equal(last.assistant_text, "echo: json please");
    const text = events.filter((e) => e.event === "turn.assistant_delta").map((e) => e.text).join("");
    assert.equal(text, "echo: json please");
    const seqs = events.map((e) => e.sequence as number);
    assert.deepEqual([...seqs].sort((a, b) => a - b), seqs);
    // --session continues the same session.
    const q = chat(["-p", "again", "--session", last.session_id], chatEnv(h, FAKE));
    assert.equal(await q.exited, 0);
    assert.equal(q.stdout, "echo: again\n");
  });

  it("--session of a session whose directory was removed continues in this one and says so; a kept one says nothing", async () => {
    const gone = realpathSync(mkdtempSync(join(tmpdir(), "berth-gone-")));
    const here = realpathSync(mkdtempSync(join(tmpdir(), "berth-here-")));
    const p = chat(["-p", "first", "--json"], chatEnv(h, FAKE), { cwd: gone });
    assert.equal(await p.exited, 0);
    const sid = (JSON.parse(p.stdout.trim().split("\n").at(-1)!) as Record<string, string>).session_id!;
    const kept = chat(["-p", "kept", "--session", sid], chatEnv(h, FAKE), { cwd: here });
    assert.equal(await kept.exited, 0);
    assert.doesNotMatch(kept.stderr, /can no longer be used/);
    rmSync(gone, { recursive: true });
    const q = chat(["-p", "again", "--session", sid], chatEnv(h, FAKE), { cwd: here });
    assert.equal(await q.exited, 0);
    assert.equal(q.stdout, "echo: again\n");
    assert.match(q.stderr, new RegExp(`berth chat: the session's directory ${gone} can no longer be used \\(it was removed or is not a directory\\); it continues in ${here}, where its tools now run`));
  });

  it("a failed turn exits non-zero", async () => {
    fake.script([{ status: 400 }]);
    const p = chat(["-p", "this fails"], chatEnv(h, FAKE));
    assert.equal(await p.exited, 1);
    // One line naming the cause: the HTTP status and the failure code.
    assert.match(p.stderr, /the turn failed \(provider_error: [^\n]*400/);
    assert.doesNotMatch(p.stderr + p.stdout, /SECRET-ERROR-BODY-MARKER|\n\s+at /);
  });

  it("Ctrl-C (SIGINT) cancels the turn: partial text, exit 130", async () => {
    fake.script([{ steps: [{ text: "partial answer" }, { waitForAbort: true }] }]);
    const p = chat(["-p", "slow", "--json"], chatEnv(h, FAKE));
    await p.until(/"turn\.assistant_delta"/);
    p.child.kill("SIGINT");
    assert.equal(await p.exited, 130);
    const last = JSON.parse(p.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
    assert.equal(last.status, "cancelled");
    assert.equal(last.assistant_text, "partial answer");
  });

  it("no ready provider: a plain explanation of how to fix it, no stack trace", async () => {
    const p = chat(["-p", "hi"], chatEnv(home()));
    assert.equal(await p.exited, 1);
    assert.equal(p.stdout, "");
    assert.match(p.stderr, /No model provider is ready/);
    assert.match(p.stderr, /ANTHROPIC_API_KEY/);
    assert.match(p.stderr, /\/login/);
    assert.match(p.stderr, /Ollama/);
    assert.doesNotMatch(p.stderr, /\n\s+at /);
  });

  it("a custom provider declared but not selected: names it and the two ways to select it, which then work", async () => {
    // A new user follows the README: declares a local server under "providers" and runs berth chat.
    const declared = home(fake.port);
    const p = chat(["-p", "hi"], chatEnv(declared));
    assert.equal(await p.exited, 1);
    assert.equal(p.stdout, "");
    const file = join(declared, "settings.json");
    assert.equal(
      p.stderr,
      `berth chat: no provider is selected, so the default (anthropic) was tried, and it has no credentials. ${file} declares provider "fake", but nothing selects it: add "provider": "fake", "model": "fake-model" to that file, or start with MC_PROVIDER=fake MC_MODEL=fake-model\n`,
    );
    const viaEnv = chat(["-p", "via env"], chatEnv(declared, FAKE));
    assert.equal(await viaEnv.exited, 0, viaEnv.stderr);
    assert.equal(viaEnv.stdout, "echo: via env\n");
    const settings = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
    writeFileSync(file, JSON.stringify({ ...settings, provider: "fake", model: "fake-model" }));
    const viaFile = chat(["-p", "via file"], chatEnv(declared));
    assert.equal(await viaFile.exited, 0, viaFile.stderr);
    assert.equal(viaFile.stdout, "echo: via file\n");
  });

  it("usage errors exit 2 with usage, no stack trace", async () => {
    const p = chat(["--json"], chatEnv(home()));
    assert.equal(await p.exited, 2);
    assert.match(p.stderr, /--json needs -p/);
    assert.doesNotMatch(p.stderr, /\n\s+at /);
  });
});
