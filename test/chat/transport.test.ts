/**
 * Where `berth chat` runs its session when no daemon answers: `-p` serves itself (the SCV server in the chat
 * process), the interactive chat (here: piped lines) starts a `berth stdio` child. Either way a tool cannot read the
 * credentials: not from its environment, not from its parent's `/proc/<pid>/environ`, not from any process's
 * (the launcher executed directly, as a user runs it, moved them to a descriptor; docs/security.md). And `-p`
 * reports MCP servers that failed to start, one stderr line each, naming the server and the cause, never a secret.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { chat, chatEnv, FAKE, home, Proc } from "./helpers.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));

/** Every readable /proc/<pid>/environ, the parent's command line and environ, its own environment, a marker. */
const SCAN = `for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done; echo "parent: $(tr '\\0' ' ' < /proc/$PPID/cmdline)"; tr '\\0' '\\n' < /proc/$PPID/environ; env; echo SCAN-DONE`;

function secrets(): Record<string, string> {
  const v = (p: string): string => `${p}-${randomBytes(12).toString("hex")}`;
  return { ANTHROPIC_API_KEY: v("sk-ant"), GITHUB_TOKEN: v("ghp"), DB_PASSWORD: v("pw"), FAKE_API_KEY: v("fake") };
}

function keyedHome(fake: FakeProvider): string {
  const h = mkdtempSync(join(tmpdir(), "berth-chat-"));
  const fakeDef = { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, api_key_env: "FAKE_API_KEY", models: [{ id: "fake-model" }] };
  writeFileSync(join(h, "settings.json"), JSON.stringify({ providers: { fake: fakeDef }, provider: "fake", model: "fake-model" }));
  return h;
}

/** Runs the launcher itself (its sh prologue hands credentials over on a descriptor); stdout+stderr and the exit code. */
function launch(args: string[], env: NodeJS.ProcessEnv, stdin: string): Promise<{ code: number | null; out: string }> {
  const child = spawn(BERTH_BIN, args, { env, cwd: mkdtempSync(join(tmpdir(), "berth-cwd-")), stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stdin.end(stdin);
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, out })));
}

describe("berth chat without a daemon", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  for (const mode of [
    { name: "-p serves itself in-process", args: ["chat", "-p", "scan", "--yolo"], stdin: "", parent: /parent: \S+ \S*bin\/berth chat -p scan --yolo/ },
    { name: "the interactive chat (piped lines) starts a berth stdio child", args: ["chat", "--yolo"], stdin: "scan\n", parent: /parent: \S+ \S*bin\/berth stdio/ },
  ]) {
    it(`${mode.name}; its tools cannot read a credential`, { timeout: 60_000 }, async () => {
      const keys = secrets();
      const h = keyedHome(fake);
      const base = fake.requests.length;
      fake.script([{ steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: SCAN } } }] }, { steps: [{ text: "scanned" }] }]);
      const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, MC_HOME: h, NO_COLOR: "1", ...keys };
      const r = await launch(mode.args, env, mode.stdin);
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, /scanned/);
      const reqs = (await fake.waitForRequests(base + 2)).slice(base);
      // The chat still holds the credential: the provider got it.
      assert.equal(reqs[0]!.headers.authorization, `Bearer ${keys.FAKE_API_KEY}`);
      const toolResult = reqs[1]!.body;
      assert.match(toolResult, /SCAN-DONE/);
      // Which process ran the tool: the chat itself for -p, a `berth stdio` child otherwise.
      assert.match(toolResult, mode.parent);
      for (const [name, value] of Object.entries(keys)) {
        assert.ok(!toolResult.includes(value), `${name}'s value reached the tool`);
        assert.ok(!r.out.includes(value), `${name}'s value reached the terminal`);
      }
    });
  }

  it("-p reports an MCP server that failed to start: one stderr line naming it and the cause, no secret", { timeout: 60_000 }, async () => {
    const h = home(fake.port);
    const secret = `tok-${randomBytes(12).toString("hex")}`;
    const s = JSON.parse(readFileSync(join(h, "settings.json"), "utf8")) as Record<string, unknown>;
    writeFileSync(
      join(h, "settings.json"),
      JSON.stringify({
        ...s,
        mcp_servers: {
          fixture: { command: process.execPath, args: [FIXTURE] },
          broken: { command: process.execPath, args: [FIXTURE, "--exit-at-start"], env: { BROKEN_TOKEN: secret } },
        },
      }),
    );
    for (const json of [false, true]) {
      const p = chat(["-p", "hello mcp", ...(json ? ["--json"] : [])], chatEnv(h, FAKE));
      assert.equal(await p.exited, 0, p.stderr);
      const reports = p.stderr.split("\n").filter((l) => l.includes("MCP server"));
      assert.deepEqual(reports.length, 1, p.stderr);
      assert.match(reports[0]!, /^berth chat: MCP server broken failed to start: connect failed: [^\n]+; check its entry under mcp_servers in settings$/);
      assert.doesNotMatch(p.stderr, /fixture: exiting at start/, "the server's own stderr is not shown");
      assert.ok(!(p.stderr + p.stdout).includes(secret), "a server's env value reached the terminal");
      // The answer is unchanged: stdout has only the answer (or only the JSON events).
      if (json) for (const l of p.stdout.trim().split("\n")) assert.equal(typeof (JSON.parse(l) as { event: unknown }).event, "string");
      else assert.equal(p.stdout, "echo: hello mcp\n");
    }
  });

  it("-p: SIGTERM cancels the turn like Ctrl-C: its tool process is stopped, the session records the end, exit 143", { timeout: 60_000 }, async () => {
    const h = home(fake.port);
    const cwd = mkdtempSync(join(tmpdir(), "berth-cwd-"));
    const pidFile = join(cwd, "tool.pid");
    fake.script([{ steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: `echo $$ > ${pidFile}; exec sleep 60` } } }] }]);
    const p = chat(["-p", "run it", "--yolo"], chatEnv(h, FAKE), { cwd });
    let pid = 0;
    while (pid === 0) {
      if (existsSync(pidFile)) pid = Number(readFileSync(pidFile, "utf8").trim()) || 0;
      if (pid === 0) await new Promise((r) => setTimeout(r, 20));
    }
    p.child.kill("SIGTERM");
    assert.equal(await p.exited, 143, p.stderr);
    const sid = /session (\S+)/.exec(p.stderr)?.[1];
    assert.ok(sid !== undefined, p.stderr);
    const records = readFileSync(join(h, "sessions", `${sid}.jsonl`), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(records.at(-1)!.kind, "terminal");
    assert.equal(records.at(-1)!.status, "cancelled");
    const alive = (): boolean => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    while (alive()) await new Promise((r) => setTimeout(r, 20));
  });

  it("-p with two MCP servers and a warm tool-list cache: the first token does not wait for them", { timeout: 60_000 }, async () => {
    const h = home(fake.port);
    const cwd = mkdtempSync(join(tmpdir(), "berth-cwd-"));
    const gate = join(cwd, "servers-may-start");
    const s = JSON.parse(readFileSync(join(h, "settings.json"), "utf8")) as Record<string, unknown>;
    const server = (name: string) => ({ command: process.execPath, args: [FIXTURE, `--wait-for=${gate}`, `--name=${name}`] });
    writeFileSync(join(h, "settings.json"), JSON.stringify({ ...s, mcp_servers: { one: server("one"), two: server("two") } }));
    // A first run in this directory, servers free to start: it fills the cache.
    writeFileSync(gate, "");
    const first = chat(["-p", "first"], chatEnv(h, FAKE), { cwd });
    assert.equal(await first.exited, 0, first.stderr);
    // Second run: the servers cannot start until the gate exists again, yet the answer streams.
    rmSync(gate);
    const base = fake.requests.length;
    const p = chat(["-p", "second", "--json"], chatEnv(h, FAKE), { cwd });
    await p.until(/"turn\.assistant_delta"/);
    assert.equal(existsSync(gate), false);
    // The model was offered the servers' tools from the cache.
    const req = (await fake.waitForRequests(base + 1))[base]!;
    assert.match(req.body, /mcp__one__echo/);
    assert.match(req.body, /mcp__two__echo/);
    writeFileSync(gate, "");
    assert.equal(await p.exited, 0, p.stderr);
    assert.doesNotMatch(p.stderr, /MCP server/);
  });

  it("-p into a pipe closed early (| head -1): the turn ends recorded, exit 0, no trace", { timeout: 60_000 }, async () => {
    const h = home(fake.port);
    const cmd = `set -o pipefail; ${JSON.stringify(process.execPath)} ${JSON.stringify(BERTH_BIN)} chat -p 'long answer 3000' --json </dev/null | head -1`;
    const r = new Proc("bash", ["-c", cmd], chatEnv(h, FAKE));
    r.child.stdin!.end();
    assert.equal(await r.exited, 0, r.stderr);
    assert.equal((JSON.parse(r.stdout) as { event: string }).event, "turn.started");
    assert.doesNotMatch(r.stderr, /\n\s+at |EPIPE|Error:/);
    // The session's last record is the turn's end (cancelled, or completed when the answer won the race).
    const [file] = readdirSync(join(h, "sessions")).filter((f) => f.endsWith(".jsonl"));
    const last = JSON.parse(readFileSync(join(h, "sessions", file!), "utf8").trim().split("\n").at(-1)!) as Record<string, unknown>;
    assert.equal(last.kind, "terminal");
    assert.match(String(last.status), /^(cancelled|completed)$/);
  });

  it("-p with no socket file, or a socket path nothing listens on, serves itself with the same answer", { timeout: 60_000 }, async () => {
    const h = home(fake.port);
    const scv = mkdtempSync(join(tmpdir(), "berth-scv-"));
    // No socket file at $SCV_HOME/state/server.sock.
    const none = chat(["-p", "hello"], chatEnv(h, { ...FAKE, SCV_HOME: scv }));
    assert.equal(await none.exited, 0, none.stderr);
    assert.equal(none.stdout, "echo: hello\n");
    assert.match(none.stderr, /^session \S+\n$/);
    // A file in the socket's place: tried, refused, then served in-process, with the file named (daemon-socket.test.ts).
    mkdirSync(join(scv, "state"));
    writeFileSync(join(scv, "state", "server.sock"), "");
    const dead = chat(["-p", "hello"], chatEnv(h, { ...FAKE, SCV_HOME: scv }));
    assert.equal(await dead.exited, 0, dead.stderr);
    assert.equal(dead.stdout, "echo: hello\n");
    assert.match(dead.stderr, /^berth chat: \S+server\.sock is a regular file, not a berth daemon's socket [^\n]*\nsession \S+\n$/);
  });

  it("-p with only working MCP servers reports nothing about them", { timeout: 60_000 }, async () => {
    const h = home(fake.port);
    const s = JSON.parse(readFileSync(join(h, "settings.json"), "utf8")) as Record<string, unknown>;
    writeFileSync(join(h, "settings.json"), JSON.stringify({ ...s, mcp_servers: { one: { command: process.execPath, args: [FIXTURE] } } }));
    const p = chat(["-p", "hello"], chatEnv(h, FAKE));
    assert.equal(await p.exited, 0, p.stderr);
    assert.match(p.stderr, /^session \S+\n$/);
  });
});
