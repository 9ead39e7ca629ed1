/**
 * `berth chat` with pipes and broken setups: `-p -`, stdin appended to `-p`, piped lines without `-p`, an empty pipe,
 * EPIPE; `--continue` and `--session <prefix>`; the daemon's SCV socket used when one is up; one-line causes for
 * setup failures (settings, MC_PROVIDER, key variable, MC_MODEL; turn failures are in failures.test.ts);
 * `--version` and `--help` for every command.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, chownSync, closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { CatalogCache } from "../../src/store/catalog/cache.js";
import { findProvider, providerFingerprint } from "../../src/store/catalog/providers.js";
import { startDaemon } from "../scv/client.js";
import { chat, chatEnv, FAKE, home, Proc } from "./helpers.js";

const noTrace = (s: string): void => assert.doesNotMatch(s, /\n\s+at |EPIPE|Error:/);

describe("berth chat pipes", () => {
  let fake: FakeProvider;
  let h: string;
  before(async () => {
    fake = await startFakeProvider();
    h = home(fake.port);
  });
  after(() => fake.close());

  it("-p - reads the prompt from stdin", async () => {
    const p = chat(["-p", "-"], chatEnv(h, FAKE), { stdin: "prompt from a pipe\n" });
    assert.equal(await p.exited, 0);
    assert.match(p.stdout, /^echo: prompt from a pipe/);
  });

  it("cmd | berth chat -p PROMPT appends stdin to the prompt", async () => {
    const before = fake.requests.length;
    const p = chat(["-p", "summarize"], chatEnv(h, FAKE), { stdin: "line one of the log\n" });
    assert.equal(await p.exited, 0);
    const body = fake.requests.slice(before).map((r) => r.body).join("");
    assert.match(body, /summarize\\n\\nline one of the log/);
  });

  it("stdin from a file or /dev/null (read at once) works like a pipe: appended, -p -, empty", async () => {
    const run = (args: string[], stdinPath: string): Promise<{ code: number | null; stdout: string; stderr: string }> =>
      new Promise((resolve) => {
        const fd = openSync(stdinPath, "r");
        const c = spawn(process.execPath, [BERTH_BIN, "chat", ...args], { env: chatEnv(h, FAKE), cwd: mkdtempSync(join(tmpdir(), "berth-cwd-")), stdio: [fd, "pipe", "pipe"] });
        closeSync(fd);
        let stdout = "";
        let stderr = "";
        c.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
        c.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
        c.on("close", (code) => resolve({ code, stdout, stderr }));
      });
    const file = join(mkdtempSync(join(tmpdir(), "berth-stdin-")), "log.txt");
    writeFileSync(file, "line from a file\n");
    const before = fake.requests.length;
    const appended = await run(["-p", "summarize"], file);
    assert.equal(appended.code, 0, appended.stderr);
    assert.match(fake.requests.slice(before).map((r) => r.body).join(""), /summarize\\n\\nline from a file/);
    const whole = await run(["-p", "-"], file);
    assert.equal(whole.code, 0, whole.stderr);
    assert.match(whole.stdout, /^echo: line from a file/);
    const empty = await run(["-p", "-"], "/dev/null");
    assert.equal(empty.code, 2);
    assert.match(empty.stderr, /the prompt is empty \(stdin had no text\)/);
    const plain = await run(["-p", "hello"], "/dev/null");
    assert.equal(plain.code, 0, plain.stderr);
    assert.match(plain.stdout, /^echo: hello/);
  });

  it("piped lines without -p run one prompt each; an empty pipe explains itself and exits 2", async () => {
    const p = chat([], chatEnv(h, FAKE), { stdin: "first line\nsecond line\n" });
    assert.equal(await p.exited, 0);
    assert.match(p.stdout, /echo: first line[\s\S]*── completed[\s\S]*echo: second line[\s\S]*── completed/);
    const e = chat([], chatEnv(h, FAKE), { stdin: "" });
    assert.equal(await e.exited, 2);
    assert.match(e.stderr, /stdin ended without a prompt/);
  });

  it("a prompt over 256 KiB is refused before sending, naming the limit; exactly 256 KiB runs", async () => {
    const over = chat(["-p", "-"], chatEnv(h, FAKE), { stdin: "x".repeat(256 * 1024 + 1) });
    assert.equal(await over.exited, 1);
    assert.match(over.stderr, /the prompt is 262,145 bytes; the limit is 262,144 bytes \(256 KiB\)/);
    const at = chat(["-p", "-"], chatEnv(h, FAKE), { stdin: "y".repeat(256 * 1024) });
    assert.equal(await at.exited, 0, at.stderr);
    assert.match(at.stdout, /^echo: yyyy/);
  });

  it("EPIPE (berth chat -p … --json | head -1) ends quietly", async () => {
    const cmd = `set -o pipefail; ${JSON.stringify(process.execPath)} ${JSON.stringify(BERTH_BIN)} chat -p 'long answer 3000' --json </dev/null | head -1`;
    // Not spawnSync: the fake provider runs in this process.
    const r = new Proc("bash", ["-c", cmd], chatEnv(h, FAKE));
    r.child.stdin!.end();
    assert.equal(await r.exited, 0, r.stderr);
    assert.equal(r.stdout.trim().split("\n").length, 1);
    assert.equal(JSON.parse(r.stdout).event, "turn.started");
    noTrace(r.stderr);
  });

  it("--continue picks the latest session of this directory; --session takes a unique prefix", async () => {
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), "berth-cont-")));
    const a = chat(["-p", "remember the word kumquat"], chatEnv(h, FAKE), { cwd });
    assert.equal(await a.exited, 0);
    const id = /^session (\S+)$/m.exec(a.stderr)![1]!;
    let before = fake.requests.length;
    const c = chat(["-p", "what was the word", "--continue"], chatEnv(h, FAKE), { cwd });
    assert.equal(await c.exited, 0);
    assert.match(c.stderr, new RegExp(`^session ${id}$`, "m"));
    assert.match(fake.requests.slice(before).map((r) => r.body).join(""), /kumquat/);
    before = fake.requests.length;
    const s = chat(["-p", "and again", "--session", id.slice(0, 14)], chatEnv(h, FAKE));
    assert.equal(await s.exited, 0);
    assert.match(s.stderr, new RegExp(`^session ${id}$`, "m"));
    assert.match(fake.requests.slice(before).map((r) => r.body).join(""), /kumquat/);
    const bad = chat(["-p", "x", "--session", "zzz-no-such"], chatEnv(h, FAKE));
    assert.equal(await bad.exited, 1);
    assert.match(bad.stderr, /no saved session starts with "zzz-no-such"/);
  });

  it("uses a running berth daemon's SCV socket", async () => {
    const scvHome = mkdtempSync(join(tmpdir(), "berth-scvh-"));
    const d = await startDaemon({ MC_HOME: h, SCV_HOME: scvHome, ...FAKE });
    try {
      const p = chat([], chatEnv(h, { ...FAKE, SCV_HOME: scvHome }), { stdin: "over the socket\n" });
      assert.equal(await p.exited, 0);
      assert.match(p.stdout, /via berth daemon/);
      assert.match(p.stdout, /echo: over the socket/);
    } finally {
      await d.stop();
    }
  });
});

describe("berth chat failure causes", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  const withSettings = (text: string): string => {
    const h = mkdtempSync(join(tmpdir(), "berth-set-"));
    writeFileSync(join(h, "settings.json"), text);
    return h;
  };
  const fakeDef = (port: number, extra: Record<string, unknown> = {}) => ({ api: "openai-chat", base_url: `http://127.0.0.1:${port}/v1`, auth: "none", models: [{ id: "fake-model" }, { id: "fake-model-large" }], ...extra });
  const run = async (h: string, env: Record<string, string>): Promise<{ code: number | null; err: string }> => {
    const p = chat(["-p", "hi"], chatEnv(h, env));
    const code = await p.exited;
    noTrace(p.stderr);
    return { code, err: p.stderr };
  };

  it("settings: malformed JSON → path:line:col; wrong shape → JSON path and reason; empty file", async () => {
    let h = withSettings('{\n  "provider": "fake",\n  "model": oops\n}');
    let r = await run(h, {});
    assert.equal(r.code, 1);
    assert.match(r.err, new RegExp(`settings: ${join(h, "settings.json").replace(/[.]/g, "\\.")}:3:12: malformed JSON`));
    h = withSettings(JSON.stringify({ providers: { fake: { ...fakeDef(fake.port), api: "openai-chatt" } } }));
    r = await run(h, {});
    assert.match(r.err, /settings: \S+settings\.json: \$\.providers\.fake\.api: Invalid enum value.*'openai-chatt'/);
    h = withSettings("");
    r = await run(h, {});
    assert.match(r.err, /settings\.json: the file is empty/);
  });

  it("settings: a syntax error is located and named by its kind, never quoted (the text there may be a key)", async () => {
    const file = (h: string): string => join(h, "settings.json").replace(/[.]/g, "\\.");
    let h = withSettings('{"providers": {"x": {"api_key": sk-abcdefghijklmnopqrstuvwxyz0123}}}');
    let r = await run(h, {});
    assert.equal(r.code, 1);
    assert.match(r.err, new RegExp(`${file(h)}:1:33: malformed JSON \\(unexpected letter: strings need double quotes \\(true, false and null are lower case\\)\\)`));
    assert.doesNotMatch(r.err, /sk-|abcdef/);
    h = withSettings('{\n  "model": "fake-model",\n}\n');
    r = await run(h, {});
    assert.match(r.err, new RegExp(`${file(h)}:3:1: malformed JSON \\(unexpected '}': remove the trailing comma before it\\)`));
    h = withSettings('{"provider": "fake" "model": "fake-model"}');
    r = await run(h, {});
    assert.match(r.err, /:1:21: malformed JSON \(unexpected '"': a comma is missing before it\)/);
    h = withSettings("{'provider': 'fake'}");
    r = await run(h, {});
    assert.match(r.err, /:1:2: malformed JSON \(unexpected "'": JSON strings take double quotes\)/);
    h = withSettings('{"provider" "fake"}');
    r = await run(h, {});
    assert.match(r.err, /:1:13: malformed JSON \(unexpected '"': a ':' is missing after the key\)/);
    h = withSettings('{"provider": "fake", // the default\n"model": "fake-model"}');
    r = await run(h, {});
    assert.match(r.err, /:1:22: malformed JSON \(unexpected '\/': JSON has no comments\)/);
    h = withSettings('{"provider": "fake"}\n{"model": "fake-model"}');
    r = await run(h, {});
    assert.match(r.err, /:2:1: malformed JSON \(unexpected '\{' after the settings object: remove it, or put both in one object\)/);
  });

  it("settings: nesting 5,000 levels deep is named as too deep, with the bound and the fix (not as invalid JSON)", async () => {
    const h = withSettings(`{"x":${"[".repeat(4999)}${"]".repeat(4999)}}`);
    const r = await run(h, {});
    assert.equal(r.code, 1);
    assert.ok(
      r.err.includes(`settings: ${join(h, "settings.json")}: nests values deeper than settings may (64 levels of objects and arrays); flatten it or remove the deep value`),
      r.err,
    );
  });

  it("settings: a directory in its place and an oversized file are named as such", async () => {
    let h = mkdtempSync(join(tmpdir(), "berth-set-"));
    mkdirSync(join(h, "settings.json"));
    let r = await run(h, {});
    assert.equal(r.code, 1);
    assert.match(r.err, /settings\.json: is a directory; settings\.json must be a file/);
    // At the limit the file is read (and here fails on its content); one byte past it, it is refused for its size.
    const sized = (n: number): string => '{"x":"' + "a".repeat(n - 8) + '"}';
    h = withSettings(sized(4 * 1024 * 1024));
    r = await run(h, {});
    assert.doesNotMatch(r.err, /larger than/);
    h = withSettings(sized(4 * 1024 * 1024 + 1));
    r = await run(h, {});
    assert.equal(r.code, 1);
    assert.match(r.err, /settings\.json: the file is larger than settings files may be \(4 MiB\)/);
  });

  /** Whether `setpriv` can run a command here (as root, to drop root's override of file permissions). */
  const setpriv = ((): boolean => spawnSync("setpriv", ["--version"]).status === 0)();
  const asRoot = process.getuid?.() === 0;
  it("settings: an unreadable settings.json names the command that makes it readable", { skip: asRoot && !setpriv ? "as root, needs setpriv to drop CAP_DAC_OVERRIDE" : false }, async () => {
    // Root reads any file: as root, `berth chat` runs without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH, so the refusal
    // is the kernel's real EACCES, as a user sees it.
    const drop = ["--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-dac_override,-dac_read_search"];
    const [cmd, pre] = asRoot ? ["setpriv", [...drop, process.execPath]] : [process.execPath, []];
    const runAs = (h: string): Promise<{ code: number | null; err: string }> =>
      new Promise((resolve) => {
        const c = spawn(cmd, [...pre, BERTH_BIN, "chat", "-p", "hi"], { env: chatEnv(h), cwd: mkdtempSync(join(tmpdir(), "berth-cwd-")), stdio: ["ignore", "ignore", "pipe"] });
        let err = "";
        c.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
        c.on("close", (code) => resolve({ code, err }));
      });
    // A home whose path the shell would split: the command names it quoted, ready to paste.
    const h = join(mkdtempSync(join(tmpdir(), "berth-set-")), "my 'berth' home");
    mkdirSync(h);
    const file = join(h, "settings.json");
    const quoted = `'${file.replace(/'/g, "'\\''")}'`;
    writeFileSync(file, "{}");
    chmodSync(file, 0o000);
    let r = await runAs(h);
    assert.equal(r.code, 1);
    noTrace(r.err);
    assert.ok(r.err.includes(`settings: ${file}: cannot be read (EACCES: permission denied); make it readable by you: chmod 600 ${quoted}\n`), r.err);
    // The command named is the fix: the same chat then gets past the settings (to the missing provider).
    chmodSync(file, 0o600);
    r = await runAs(h);
    assert.doesNotMatch(r.err, /cannot be read/);
    if (!asRoot) return;
    // Another user's file: chmod alone would be refused, so taking it over comes first.
    chownSync(file, 65534, 65534);
    r = await runAs(h);
    assert.ok(r.err.includes(`settings: ${file}: cannot be read (EACCES: permission denied); it belongs to another user: sudo chown "$(id -un)" ${quoted} && chmod 600 ${quoted}\n`), r.err);
  });

  it("settings: a FIFO in place of the global or the project's settings.json is named, never waited on", async () => {
    const h = mkdtempSync(join(tmpdir(), "berth-set-"));
    execFileSync("mkfifo", [join(h, "settings.json")]);
    const r = await run(h, {});
    assert.equal(r.code, 1);
    assert.match(r.err, /settings\.json: is not a regular file \(a FIFO, socket or device\); settings\.json must be a file/);
    // A cloned repository's .berth/settings.json: the same, with that file's path.
    const cwd = realpathSync(mkdtempSync(join(tmpdir(), "berth-repo-")));
    mkdirSync(join(cwd, ".berth"));
    execFileSync("mkfifo", [join(cwd, ".berth", "settings.json")]);
    const p = chat(["-p", "hi"], chatEnv(withSettings(JSON.stringify({ providers: { fake: fakeDef(fake.port) } })), { MC_PROVIDER: "fake", MC_MODEL: "fake-model" }), { cwd });
    assert.equal(await p.exited, 1);
    noTrace(p.stderr);
    assert.ok(p.stderr.includes(`settings: ${join(cwd, ".berth", "settings.json")}: is not a regular file (a FIFO, socket or device)`), p.stderr);
  });

  it("settings: a leading byte order mark (as Windows editors save) is accepted", async () => {
    const h = withSettings("\uFEFF" + JSON.stringify({ providers: { fake: fakeDef(fake.port) } }));
    const p = chat(["-p", "hi"], chatEnv(h, { MC_PROVIDER: "fake", MC_MODEL: "fake-model" }));
    assert.equal(await p.exited, 0, p.stderr);
    assert.match(p.stdout, /^echo: hi/);
  });

  it("MC_PROVIDER unknown, key variable unset, MC_MODEL not in the catalog: each named", async () => {
    const h = withSettings(JSON.stringify({ providers: { fake: fakeDef(fake.port), keyed: { ...fakeDef(fake.port), auth: undefined, api_key_env: "KEYED_TEST_KEY" } } }));
    let r = await run(h, { MC_PROVIDER: "nope" });
    assert.match(r.err, /MC_PROVIDER=nope names no known provider \(known: anthropic, fake, keyed, openai-codex/);
    r = await run(h, { MC_PROVIDER: "keyed" });
    // The file that names the variable, and the two ways to fix it.
    assert.equal(
      r.err,
      `berth chat: provider keyed reads its API key from KEYED_TEST_KEY (its api_key_env in ${join(h, "settings.json")}), which is not set; ` +
        "set KEYED_TEST_KEY to the key where berth chat starts (export KEYED_TEST_KEY=…), or name the variable holding it in api_key_env\n",
    );
    // Set but empty is not set either.
    r = await run(h, { MC_PROVIDER: "keyed", KEYED_TEST_KEY: "" });
    assert.match(r.err, /reads its API key from KEYED_TEST_KEY \(its api_key_env in [^)]*\), which is not set; /);
    r = await run(h, { MC_PROVIDER: "fake", MC_MODEL: "fake-modl" });
    assert.match(r.err, /MC_MODEL=fake-modl is not a model of provider fake \(did you mean fake-model/);
    // The key itself pasted where the variable's name belongs: said so, and never echoed.
    const pasted = withSettings(JSON.stringify({ providers: { keyed: { ...fakeDef(fake.port), auth: undefined, api_key_env: "sk-proj-0123456789abcdefPASTED" } } }));
    r = await run(pasted, { MC_PROVIDER: "keyed" });
    assert.equal(r.code, 1);
    assert.match(r.err, /provider keyed's api_key_env in \S+settings\.json must name an environment variable \(such as MY_PROVIDER_KEY\) holding the key, not the key itself/);
    assert.doesNotMatch(r.err, /PASTED/);
    // A key pasted into a field whose error quotes the value (an enum): redacted in the explanation.
    r = await run(withSettings(JSON.stringify({ providers: { keyed: { ...fakeDef(fake.port), api: "sk-proj-0123456789abcdefPASTED" } } })), { MC_PROVIDER: "keyed" });
    assert.equal(r.code, 1);
    assert.match(r.err, /\$\.providers\.keyed\.api: Invalid enum value\. Expected 'openai-chat' \| 'openai-responses' \| 'anthropic', received '/);
    assert.doesNotMatch(r.err, /PASTED/);
  });

  it("a model missing from the provider's cached catalog is named with the catalog's closest models", async () => {
    const def = { api: "openai-chat", base_url: `http://127.0.0.1:${fake.port}/v1`, auth: "none" };
    const h = withSettings(JSON.stringify({ providers: { cat: def } }));
    const entry = findProvider({ providers: { cat: { ...def, auth: "none", models: [] } } } as never, "cat")!;
    const model = (id: string) => ({ model_id: id, label: id, context_window: null, max_output_tokens: null, available_thinking_levels: [], disabled: false });
    await new CatalogCache({ home: h }).write("cat", providerFingerprint(entry, {}), [model("gpt-4.1-mini"), model("gpt-4.1"), model("o3")]);
    const r = await run(h, { MC_PROVIDER: "cat", MC_MODEL: "gpt-4.1-mimi" });
    assert.equal(r.code, 1);
    assert.match(r.err, /MC_MODEL=gpt-4\.1-mimi is not a model of provider cat \(did you mean gpt-4\.1-mini/);
  });
});

describe("--version and --help", () => {
  for (const cmd of ["chat", "service", "stdio", "daemon", "channel"]) {
    it(`berth ${cmd} --help exits 0; --version prints the version`, () => {
      const h = spawnSync(process.execPath, [BERTH_BIN, cmd, "--help"], { input: "", encoding: "utf8", env: chatEnv(home()) });
      assert.equal(h.status, 0, h.stderr);
      assert.match(h.stdout + h.stderr, /usage/);
      const v = spawnSync(process.execPath, [BERTH_BIN, cmd, "--version"], { input: "", encoding: "utf8", env: chatEnv(home()) });
      assert.equal(v.status, 0);
      assert.match(v.stdout, /^berth \d+\.\d+\.\d+\n$/);
    });
  }
});

describe("berth chat settings", () => {
  let fake: FakeProvider;
  before(async () => {
    fake = await startFakeProvider();
  });
  after(() => fake.close());

  it("mcpServers is accepted as an alias of mcp_servers (its tools reach the model); a wrong shape is named", async () => {
    const fixture = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));
    const h = home(fake.port);
    const s = JSON.parse(readFileSync(join(h, "settings.json"), "utf8")) as Record<string, unknown>;
    writeFileSync(join(h, "settings.json"), JSON.stringify({ ...s, mcpServers: { fixture: { command: process.execPath, args: [fixture] } } }));
    const before = fake.requests.length;
    // Its tools must be in the first request even where the server takes longer than the default 5 s to start.
    const p = chat(["-p", "hi"], chatEnv(h, { ...FAKE, BERTH_MCP_STARTUP_WAIT_MS: "600000" }));
    assert.equal(await p.exited, 0, p.stderr);
    assert.match(fake.requests.slice(before).map((r) => r.body).join(""), /mcp__fixture__echo/);
    writeFileSync(join(h, "settings.json"), JSON.stringify({ ...s, mcpServers: { fixture: { args: [] } } }));
    const bad = chat(["-p", "hi"], chatEnv(h, FAKE));
    assert.equal(await bad.exited, 1);
    assert.match(bad.stderr, /settings\.json: \$\.mcpServers\.fixture\.command: Required/);
  });
});
