/**
 * A relative MC_HOME / SCV_HOME (`MC_HOME=./state berth chat`) is resolved once, at startup, against the directory
 * Berth was started in, and the processes Berth starts inherit the absolute path: a tool's shell that changes
 * directory (where a child Berth would run) still names the same home. Real `berth chat -p` against the loopback
 * fake provider; the tool's output is read where the model gets it, in the next provider request.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { chat, chatEnv, FAKE } from "./helpers.js";

describe("berth chat with a relative home", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("MC_HOME=./state and SCV_HOME=./scv resolve against the start directory; processes Berth starts get them absolute", async () => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), "berth-relhome-")));
    mkdirSync(join(cwd, "state"), { mode: 0o700 });
    mkdirSync(join(cwd, "sub"));
    const providers = { fake: { api: "openai-chat", base_url: `http://127.0.0.1:${fake.port}/v1`, auth: "none", models: [{ id: "fake-model" }] } };
    writeFileSync(join(cwd, "state", "settings.json"), JSON.stringify({ providers }), { mode: 0o600 });
    // The tool's shell runs from another directory, as a child Berth started by a tool would.
    fake.script([{ steps: [{ toolCall: { name: "bash", arguments: { command: 'cd sub && printf "SCV=%s;" "$SCV_HOME"' } } }] }, { steps: [{ text: "ok" }] }]);
    const p = chat(["-p", "where is home", "--yolo"], chatEnv("./state", { ...FAKE, SCV_HOME: "./scv" }), { cwd });
    assert.equal(await p.exited, 0, p.stderr);
    const toolResult = fake.requests.at(-1)!.body;
    assert.ok(toolResult.includes(`SCV=${join(cwd, "scv")};`), toolResult.slice(0, 2000));
    // Berth's own state went to <start dir>/state, and nothing to <start dir>/sub.
    assert.ok(existsSync(join(cwd, "state", "sessions")), readdirSync(join(cwd, "state")).join(", "));
    assert.deepEqual(readdirSync(join(cwd, "sub")), []);
  });
});
