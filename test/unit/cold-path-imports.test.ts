/**
 * What `berth chat`, `berth service` and `berth stdio` can ever load (issue 19): the import graph from each entry,
 * static imports AND dynamic `import()`s (lazy families, idle prefetch, on-demand tools), never reaches
 * better-sqlite3 (a native addon the daemon alone needs; `npm ci` compiles it where no prebuilt binary downloads).
 * A second check runs `berth service` through a first turn with a module-load hook and asserts the same at run time,
 * and that the heavy libraries a first turn does not need stay unloaded.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { MAGI_BIN, REPO_ROOT } from "../helpers/paths.js";

const SRC = join(REPO_ROOT, "src");
const IMPORT_RE = /(?:^|\n)\s*(?:import|export)\s+(?!type\b)(?:[^"';]*?\sfrom\s+)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/g;

/** Every module reachable from `entry`: our files as repo paths, packages by name. */
function reachable(entry: string): { files: Set<string>; packages: Map<string, string> } {
  const files = new Set<string>();
  const packages = new Map<string, string>(); // package → first importer
  const todo = [entry];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(IMPORT_RE)) {
      const spec = m[1] ?? m[2]!;
      if (spec.startsWith(".")) {
        const target = resolve(dirname(file), spec.replace(/\.js$/, ".ts"));
        if (existsSync(target)) todo.push(target);
        else if (existsSync(target.replace(/\.ts$/, "/index.ts"))) todo.push(target.replace(/\.ts$/, "/index.ts"));
      } else if (!spec.startsWith("node:")) {
        const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!;
        if (!packages.has(name)) packages.set(name, file.slice(REPO_ROOT.length));
      }
    }
  }
  return { files, packages };
}

for (const entry of ["cli/service.ts", "cli/stdio.ts", "cli/chat/index.ts"]) {
  test(`${entry} can never load better-sqlite3 (static and dynamic imports)`, () => {
    const { files, packages } = reachable(join(SRC, entry));
    assert.ok(files.size > 20, "the walk follows imports");
    assert.equal(packages.get("better-sqlite3"), undefined, `better-sqlite3 is reachable from ${entry} via ${packages.get("better-sqlite3")}`);
    assert.ok(![...files].some((f) => f.endsWith("src/store/host/store.ts")), "the host's SQLite store is not reachable");
  });
}

test("the walk sees better-sqlite3 where it is used (the daemon)", () => {
  const { packages } = reachable(join(SRC, "cli/daemon.ts"));
  assert.ok(packages.has("better-sqlite3"));
});

test("a first `berth service` turn loads neither better-sqlite3 nor the MCP SDK, ajv, ws, zod, proper-lockfile", { timeout: 60_000 }, async () => {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "cold-home-"));
  const traceFile = join(home, "loaded.txt");
  const hook = join(home, "hook.mjs");
  writeFileSync(hook, `import { appendFileSync } from "node:fs";\nexport async function load(url, ctx, next) { appendFileSync(${JSON.stringify(traceFile)}, url + "\\n"); return next(url, ctx); }\n`);
  const reg = join(home, "register.mjs");
  writeFileSync(reg, `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(hook).href)});\n`);
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } }, provider: "fake", model: "fake-model" }));
  // BERTH_CODE_CACHE=0: the ES module chunks, whose loads the hook sees (the code-cached script loads as one file).
  const env: NodeJS.ProcessEnv = { PATH: process.env["PATH"], HOME: home, MC_HOME: home, NODE_OPTIONS: `--import ${pathToFileURL(reg).href}`, BERTH_CODE_CACHE: "0" };
  const child = spawn(MAGI_BIN, ["--app", "service"], { env, cwd: home, stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d));
  const terminal = new Promise<void>((resolveT, reject) => {
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      if (out.includes('"event":"turn.terminal"')) resolveT();
    });
    child.on("close", () => reject(new Error(`service exited before the terminal: ${stderr.slice(0, 400)}`)));
  });
  const req = (id: string, method: string, payload: unknown, extra: Record<string, unknown> = {}): string =>
    JSON.stringify({ protocol_version: 1, kind: "request", request_id: id, method, payload, ...extra }) + "\n";
  child.stdin.write(req("i", "initialize", { supported_protocol_versions: [1] }));
  child.stdin.write(req("t", "turn.start", { prompt: "hello" }));
  await terminal;
  child.stdin.end();
  await new Promise((r) => child.on("close", r));
  await fake.close();
  assert.match(out, /"status":"completed"/);
  const loaded = readFileSync(traceFile, "utf8");
  // Unbundled (dist/src/, after a bare `tsc`) or bundled (dist/cold/, after `npm run build`): bin/magi-code picks.
  assert.match(loaded, /dist\/src\/runtime\/agent\.js|dist\/cold\/main\.js/, "the hook saw the CLI's modules");
  for (const pkg of ["better-sqlite3", "@modelcontextprotocol/sdk", "ajv", "/ws/", "proper-lockfile", "graceful-fs", "zod"]) {
    assert.ok(!loaded.includes(`node_modules/${pkg.replace(/^\/|\/$/g, "")}/`), `${pkg} was loaded on a first turn`);
  }
  // Loaded only by a compressed provider answer (providers/content-coding.ts) or a web_fetch that needs it.
  assert.ok(!loaded.includes("node:zlib"), "node:zlib was loaded on a first turn");
});

/** Our compiled modules a trace of loaded URLs covers (`dist/src/…` paths; a bundle chunk stands for its inputs). */
function ownModules(trace: string): Set<string> {
  const metaFile = join(REPO_ROOT, "dist", "cold", "meta.json");
  const outputs = existsSync(metaFile) ? (JSON.parse(readFileSync(metaFile, "utf8")) as { outputs: Record<string, { inputs: Record<string, unknown> }> }).outputs : {};
  const mods = new Set<string>();
  for (const url of trace.split("\n")) {
    const i = url.indexOf("/dist/");
    if (i === -1 || url.includes("node_modules")) continue;
    const rel = url.slice(i + 1);
    if (rel.startsWith("dist/src/")) mods.add(rel);
    for (const input of Object.keys(outputs[rel]?.inputs ?? {})) mods.add(input);
  }
  return mods;
}

test("a first openai-chat turn loads that driver only, and no tool code; the turn loop loads once a session is opened", { timeout: 60_000 }, async () => {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "cold-home-"));
  const traceFile = join(home, "loaded.txt");
  const hook = join(home, "hook.mjs");
  writeFileSync(hook, `import { appendFileSync } from "node:fs";\nexport async function load(url, ctx, next) { appendFileSync(${JSON.stringify(traceFile)}, url + "\\n"); return next(url, ctx); }\n`);
  const reg = join(home, "register.mjs");
  writeFileSync(reg, `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(hook).href)});\n`);
  writeFileSync(traceFile, "");
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } }, provider: "fake", model: "fake-model" }));
  // BERTH_CODE_CACHE=0: the ES module chunks, whose loads the hook sees (the code-cached script loads as one file).
  const env: NodeJS.ProcessEnv = { PATH: process.env["PATH"], HOME: home, MC_HOME: home, NODE_OPTIONS: `--import ${pathToFileURL(reg).href}`, BERTH_CODE_CACHE: "0" };
  const child = spawn(join(REPO_ROOT, "bin", "berth"), ["stdio"], { env, cwd: home, stdio: ["pipe", "pipe", "pipe"] });
  let buf = "";
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d));
  const lines: string[] = [];
  let waiter: { pred: (l: string) => boolean; resolve: (l: string) => void } | null = null;
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    for (let k; (k = buf.indexOf("\n")) !== -1; ) {
      const line = buf.slice(0, k);
      buf = buf.slice(k + 1);
      lines.push(line);
      if (waiter?.pred(line) === true) waiter.resolve(line);
    }
  });
  const closed = new Promise((r) => child.on("close", r));
  const until = (pred: (l: string) => boolean): Promise<string> => {
    const seen = lines.find(pred);
    if (seen !== undefined) return Promise.resolve(seen);
    return Promise.race([
      new Promise<string>((resolveW) => (waiter = { pred, resolve: resolveW })),
      closed.then((): never => {
        throw new Error(`berth stdio exited early: ${stderr.slice(0, 400)}`);
      }),
    ]);
  };
  const send = (m: unknown): void => void child.stdin.write(JSON.stringify(m) + "\n");
  send({ type: "initialize", request_id: "i", protocol_version: 3 });
  await until((l) => l.startsWith('{"type":"initialized"'));
  send({ type: "session.start", request_id: "s", cwd: home });
  const started = JSON.parse(await until((l) => l.startsWith('{"type":"session.started"'))) as { session_id: string };
  // The session is announced: its turn path (loop, driver) loads in the background; await it through the trace.
  const has = (m: string): boolean => [...ownModules(readFileSync(traceFile, "utf8"))].some((x) => x.endsWith(m));
  while (!has("runtime/turn-loop.js") || !has("runtime/providers/openai-chat.js")) await new Promise((r) => setTimeout(r, 5));
  send({ type: "turn.start", request_id: "t", session_id: started.session_id, prompt: "hello" });
  const term = await until((l) => /^\{"type":"turn\.(completed|failed|cancelled)"/.test(l));
  child.stdin.end();
  await closed;
  await fake.close();
  assert.match(term, /^\{"type":"turn\.completed"/);
  const mods = ownModules(readFileSync(traceFile, "utf8"));
  assert.ok([...mods].some((m) => m.endsWith("runtime/agent.js")), "the trace maps loaded files to modules");
  for (const other of ["runtime/providers/anthropic.js", "runtime/providers/openai-responses.js"]) {
    assert.ok(![...mods].some((m) => m.endsWith(other)), `${other} was loaded by an openai-chat turn`);
  }
  // The delegation tools were offered (their definitions) without their child-process code loading.
  const offered = ((JSON.parse(fake.requests[0]!.body) as { tools?: Array<{ function: { name: string } }> }).tools ?? []).map((t) => t.function.name);
  for (const name of ["read", "bash", "agent_berth", "agent_wait"]) assert.ok(offered.includes(name), `${name} was offered to the model`);
  for (const impl of ["cli/delegates/agent-berth.js", "cli/delegates/cli-agents.js", "cli/delegates/jobs.js"]) {
    assert.ok(![...mods].some((m) => m.endsWith(impl)), `${impl} was loaded by a turn that called no tool`);
  }
  // Tool code loads on a tool's first call (tools/lazy.ts): a turn that called none loaded only their definitions.
  assert.ok([...mods].some((m) => m.endsWith("runtime/tools/specs.js")), "the tools' definitions were loaded");
  for (const impl of ["tools/read.js", "tools/bash.js", "tools/web-fetch.js", "tools/edit.js", "tools/grep.js"]) {
    assert.ok(![...mods].some((m) => m.endsWith(`runtime/${impl}`)), `${impl} was loaded by a turn that called no tool`);
  }
});
