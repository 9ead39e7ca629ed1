/**
 * Project-level MCP servers (`.berth/settings.json`): an interactive chat asks once whether to trust the project,
 * the answer is remembered, and only then do the project's servers' tools reach the model; `-p` never asks and
 * starts them only in a trusted project.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chat, chatEnv, FAKE, home, Proc } from "./helpers.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));

function project(): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "berth-proj-")));
  mkdirSync(join(dir, ".berth"));
  writeFileSync(join(dir, ".berth", "settings.json"), JSON.stringify({ mcpServers: { projfix: { command: process.execPath, args: [FIXTURE] } } }));
  return dir;
}

describe("berth chat project MCP servers", { skip: hasScript ? false : "util-linux script is not installed" }, () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("asks once to trust the project; -p uses a trusted project's servers and skips an untrusted one's", async () => {
    const h = home(fake.port);
    const dir = project();
    // -p in an untrusted project: not started, and said so.
    let before = fake.requests.length;
    const untrusted = chat(["-p", "hi"], chatEnv(h, FAKE), { cwd: dir });
    assert.equal(await untrusted.exited, 0);
    assert.match(untrusted.stderr, /this project's MCP servers \(\.berth\/settings\.json\) were not started/);
    assert.doesNotMatch(fake.requests.slice(before).map((r) => r.body).join(""), /mcp__projfix__echo/);

    const env = { ...chatEnv(h, FAKE), TERM: "dumb" };
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env, dir);
    after(() => p.child.kill("SIGKILL"));
    await p.until(/declares MCP servers:\s+projfix: \S+ \S+mcp-server\.js[\s\S]*Trust this project/);
    p.write("y\r");
    await p.until(/project trusted/);
    before = fake.requests.length;
    p.write("hello tools\r");
    await p.until(/echo: hello tools[\s\S]*── completed/);
    assert.match(fake.requests.slice(before).map((r) => r.body).join(""), /mcp__projfix__echo/);
    p.write("\x03\x03");
    assert.equal(await p.exited, 0);

    // Remembered: -p now starts them, without a question.
    before = fake.requests.length;
    const trusted = chat(["-p", "hi again"], chatEnv(h, FAKE), { cwd: dir });
    assert.equal(await trusted.exited, 0);
    assert.doesNotMatch(trusted.stderr, /not started/);
    assert.match(fake.requests.slice(before).map((r) => r.body).join(""), /mcp__projfix__echo/);
  });
});
