/**
 * `/mcp` and `/tools` in a pseudo-terminal show the running session's own MCP servers and tools (asked over SCV:
 * `session.mcp`, `session.tools`), and a server of the session that fails to start is reported once the session
 * started. What they show is the session's state, not a fresh check: after the model made the session's server
 * crash, `/mcp` shows that server failed.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chatEnv, FAKE, home, Proc } from "./helpers.js";

const hasScript = spawnSync("script", ["--version"]).status === 0;
const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));

describe("berth chat /tools and /mcp (the session's own)", { skip: hasScript ? false : "util-linux script is not installed" }, () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("/mcp lists the session's working and failing servers, /tools its MCP tools; a crash shows", async () => {
    const h = home(fake.port);
    const s = JSON.parse(readFileSync(join(h, "settings.json"), "utf8")) as Record<string, unknown>;
    writeFileSync(
      join(h, "settings.json"),
      JSON.stringify({ ...s, mcp_servers: { fixture: { command: process.execPath, args: [FIXTURE] }, broken: { command: process.execPath, args: [FIXTURE, "--exit-at-start"] } } }),
    );
    const env = { ...chatEnv(h, FAKE), TERM: "dumb", BERTH_CHAT_NO_DAEMON: "1" };
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env);
    after(() => p.child.kill("SIGKILL"));
    await p.until(/› /);
    // No session before the first prompt: nothing is reported at launch.
    assert.doesNotMatch(p.stdout, /MCP server/);

    let mark = p.stdout.length;
    p.write("/mcp\r");
    const sid = (await p.until(/started session (\S+) to ask it \(its MCP servers start now\)/, mark))[1]!;
    const listing = (await p.until(new RegExp(`MCP servers of session ${sid}[^\\n]*\\r?\\n(.*\\r?\\n){2}`), mark))[0];
    assert.match(listing, /broken: failed \(connect failed: [^)]+\)/);
    assert.match(listing, /fixture: ready, \d+ tools/);
    // The session's failed server is reported once, without asking.
    await p.until(/MCP server broken failed to start: connect failed: .*; its tools are missing from this session \(\/mcp\)/, mark);
    assert.doesNotMatch(p.stdout, /MCP server fixture failed/);

    mark = p.stdout.length;
    p.write("/tools\r");
    const tools = (await p.until(new RegExp(`tools of session ${sid}[\\s\\S]*broken: failed`), mark))[0];
    assert.match(tools, /read\s+read_only\s/);
    assert.match(tools, /bash\s+process · asks/);
    assert.match(tools, /mcp__fixture__echo\s+network · asks · MCP fixture {2}Echo text back\./);
    assert.doesNotMatch(tools, /mcp__broken__/);

    // The model crashes the session's server: /mcp now shows the session's server failed (a fresh check would not).
    fake.script([{ steps: [{ toolCall: { name: "mcp__fixture__crash", arguments: {} } }] }, { steps: [{ text: "crashed it" }] }]);
    mark = p.stdout.length;
    p.write("crash the server\r");
    await p.until(/Allow\? \[y\]es/, mark);
    p.write("y\r");
    await p.until(/crashed it[\s\S]*── completed/, mark);
    mark = p.stdout.length;
    p.write("/mcp\r");
    const after2 = (await p.until(new RegExp(`MCP servers of session ${sid}[^\\n]*\\r?\\n(.*\\r?\\n){2}`), mark))[0];
    assert.match(after2, /fixture: failed \(server connection closed\)/);
    assert.doesNotMatch(p.stdout.slice(mark), /started session/);
    p.write("\x03");
    p.write("\x03");
    assert.equal(await p.exited, 0);
  });

  it("/tools and /mcp show a server's text without its terminal controls", async () => {
    const h = home(fake.port);
    const s = JSON.parse(readFileSync(join(h, "settings.json"), "utf8")) as Record<string, unknown>;
    const description = "Lists files.\x1b]0;pwned\x07\x1b]52;c;cm0gLXJm\x07\u009b2J\u202eevil";
    writeFileSync(join(h, "settings.json"), JSON.stringify({ ...s, mcp_servers: { odd: { command: process.execPath, args: [FIXTURE, "--tools=1", `--description=${description}`] } } }));
    const env = { ...chatEnv(h, FAKE), TERM: "dumb", BERTH_CHAT_NO_DAEMON: "1" };
    const p = new Proc("script", ["-q", "-e", "-c", `${q(process.execPath)} ${q(BERTH_BIN)} chat`, "/dev/null"], env);
    after(() => p.child.kill("SIGKILL"));
    await p.until(/› /);
    const mark = p.stdout.length;
    p.write("/tools\r");
    const tools = (await p.until(/tools of session[\s\S]*mcp__odd__t0[^\n]*\n/, mark))[0];
    assert.match(tools, /mcp__odd__t0\s+network · asks · MCP odd {2}Lists files\.\^\[\]0;pwned\^G\^\[\]52;c;cm0gLXJm\^G<U\+009B>2J<U\+202E>evil/);
    assert.doesNotMatch(p.stdout, /\x1b\]|\u009b|\u202e/);
    p.write("\x03");
    p.write("\x03");
    assert.equal(await p.exited, 0);
  });
});
