/**
 * The model `berth chat` names is the model its turns use, whoever serves them. Through a daemon, the chat's own
 * `MC_PROVIDER` / `MC_MODEL` used to be ignored (the daemon's selection ran while the banner named the chat's); and a
 * daemon with a selection of its own (its `MC_MODEL`) ran that while the banner named the chat's settings. Each case
 * checks the banner's `model provider/model` against the `model` of the request the loopback fake provider received.
 * A provider the daemon does not know is named with where to declare it, never replaced by another.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { startDaemon, type Daemon } from "../scv/client.js";
import { chat, chatEnv } from "./helpers.js";

const noTrace = (s: string): void => assert.doesNotMatch(s, /\n\s+at |Error:/);

describe("berth chat names the model its turns use", () => {
  let fake: FakeProvider;
  /** Two providers, three models; the settings select fake/m-one. */
  let h: string;
  before(async () => {
    fake = await startFakeProvider();
    h = mkdtempSync(join(tmpdir(), "berth-models-"));
    const def = (models: string[]) => ({ api: "openai-chat", base_url: `http://127.0.0.1:${fake.port}/v1`, auth: "none", models: models.map((id) => ({ id })) });
    writeFileSync(join(h, "settings.json"), JSON.stringify({ providers: { fake: def(["m-one", "m-two"]), other: def(["o-model"]) }, provider: "fake", model: "m-one" }));
  });
  after(() => fake.close());

  /** The models of the provider requests made since `from`. */
  const modelsSince = (from: number): unknown[] => fake.requests.slice(from).filter((r) => r.api === "openai-chat").map((r) => (r.json as { model?: unknown }).model);

  /** Runs one piped prompt interactively: the banner's model and the model the request carried. */
  const piped = async (env: NodeJS.ProcessEnv, viaDaemon: boolean): Promise<{ banner: string; sent: unknown[] }> => {
    const from = fake.requests.length;
    const p = chat([], env, { stdin: "hello\n" });
    assert.equal(await p.exited, 0, p.stdout + p.stderr);
    assert.equal(/via berth daemon/.test(p.stdout), viaDaemon, p.stdout);
    const m = /^ {2}· model (\S+) · /m.exec(p.stdout);
    assert.ok(m !== null, p.stdout);
    return { banner: m[1]!, sent: modelsSince(from) };
  };

  it("without a daemon: the banner names the settings' model, and the request carries it", async () => {
    const r = await piped(chatEnv(h, { BERTH_CHAT_NO_DAEMON: "1" }), false);
    assert.equal(r.banner, "fake/m-one");
    assert.deepEqual(r.sent, ["m-one"]);
  });

  describe("through a daemon", () => {
    let d: Daemon;
    let scvHome: string;
    before(async () => {
      scvHome = mkdtempSync(join(tmpdir(), "berth-scvh-"));
      d = await startDaemon({ MC_HOME: h, SCV_HOME: scvHome });
    });
    after(() => d.stop());

    it("no override: the banner names the daemon's selection, which the request carries", async () => {
      const r = await piped(chatEnv(h, { SCV_HOME: scvHome }), true);
      assert.equal(r.banner, "fake/m-one");
      assert.deepEqual(r.sent, ["m-one"]);
    });

    it("MC_MODEL of the chat: the banner and the request carry it (interactive and -p)", async () => {
      const env = chatEnv(h, { SCV_HOME: scvHome, MC_MODEL: "m-two" });
      const r = await piped(env, true);
      assert.equal(r.banner, "fake/m-two");
      assert.deepEqual(r.sent, ["m-two"]);
      const from = fake.requests.length;
      const p = chat(["-p", "hi"], env);
      assert.equal(await p.exited, 0, p.stderr);
      assert.equal(p.stdout, "echo: hi\n");
      assert.deepEqual(modelsSince(from), ["m-two"]);
    });

    it("MC_PROVIDER of the chat: that provider and its model, in the banner and the request", async () => {
      const env = chatEnv(h, { SCV_HOME: scvHome, MC_PROVIDER: "other" });
      const r = await piped(env, true);
      assert.equal(r.banner, "other/o-model");
      assert.deepEqual(r.sent, ["o-model"]);
      const from = fake.requests.length;
      const p = chat(["-p", "hi"], env);
      assert.equal(await p.exited, 0, p.stderr);
      assert.deepEqual(modelsSince(from), ["o-model"]);
    });
  });

  it("a daemon with a selection of its own (its MC_MODEL): the banner names it, as the request carries it", { timeout: 60_000 }, async () => {
    const scvHome = mkdtempSync(join(tmpdir(), "berth-scvh-"));
    const d = await startDaemon({ MC_HOME: h, SCV_HOME: scvHome, MC_MODEL: "m-two" });
    try {
      const r = await piped(chatEnv(h, { SCV_HOME: scvHome }), true);
      assert.equal(r.banner, "fake/m-two");
      assert.deepEqual(r.sent, ["m-two"]);
      // The chat's own choice still wins over the daemon's.
      const o = await piped(chatEnv(h, { SCV_HOME: scvHome, MC_MODEL: "m-one" }), true);
      assert.equal(o.banner, "fake/m-one");
      assert.deepEqual(o.sent, ["m-one"]);
    } finally {
      await d.stop();
    }
  });

  it("a provider the daemon does not know: named, with where to declare it; no other provider is used", { timeout: 60_000 }, async () => {
    // The daemon's home declares only `fake`; the chat's home also declares `other`.
    const daemonHome = mkdtempSync(join(tmpdir(), "berth-dhome-"));
    const def = { api: "openai-chat", base_url: `http://127.0.0.1:${fake.port}/v1`, auth: "none", models: [{ id: "m-one" }] };
    writeFileSync(join(daemonHome, "settings.json"), JSON.stringify({ providers: { fake: def }, provider: "fake" }));
    const scvHome = mkdtempSync(join(tmpdir(), "berth-scvh-"));
    const d = await startDaemon({ MC_HOME: daemonHome, SCV_HOME: scvHome });
    try {
      const env = chatEnv(h, { SCV_HOME: scvHome, MC_PROVIDER: "other" });
      const from = fake.requests.length;
      const want =
        'the berth daemon serving this chat does not know provider "other" (MC_PROVIDER=other): declare it under "providers" in the settings.json of the daemon\'s MC_HOME and start the chat again, or unset MC_PROVIDER to use the daemon\'s selection';
      const p = chat(["-p", "hi"], env);
      assert.equal(await p.exited, 1, p.stderr);
      assert.ok(p.stderr.includes(`berth chat: ${want}\n`), p.stderr);
      noTrace(p.stderr);
      // Piped prompts: said once, and the rest (which the daemon would refuse alike) are not run.
      const i = chat([], env, { stdin: "hello\nagain\n" });
      assert.equal(await i.exited, 1, i.stdout + i.stderr);
      assert.equal(i.stdout.split(want).length - 1, 1, i.stdout);
      assert.match(i.stderr, /^berth chat: stopped: every later prompt would fail alike \(see above\), so the remaining piped prompts were not run\n$/);
      noTrace(i.stderr);
      assert.deepEqual(modelsSince(from), [], "no turn ran on another provider");
    } finally {
      await d.stop();
    }
  });
});
