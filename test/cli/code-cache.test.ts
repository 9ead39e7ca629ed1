/**
 * The V8 code cache of a fresh session process (docs/runtime.md, "First turn of a fresh process"): `npm run build` makes
 * dist/cold/berth-<command>.cjs and its cache, per command (scripts/code-cache.mjs); the launchers run `berth stdio`,
 * `berth service`, `berth chat` and `magi-code` from them, and falls back to the ES module chunks when the cache is
 * missing, made by another Node, made for another build of the script, corrupt, or switched off (BERTH_CODE_CACHE=0).
 * Which path ran is read from BERTH_DEBUG_TIMING's `boot …` mark; every case must still serve a whole turn. The
 * fallback cases run on a copy of the launchers and dist/cold/ in a scratch tree (dist/src and node_modules linked),
 * so the repository's own files are never touched.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { REPO_ROOT } from "../helpers/paths.js";
import { COLD, bundled, cachePath, packageCopy, restCachePath, restScriptPath } from "../helpers/package-copy.js";

const CACHE = cachePath;

function home(fake: FakeProvider): string {
  const dir = mkdtempSync(join(tmpdir(), "berth-cc-home-"));
  writeFileSync(join(dir, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } }, provider: "fake", model: "fake-model" }));
  return dir;
}

const scratch = (): string => packageCopy("berth-cc-");

interface Outcome {
  boot: string;
  terminal: string;
  stderr: string;
  /** Every frame the server wrote. */
  lines: string[];
}

/**
 * `berth stdio` from `root`'s launcher: handshake, session (in `workDir`, else in the state directory), one turn; the
 * `boot …` mark and the terminal line.
 */
function stdioTurn(root: string, fake: FakeProvider, extraEnv: NodeJS.ProcessEnv = {}, workDir?: string): Promise<Outcome> {
  const dir = home(fake);
  const env: NodeJS.ProcessEnv = { PATH: process.env["PATH"], HOME: dir, MC_HOME: dir, BERTH_DEBUG_TIMING: "1", ...extraEnv };
  const child = spawn(join(root, "bin", "berth"), ["stdio"], { env, cwd: dir, stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  let buf = "";
  const lines: string[] = [];
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d));
  const send = (m: unknown): void => void child.stdin.write(JSON.stringify(m) + "\n");
  return new Promise((resolve, reject) => {
    let terminal = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      buf += d;
      for (let k; (k = buf.indexOf("\n")) !== -1; ) {
        const line = buf.slice(0, k);
        buf = buf.slice(k + 1);
        lines.push(line);
        const m = JSON.parse(line) as { type: string; session_id?: string };
        if (m.type === "initialized") send({ type: "session.start", request_id: "s", cwd: workDir ?? dir });
        else if (m.type === "session.started") send({ type: "turn.start", request_id: "t", session_id: m.session_id, prompt: "hello" });
        else if (/^turn\.(completed|failed|cancelled)$/.test(m.type) || m.type === "error") {
          terminal = m.type;
          child.stdin.end();
        }
      }
    });
    send({ type: "initialize", request_id: "i", protocol_version: 3 });
    child.on("error", reject);
    child.on("close", () => {
      rmSync(dir, { recursive: true, force: true });
      resolve({ boot: /berth-timing \S+ (boot [^\n]*)/.exec(stderr)?.[1] ?? "(no boot mark)", terminal, stderr, lines });
    });
  });
}

test("the build made a code cache for each session command and the daemon, for this Node", { skip: !bundled() && "dist/cold/ is older than the last tsc build" }, () => {
  const ids = new Set<string>();
  for (const command of ["service", "stdio", "chat", "acp", "daemon"]) {
    assert.ok(existsSync(CACHE(REPO_ROOT, command)), `no ${command} cache for ${process.version}`);
    const script = readFileSync(join(COLD, `berth-${command}.cjs`), "latin1");
    const split = command === "service" || command === "stdio";
    const tail = /\/\/berth-build:([0-9a-f]{16})( rest)?\s*$/.exec(script.slice(-64));
    const id = tail?.[1];
    assert.ok(id !== undefined, `${command}: the script ends with its build ID`);
    ids.add(id);
    assert.equal(readFileSync(CACHE(REPO_ROOT, command)).toString("latin1", 0, 16), id, `${command}: its cache names its own script's build`);
    assert.ok(!/[^\x00-\x7f]/.test(script), `${command}: the script is ASCII (a one-byte source string)`);
    // The session doors' scripts come in two parts: what a handshake needs, and the rest (loaded after it).
    assert.equal(tail?.[2] !== undefined, split, `${command}: ${split ? "a" : "no"} second part named in its tail`);
    assert.equal(existsSync(restScriptPath(REPO_ROOT, command)), split, `${command}: ${split ? "a" : "no"} second part`);
    let whole = script;
    if (split) {
      const rest = readFileSync(restScriptPath(REPO_ROOT, command), "latin1");
      assert.equal(/\/\/berth-build:([0-9a-f]{16})\s*$/.exec(rest.slice(-64))?.[1], id, `${command}: the second part is of the same build`);
      assert.equal(readFileSync(restCachePath(REPO_ROOT, command)).toString("latin1", 0, 16), id, `${command}: the second part's cache names that build`);
      assert.ok(!/[^\x00-\x7f]/.test(rest), `${command}: the second part is ASCII`);
      assert.ok(script.length * 4 < rest.length, `${command}: the first part is the small one (${script.length} against ${rest.length} bytes)`);
      assert.doesNotMatch(script, /require\("berth-rest:/, `${command}: the first part imports the second lazily only`);
      assert.match(rest, /require\("berth-core:/, `${command}: the second part uses the first's modules, not copies`);
      whole += rest;
    }
    assert.equal(whole.includes('require("better-sqlite3")'), command === "daemon", `${command}: the daemon's SQLite is in the daemon's script only`);
    // Each script holds its own command only: the other commands' modules are left out (a stub in their place).
    for (const [other, module] of [["service", "./service.js"], ["stdio", "./stdio.js"], ["chat", "./chat/index.js"], ["acp", "./acp.js"], ["daemon", "./daemon.js"]] as const) {
      const stub = `berth: ${module} is not in dist/cold/berth-${command}.cjs`;
      assert.equal(script.includes(stub), other !== command, `${command}: ${module} ${other === command ? "in" : "left out of"} its script`);
    }
  }
  assert.equal(ids.size, 5, "one build per script");
});

test("berth stdio runs from the code cache, and without it (BERTH_CODE_CACHE=0) from the modules", { skip: !bundled() && "dist/cold/ is older than the last tsc build", timeout: 60_000 }, async () => {
  const fake = await startFakeProvider({ loop: true });
  try {
    const cached = await stdioTurn(REPO_ROOT, fake);
    assert.equal(cached.boot, "boot code cache", cached.stderr);
    assert.equal(cached.terminal, "turn.completed", cached.stderr);
    const off = await stdioTurn(REPO_ROOT, fake, { BERTH_CODE_CACHE: "0" });
    assert.equal(off.boot, "(no boot mark)", off.stderr);
    assert.equal(off.terminal, "turn.completed", off.stderr);
  } finally {
    await fake.close();
  }
});

test("a missing, foreign, stale or corrupt cache or script falls back to the modules and still serves a turn", { skip: !bundled() && "dist/cold/ is older than the last tsc build", timeout: 120_000 }, async () => {
  const fake = await startFakeProvider({ loop: true });
  const roots: string[] = [];
  const fresh = (): string => {
    const r = scratch();
    roots.push(r);
    return r;
  };
  try {
    // The copy itself runs from the cache (the scratch tree is a faithful package layout).
    const intact = await stdioTurn(fresh(), fake);
    assert.equal(intact.boot, "boot code cache", intact.stderr);
    assert.equal(intact.terminal, "turn.completed");

    const cases: Array<[string, (root: string) => void, string]> = [
      ["removed", (r) => rmSync(join(r, "dist", "cold", "cache"), { recursive: true }), "boot esm (no code cache)"],
      // Made by another Node: named for that version, so this Node never reads it.
      ["another Node's", (r) => renameSync(CACHE(r, "stdio"), CACHE(r, "stdio", "v0.0.1")), "boot esm (no code cache)"],
      // Made for another build of the script (its first 16 bytes name the build).
      ["another build's", (r) => {
        const data = readFileSync(CACHE(r, "stdio"));
        data.write("0123456789abcdef", 0, "latin1");
        writeFileSync(CACHE(r, "stdio"), data);
      }, "boot esm (no code cache)"],
      // Right header, garbage data: V8 rejects it.
      ["corrupt", (r) => {
        const data = readFileSync(CACHE(r, "stdio"));
        data.fill(0x5a, 16);
        writeFileSync(CACHE(r, "stdio"), data);
      }, "boot esm (code cache rejected)"],
      ["truncated", (r) => writeFileSync(CACHE(r, "stdio"), readFileSync(CACHE(r, "stdio")).subarray(0, 1000)), "boot esm (code cache rejected)"],
      // A script that does not compile (its build ID kept, so only V8's own check, the length, tells the cache is
      // not its own: an edit of the same length is not caught, which is why dist/cold/ is only ever rebuilt).
      ["broken script", (r) => {
        const file = join(r, "dist", "cold", "berth-stdio.cjs");
        writeFileSync(file, "}}}" + readFileSync(file, "latin1"));
      }, "boot esm (script failed to compile)"],
      ["deleted script", (r) => rmSync(join(r, "dist", "cold", "berth-stdio.cjs")), "boot esm (no code cache)"],
      // The second part of the script, and its cache: checked at boot (present, regular, of this build).
      ["deleted second part", (r) => rmSync(restScriptPath(r, "stdio")), "boot esm (no code cache)"],
      ["second part of another build", (r) => {
        const file = restScriptPath(r, "stdio");
        writeFileSync(file, readFileSync(file, "latin1").replace(/berth-build:[0-9a-f]{16}/, "berth-build:0123456789abcdef"), "latin1");
      }, "boot esm (no code cache)"],
      ["deleted second part's cache", (r) => rmSync(restCachePath(r, "stdio")), "boot esm (no code cache)"],
      ["second part's cache of another build", (r) => {
        const data = readFileSync(restCachePath(r, "stdio"));
        data.write("0123456789abcdef", 0, "latin1");
        writeFileSync(restCachePath(r, "stdio"), data);
      }, "boot esm (no code cache)"],
    ];
    for (const [name, damage, boot] of cases) {
      const root = fresh();
      damage(root);
      const out = await stdioTurn(root, fake);
      assert.equal(out.boot, boot, `${name}: ${out.stderr}`);
      assert.equal(out.terminal, "turn.completed", `${name}: ${out.stderr}`);
      assert.ok(!/Error|warning/i.test(out.stderr.replace(/berth-timing[^\n]*\n/g, "")), `${name}: quiet fallback, got ${out.stderr}`);
    }
  } finally {
    await fake.close();
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  }
});

test("berth daemon runs from its code cache though it sets V8 heap flags once running, and serves its ready line", { skip: !bundled() && "dist/cold/ is older than the last tsc build", timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "berth-cc-daemon-"));
  try {
    const run = (extra: NodeJS.ProcessEnv): Promise<{ stderr: string; ready: Record<string, unknown> }> =>
      new Promise((resolve, reject) => {
        const env: NodeJS.ProcessEnv = { PATH: process.env["PATH"], HOME: dir, MC_HOME: dir, BERTH_HOME: join(dir, "berth"), BERTH_DEBUG_TIMING: "1", ...extra };
        const child = spawn(join(REPO_ROOT, "bin", "berth"), ["daemon"], { env, cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        let stderr = "";
        child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d));
        child.stdout.setEncoding("utf8").on("data", (d: string) => {
          out += d;
          if (out.includes("\n")) child.kill("SIGTERM");
        });
        child.on("error", reject);
        child.on("close", (code) => {
          if (code !== 0 || !out.includes("\n")) return reject(new Error(`daemon exited ${code} without a ready line: ${stderr.slice(0, 400)}`));
          resolve({ stderr, ready: JSON.parse(out.slice(0, out.indexOf("\n"))) as Record<string, unknown> });
        });
      });
    const cached = await run({});
    assert.match(cached.stderr, /berth-timing \S+ boot code cache\n/, cached.stderr);
    assert.equal(cached.ready["ready"], true);
    // Its heap flags are set after the cache was checked: a daemon restarted with them still finds its cache valid.
    const again = await run({ BERTH_DAEMON_V8_FLAGS: "--semi-space-growth-factor=1 --heap-growing-percent=25" });
    assert.match(again.stderr, /boot code cache\n/, again.stderr);
    const off = await run({ BERTH_CODE_CACHE: "0" });
    assert.doesNotMatch(off.stderr, /boot code cache/);
    assert.equal(off.ready["ready"], true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a code-cached first turn of berth service requires neither better-sqlite3 nor the MCP SDK, ajv, ws, zod or node:module", { skip: !bundled() && "dist/cold/ is older than the last tsc build", timeout: 60_000 }, async () => {
  const fake = await startFakeProvider({ loop: true });
  const dir = home(fake);
  try {
    const trace = requireTrace(dir);
    const env: NodeJS.ProcessEnv = { PATH: process.env["PATH"], HOME: dir, MC_HOME: dir, BERTH_DEBUG_TIMING: "1", NODE_OPTIONS: trace.nodeOptions };
    const child = spawn(join(REPO_ROOT, "bin", "magi-code"), ["--app", "service"], { env, cwd: dir, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d));
    const closed = new Promise((r) => child.on("close", r));
    const req = (id: string, method: string, payload: unknown): string => JSON.stringify({ protocol_version: 1, kind: "request", request_id: id, method, payload }) + "\n";
    await new Promise<void>((resolve, reject) => {
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        out += d;
        if (out.includes('"event":"turn.terminal"')) resolve();
      });
      void closed.then(() => reject(new Error(`service exited before the terminal: ${stderr.slice(0, 400)}`)));
      child.stdin.write(req("i", "initialize", { supported_protocol_versions: [1] }));
      child.stdin.write(req("t", "turn.start", { prompt: "hello" }));
    });
    child.stdin.end();
    await closed;
    assert.match(stderr, /boot code cache/);
    assert.match(out, /"status":"completed"/);
    const required = trace.required();
    assert.ok(required.includes("node:net"), "the hook saw the script's requires");
    assert.ok(!required.includes("node:http") && !required.includes("http"), "node:http was required on a first turn (the provider client speaks HTTP/1.1 over node:net)");
    for (const pkg of ["better-sqlite3", "@modelcontextprotocol/sdk", "ajv", "ws", "zod"]) {
      assert.ok(!required.some((id) => id === pkg || id.startsWith(`${pkg}/`)), `${pkg} was required on a first turn`);
    }
    // IDs come from store/random.ts and hashes from core/sha256.ts; the script loads node:crypto on first use only.
    assert.ok(!required.includes("node:crypto") && !required.includes("crypto"), "node:crypto was required on a first session and turn");
    // node:module is loaded on first use only too (the provider client's load of node:tls; this provider is http:).
    assert.ok(!required.includes("node:module") && !required.includes("module"), "node:module was required on a first turn");
  } finally {
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a code-cached first session and turn of berth stdio never requires node:crypto or node:fs/promises", { skip: !bundled() && "dist/cold/ is older than the last tsc build", timeout: 60_000 }, async () => {
  const fake = await startFakeProvider({ loop: true });
  const dir = mkdtempSync(join(tmpdir(), "berth-cc-hook-"));
  try {
    const trace = requireTrace(dir);
    const r = await stdioTurn(REPO_ROOT, fake, { NODE_OPTIONS: trace.nodeOptions });
    assert.equal(r.boot, "boot code cache", r.stderr.slice(0, 400));
    assert.equal(r.terminal, "turn.completed", r.stderr.slice(0, 400));
    const required = trace.required();
    assert.ok(required.includes("node:net"), "the hook saw the script's requires");
    assert.ok(!required.includes("node:http") && !required.includes("http"), "node:http was required on a first turn (the provider client speaks HTTP/1.1 over node:net)");
    assert.ok(!required.includes("node:crypto") && !required.includes("crypto"), "node:crypto was required on a first session and turn");
    // The script requires node:fs/promises on first use only, and nothing on this path calls it (settings reads and
    // the skills scan use node:fs's callbacks; scripts/code-cache.mjs LAZY_BUILTINS).
    assert.ok(!required.includes("node:fs/promises") && !required.includes("fs/promises"), "node:fs/promises was required on a first session and turn");
  } finally {
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the script's lazy built-ins load on first use: a cached berth stdio turn runs a tool that needs node:fs/promises", { skip: !bundled() && "dist/cold/ is older than the last tsc build", timeout: 60_000 }, async () => {
  const fake = await startFakeProvider();
  fake.script([{ steps: [{ toolCall: { id: "c1", name: "ls", arguments: { path: "." } } }] }, { steps: [{ text: "listed" }] }]);
  const dir = mkdtempSync(join(tmpdir(), "berth-cc-hook-"));
  try {
    const trace = requireTrace(dir);
    const work = join(dir, "work");
    mkdirSync(work);
    writeFileSync(join(work, "listed-file.txt"), "x");
    const r = await stdioTurn(REPO_ROOT, fake, { NODE_OPTIONS: trace.nodeOptions }, work);
    assert.equal(r.boot, "boot code cache", r.stderr.slice(0, 400));
    assert.equal(r.terminal, "turn.completed", r.stderr.slice(0, 400));
    const done = r.lines.map((l) => JSON.parse(l) as { type: string; name?: string; success?: boolean; output?: string }).find((m) => m.type === "tool.completed");
    assert.equal(done?.name, "ls");
    assert.equal(done?.success, true, JSON.stringify(done));
    assert.match(done?.output ?? "", /listed-file\.txt/);
    // `ls` reads the directory through node:fs/promises, which the script required only then (LAZY_BUILTINS).
    assert.ok(trace.required().includes("node:fs/promises"), "node:fs/promises was never required");
  } finally {
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * A `--require` hook (for NODE_OPTIONS) that appends every module ID a process requires to a file in `dir`;
 * `required()` reads the IDs so far.
 */
function requireTrace(dir: string): { nodeOptions: string; required: () => string[] } {
  const traceFile = join(dir, "required.txt");
  const hook = join(dir, "hook.cjs");
  writeFileSync(hook, `const M = require("node:module"); const fs = require("node:fs"); const load = M._load;\nM._load = function (id, ...rest) { fs.appendFileSync(${JSON.stringify(traceFile)}, id + "\\n"); return load.call(this, id, ...rest); };\n`);
  writeFileSync(traceFile, "");
  return { nodeOptions: `--require ${hook}`, required: () => readFileSync(traceFile, "utf8").split("\n") };
}
