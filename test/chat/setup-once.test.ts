/**
 * A broken setup is said once. Piped prompts (`printf 'a\nb\n' | berth chat`) with no provider ready, or a key
 * variable unset, get the cause once on stderr and exit 1 without running any prompt (as `-p` does); a failure every
 * later prompt would meet alike (the key missing where the turns run) stops the rest. Through a daemon, the key is
 * looked for where the turns run, the daemon: a key exported only in the daemon's shell works, and one exported only in
 * the chat's shell fails naming the variable and the daemon as where to set it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { startDaemon } from "../scv/client.js";
import { chat, chatEnv } from "./helpers.js";

const count = (s: string, sub: string): number => s.split(sub).length - 1;
const noTrace = (s: string): void => assert.doesNotMatch(s, /\n\s+at |Error:/);
const sessions = (h: string): string[] => (existsSync(join(h, "sessions")) ? readdirSync(join(h, "sessions")).filter((f) => f.endsWith(".jsonl")) : []);

describe("berth chat says a broken setup once", () => {
  let fake: FakeProvider;
  let keyed: string;
  before(async () => {
    fake = await startFakeProvider();
    keyed = mkdtempSync(join(tmpdir(), "berth-keyed-"));
    const def = { api: "openai-chat", base_url: `http://127.0.0.1:${fake.port}/v1`, api_key_env: "KEYED_TEST_KEY", models: [{ id: "fake-model" }] };
    writeFileSync(join(keyed, "settings.json"), JSON.stringify({ providers: { keyed: def }, provider: "keyed", model: "fake-model" }));
  });
  after(() => fake.close());

  it("piped prompts with no provider ready: the setup help once on stderr, no prompt run, exit 1", async () => {
    const h = mkdtempSync(join(tmpdir(), "berth-none-"));
    const p = chat([], chatEnv(h), { stdin: "a\nb\nc\n" });
    assert.equal(await p.exited, 1, p.stdout + p.stderr);
    const all = p.stdout + p.stderr;
    assert.equal(count(all, "No model provider is ready"), 1, all);
    assert.match(p.stderr, /^berth chat: No model provider is ready\. Fix it in one of these ways:\n {2}- Anthropic: set ANTHROPIC_API_KEY/);
    assert.match(p.stderr, /\nberth chat: no prompt was run\n$/);
    assert.doesNotMatch(all, /\^J|── failed/);
    assert.deepEqual(sessions(h), []);
    noTrace(p.stderr);
  });

  it("stdin closed with no prompt and no provider ready (npm start < /dev/null): the setup help and one closing line, exit 1", async () => {
    const h = mkdtempSync(join(tmpdir(), "berth-none-"));
    const p = chat([], chatEnv(h), { stdin: "" });
    assert.equal(await p.exited, 1, p.stdout + p.stderr);
    assert.equal(count(p.stderr, "No model provider is ready"), 1, p.stderr);
    assert.match(p.stderr, /\nberth chat: no prompt was run\n$/);
    assert.doesNotMatch(p.stderr, /stdin ended without a prompt/);
    noTrace(p.stderr);
  });

  it("piped prompts with the key variable unset: the cause once, naming the variable, no request, exit 1", async () => {
    const before = fake.requests.length;
    const p = chat([], chatEnv(keyed), { stdin: "a\nb\nc\n" });
    assert.equal(await p.exited, 1, p.stdout + p.stderr);
    const all = p.stdout + p.stderr;
    assert.equal(count(all, "reads its API key from KEYED_TEST_KEY"), 1, all);
    assert.match(p.stderr, /^berth chat: provider keyed reads its API key from KEYED_TEST_KEY \(its api_key_env in \S+settings\.json\), which is not set; set KEYED_TEST_KEY/);
    assert.equal(fake.requests.length, before);
    noTrace(p.stderr);
  });

  it("piped prompts whose setup breaks between two turns: the help shown as lines, the rest not run, exit 1", async () => {
    const h = mkdtempSync(join(tmpdir(), "berth-breaks-"));
    const def = { api: "openai-chat", base_url: `http://127.0.0.1:${fake.port}/v1`, auth: "none", models: [{ id: "fake-model" }] };
    writeFileSync(join(h, "settings.json"), JSON.stringify({ providers: { fake: def }, provider: "fake", model: "fake-model" }));
    const p = chat([], chatEnv(h));
    p.write("first\n");
    await p.until(/echo: first\n── completed/);
    // Now no provider is ready: the settings select nothing and no key is set.
    writeFileSync(join(h, "settings.json"), "{}");
    const before = fake.requests.length;
    p.child.stdin!.end("second\nthird\n");
    assert.equal(await p.exited, 1, p.stdout + p.stderr);
    // The setup help after the failed turn, line by line as at the start (it was one line joined by ^J).
    assert.match(p.stdout, /\nNo model provider is ready\. Fix it in one of these ways:\n {2}- Anthropic: /);
    assert.doesNotMatch(p.stdout, /\^J/);
    assert.equal(count(p.stdout, "── failed"), 1, p.stdout);
    assert.match(p.stderr, /^berth chat: stopped: every later prompt would fail alike \(see above\), so the remaining piped prompts were not run\n$/m);
    assert.equal(fake.requests.length, before);
    noTrace(p.stderr);
  });

  describe("through a berth daemon, the key is the daemon's", () => {
    it("a key exported only where the daemon started: -p and piped prompts run", { timeout: 60_000 }, async () => {
      const scvHome = mkdtempSync(join(tmpdir(), "berth-scvh-"));
      const d = await startDaemon({ MC_HOME: keyed, SCV_HOME: scvHome, KEYED_TEST_KEY: "key-of-the-daemon" });
      try {
        const before = fake.requests.length;
        const one = chat(["-p", "hi"], chatEnv(keyed, { SCV_HOME: scvHome }));
        assert.equal(await one.exited, 0, one.stderr);
        assert.equal(one.stdout, "echo: hi\n");
        const piped = chat([], chatEnv(keyed, { SCV_HOME: scvHome }), { stdin: "one\ntwo\n" });
        assert.equal(await piped.exited, 0, piped.stdout + piped.stderr);
        assert.match(piped.stdout, /via berth daemon/);
        assert.match(piped.stdout, /echo: one[\s\S]*echo: two/);
        assert.doesNotMatch(piped.stdout, /not set/);
        const reqs = (await fake.waitForRequests(before + 3)).slice(before);
        for (const r of reqs) assert.equal(r.headers.authorization, "Bearer key-of-the-daemon");
      } finally {
        await d.stop();
      }
    });

    it("a key exported only where the chat started: the failure names the variable and the daemon; piped prompts stop after one", { timeout: 60_000 }, async () => {
      const scvHome = mkdtempSync(join(tmpdir(), "berth-scvh-"));
      const d = await startDaemon({ MC_HOME: keyed, SCV_HOME: scvHome });
      try {
        const env = chatEnv(keyed, { SCV_HOME: scvHome, KEYED_TEST_KEY: "key-of-the-chat" });
        const before = fake.requests.length;
        const daemonWay = "berth chat: the berth daemon serving this chat runs its turns with its own environment, not this shell's: export KEYED_TEST_KEY=… where berth daemon starts and restart the daemon, or stop the daemon so that berth chat serves itself";
        const one = chat(["-p", "hi"], env);
        assert.equal(await one.exited, 1, one.stderr);
        assert.match(one.stderr, /the turn failed \(provider_error: the provider credential is missing: KEYED_TEST_KEY /);
        assert.ok(one.stderr.includes(`${daemonWay}\n`), one.stderr);
        noTrace(one.stderr);
        const piped = chat([], env, { stdin: "one\ntwo\nthree\n" });
        assert.equal(await piped.exited, 1, piped.stdout + piped.stderr);
        assert.equal(count(piped.stdout, "── failed"), 1, piped.stdout);
        assert.ok(piped.stdout.includes(daemonWay.replace(/^berth chat: /, "")), piped.stdout);
        assert.match(piped.stderr, /the remaining piped prompts were not run/);
        assert.equal(fake.requests.length, before, "no request went out without a key");
        assert.ok(!(one.stderr + piped.stdout + piped.stderr).includes("key-of-the-chat"));
      } finally {
        await d.stop();
      }
    });
  });
});
