/**
 * Issue 18, "Secrets and authority": a bash tool call cannot read the credentials the service holds — not from its
 * own environment, not from /proc/$PPID/environ, not from any process's /proc/<pid>/environ — when the service runs
 * the way frontends run it (the launcher executed directly) and when `berth chat`'s client library starts it.
 * Other credential-like variables are stripped from tool environments by name pattern.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { parseExportP } from "../../src/cli/handoff.js";
import { credentialHandoff, secretNameMatcher } from "../../src/core/secret-names.js";
import { cleanToolEnv } from "../../src/runtime/env.js";
import { spawnService } from "../../src/client/app-service/index.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN, MAGI_BIN, REPO_ROOT } from "../helpers/paths.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { waitTerminal } from "../turns/helpers.js";

/** Prints every readable /proc/<pid>/environ plus its own environment, then a marker. */
const SCAN = `for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done; echo "ppid:"; tr '\\0' '\\n' < /proc/$PPID/environ; env; echo SCAN-DONE`;

function secrets(): Record<string, string> {
  const v = (p: string) => `${p}-${randomBytes(12).toString("hex")}`;
  return {
    ANTHROPIC_API_KEY: v("sk-ant"),
    OPENAI_API_KEY: v("sk-oai"),
    GITHUB_TOKEN: v("ghp"),
    DB_PASSWORD: v("pw"),
    aws_secret_access_key: v("aws"),
    FAKE_API_KEY: v("fake"),
  };
}

function settings(fake: FakeProvider): Record<string, unknown> {
  return {
    providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, api_key_env: "FAKE_API_KEY", models: [{ id: "fake-model" }] } },
    provider: "fake",
    model: "fake-model",
  };
}

function assertNoSecret(text: string, keys: Record<string, string>): void {
  for (const [name, value] of Object.entries(keys)) assert.ok(!text.includes(value), `${name}'s value reached the tool`);
}

for (const bin of [
  { name: "berth service", path: BERTH_BIN, args: ["service"] },
  { name: "magi-code --app service", path: MAGI_BIN, args: ["--app", "service"] },
]) {
  test(`bash reads the stripped keys from /proc/$PPID/environ (issue 18): ${bin.name} launched directly hides them`, { timeout: 60_000 }, async () => {
    const fake = await startFakeProvider();
    const keys = secrets();
    const svc = new ServiceProcess({ bin: bin.path, args: bin.args, exec: true, env: keys });
    try {
      mkdirSync(svc.home, { recursive: true });
      writeFileSync(join(svc.home, "settings.json"), JSON.stringify(settings(fake)));
      fake.script([{ steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: SCAN } } }] }, { steps: [{ text: "done" }] }]);
      assert.equal((await svc.initialize()).error, null);
      await svc.request("turn.start", { prompt: "scan" }, {}, "t1");
      const ev = await waitTerminal(svc, "t1");
      assert.equal(ev.find((e) => e.event === "turn.terminal")?.payload.status, "completed");
      const reqs = await fake.waitForRequests(2);
      // The service still holds the credential: the provider got it.
      assert.equal(reqs[0]!.headers.authorization, `Bearer ${keys.FAKE_API_KEY}`);
      const toolResult = reqs[1]!.body;
      assert.match(toolResult, /SCAN-DONE/);
      assert.match(toolResult, /ppid:/);
      assertNoSecret(toolResult, keys);
      assertNoSecret(svc.stderr + svc.lines.join("\n"), keys);
    } finally {
      svc.end();
      await svc.exited;
      await fake.close();
    }
  });
}

test("bash reads the stripped keys from /proc/$PPID/environ (issue 18): a service started by the client library (berth chat) hides them", { timeout: 60_000 }, async () => {
  const fake = await startFakeProvider();
  const keys = secrets();
  const home = mkdtempSync(join(tmpdir(), "berth-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "berth-cwd-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify(settings(fake)));
  fake.script([{ steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: SCAN } } }] }, { steps: [{ text: "done" }] }]);
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, MC_HOME: home, ...keys };
  const handle = spawnService({ env, cwd });
  try {
    await handle.client.initialize();
    const turn = await handle.client.startTurn({ prompt: "scan" });
    assert.equal((await turn.result).status, "completed");
    const reqs = await fake.waitForRequests(2);
    assert.equal(reqs[0]!.headers.authorization, `Bearer ${keys.FAKE_API_KEY}`);
    assert.match(reqs[1]!.body, /SCAN-DONE/);
    assertNoSecret(reqs[1]!.body, keys);
  } finally {
    await handle.close();
    await fake.close();
  }
});

/**
 * A `berth chat -p scan --yolo` started as `command args` in `cwd` (no daemon) with fresh keys in its environment, its
 * model running `scan` in bash once: it exits 0, the provider got the key, and neither the second request (the scan's
 * output) nor what the chat printed holds a key. `body` gets that second request's body for further checks.
 */
async function chatScan(command: string, args: string[], cwd: string, scan: string, body: (text: string) => void): Promise<void> {
  const fake = await startFakeProvider();
  const keys = secrets();
  const home = mkdtempSync(join(tmpdir(), "berth-home-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify(settings(fake)));
  fake.script([{ steps: [{ toolCall: { id: "c1", name: "bash", arguments: { command: scan } } }] }, { steps: [{ text: "done" }] }]);
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, MC_HOME: home, BERTH_CHAT_NO_DAEMON: "1", ...keys };
  const child = spawn(command, args, { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (out += d));
  try {
    const code = await new Promise<number | null>((resolve) => child.once("close", (c) => resolve(c)));
    assert.equal(code, 0, out);
    const reqs = await fake.waitForRequests(2);
    assert.equal(reqs[0]!.headers.authorization, `Bearer ${keys.FAKE_API_KEY}`);
    assert.match(reqs[1]!.body, /SCAN-DONE/);
    body(reqs[1]!.body);
    assertNoSecret(reqs[1]!.body, keys);
    assertNoSecret(out, keys);
  } finally {
    child.kill();
    await fake.close();
  }
}

test("bash reads the stripped keys from /proc/$PPID/environ (issue 18): berth chat -p (its SCV server in-process) hides them", { timeout: 60_000 }, async () => {
  // The launcher executed directly, as a user runs it; with no daemon, -p serves itself in-process (the interactive
  // chat's `berth stdio` child: test/chat/transport.test.ts).
  const cwd = mkdtempSync(join(tmpdir(), "berth-cwd-"));
  await chatScan(BERTH_BIN, ["chat", "-p", "scan", "--yolo"], cwd, SCAN, (text) => assert.match(text, /ppid:/));
});

test("bash reads the stripped keys from /proc/$PPID/environ (issue 18): berth chat started by `npm start` (README's quick start) hides them", { timeout: 60_000 }, async () => {
  // Only the parent's environ: npm itself, a process the user started with the keys, keeps them in its own.
  const scanParent = `tr '\\0' '\\n' < /proc/$PPID/environ; echo SCAN-DONE`;
  await chatScan("npm", ["start", "--silent", "--", "-p", "scan", "--yolo"], REPO_ROOT, scanParent, (text) => assert.match(text, /MC_HOME=/));
});

test("tool environments strip a fixed deny-list (issue 18): credential-like names are stripped by pattern", () => {
  const env = { PATH: "/bin", GITHUB_TOKEN: "t", npm_config__authToken: "n", DB_PASSWORD: "p", X_SECRET_Y: "s", GOOGLE_APPLICATION_CREDENTIALS: "c", MY_API_KEY: "k", MC_HOME: "/h", EDITOR: "vi" };
  assert.deepEqual(cleanToolEnv(env), { PATH: "/bin", EDITOR: "vi" });
  // Configurable: settings `tools.secret_env_patterns` replaces the default list.
  assert.deepEqual(Object.keys(cleanToolEnv(env, [], ["*TOKEN*"])).sort(), ["DB_PASSWORD", "EDITOR", "GOOGLE_APPLICATION_CREDENTIALS", "MY_API_KEY", "PATH", "X_SECRET_Y"]);
  assert.equal(secretNameMatcher()("keyboard_layout"), true, "patterns are case-insensitive");
});

test("the launcher handoff round-trips any value through dash and bash `export -p` quoting", () => {
  const value = `it's "q" $x \`b\` \\ \nline2\ttab ünï 🚢`;
  const { env, handoff } = credentialHandoff({ PATH: "/bin", A_TOKEN: value, PLAIN: "p" });
  assert.deepEqual(env, { PATH: "/bin", PLAIN: "p", BERTH_HANDOFF_FD: "3", BERTH_HANDOFF_PPID: String(process.pid) });
  // Stale handoff variables of the caller's own environment are never passed on.
  assert.deepEqual(credentialHandoff({ A_TOKEN: "t", BERTH_HANDOFF_FD: "9", BERTH_HANDOFF_PID: "1", BERTH_HANDOFF_PPID: "1" }, 42).env, { BERTH_HANDOFF_FD: "3", BERTH_HANDOFF_PPID: "42" });
  assert.deepEqual(parseExportP(handoff!), [["A_TOKEN", value]]);
  for (const shell of [["dash", "-c"], ["bash", "--posix", "-c"], ["bash", "-c"]]) {
    let out: string;
    try {
      out = execFileSync(shell[0]!, [...shell.slice(1), "export -p"], { env: { A_TOKEN: value, B_KEY: "simple" }, encoding: "utf8" });
    } catch {
      continue; // that shell is not installed
    }
    const parsed = new Map(parseExportP(out));
    assert.equal(parsed.get("A_TOKEN"), value, shell.join(" "));
    assert.equal(parsed.get("B_KEY"), "simple", shell.join(" "));
  }
});

test("bash reads the stripped keys from /proc/<berth pid>/environ (issue 18): berth daemon launched directly has none in its environ", { timeout: 60_000 }, async () => {
  const keys = secrets();
  const home = mkdtempSync(join(tmpdir(), "berth-home-"));
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, BERTH_HOME: home, ...keys };
  const child = spawn(BERTH_BIN, ["daemon", "--berth-runtime"], { env, stdio: ["ignore", "pipe", "pipe"] });
  try {
    let out = "";
    child.stdout.setEncoding("utf8");
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (d: string) => {
        out += d;
        if (out.includes("\n")) resolve();
      });
      child.once("exit", (code) => reject(new Error(`daemon exited ${code}`)));
    });
    assert.match(out, /"ready":true/);
    // Same PID as the executed launcher: the handoff exec'd node in place.
    const environ = readFileSync(`/proc/${child.pid}/environ`, "utf8");
    assert.match(environ, /BERTH_HOME=/);
    assertNoSecret(environ, keys);
    assert.match(readFileSync(`/proc/${child.pid}/cmdline`, "utf8"), /node/);
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("close", r));
  }
});
