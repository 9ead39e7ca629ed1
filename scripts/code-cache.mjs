#!/usr/bin/env node
// The V8 code cache of a fresh process (docs/runtime.md, "First turn of a fresh process"). Node 20 has no compile
// cache for modules, so `berth service`, `berth stdio`, `berth chat`, `berth acp`, `berth daemon` and `magi-code` can
// run from one CommonJS file compiled with V8 code cache data instead of the ES module chunks in dist/cold/:
// - `buildColdScripts` bundles dist/src/cli/main.js into dist/cold/berth-<command>.cjs, one script per command (no
//   splitting: a lazy `import()` of our own modules becomes an esbuild init wrapper, still lazy), packages left in
//   node_modules but the ESM-only ones and the first turn's SSE parser, built-ins imported on demand required instead,
//   the MCP client left to the ES module loader, the commands that never run from it (channel, open, build-info,
//   and the other commands' own modules) left out, whitespace, syntax and identifiers minified, non-ASCII
//   escaped (a one-byte source string), wrapped in a CommonJS-style function and ended by a build ID;
// - `trainCodeCache` runs each of those commands through a session and a turn (the service also through a restarted
//   service's first replay; the daemon to its ready line and a SIGTERM: see TRAINING) against a loopback fake provider
//   (Chat Completions SSE) with BERTH_CODE_CACHE_TRAIN set; the launcher (`coldBoot` in bin/berth and bin/magi-code)
//   then writes the script's cache data at exit, so functions compiled lazily during the turn are in it. The files go
//   to dist/cold/cache/, named by command, Node version and architecture, and start with the script's build ID: the
//   launcher uses a cache only for the exact script and Node that made it, and V8 itself rejects data made with other
//   flags.
// Run by scripts/bundle.mjs (so `npm run build`, `npm ci` / prepare, `npm test` and `npm run bench` all make it).
import { build } from "esbuild";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const coldDir = join(root, "dist", "cold");
export const CACHE_DIR = join(coldDir, "cache");

/** The commands that run from a script of their own (`dist/cold/berth-<command>.cjs`). */
export const COLD_COMMANDS = ["service", "stdio", "chat", "acp", "daemon"];

/** The script of `command`. */
export const scriptOf = (command) => join(coldDir, `berth-${command}.cjs`);

/**
 * The commands whose script is made in two parts, each with its own code cache: `berth-<command>.cjs`, the modules
 * a handshake needs (the static imports of main.js, of the command's module and of the credential hand-off, ~10% of
 * the source), and `berth-<command>.rest.cjs`, every module those import lazily. The launcher deserialises only the
 * first before the handshake is answered, and the second when the process first imports one of its modules (the
 * prefetch right after the handshake): V8 deserialises a code cache whole, ~3 µs per kB here, and the second part's
 * ~600 kB cost ~2 ms that the handshake no longer waits for (docs/runtime.md, "Two scripts").
 */
export const SPLIT_COMMANDS = { service: "./service.js", stdio: "./stdio.js" };

/** The second script of a command in SPLIT_COMMANDS. */
export const restScriptOf = (command) => join(coldDir, `berth-${command}.rest.cjs`);

/**
 * The command modules main.js loads that never run from the script of `command` (the launchers send the other
 * commands to dist/cold/main.js): the non-session commands, and the other session commands, so each script holds
 * only what its own command can reach (`berth stdio` neither the app-service server nor the terminal client, ~25%
 * less source to read and fewer functions to deserialise and instantiate before the handshake).
 */
const COMMAND_MODULES = { service: "./service.js", stdio: "./stdio.js", chat: "./chat/index.js", acp: "./acp.js", daemon: "./daemon.js" };
const notCold = (command) => {
  const others = Object.entries(COMMAND_MODULES).filter(([c]) => c !== command).map(([, m]) => m);
  return new Set(["./channel.js", "./open.js", "./build-info.js", ...others]);
};

/**
 * Our modules the script leaves to the ES module loader, by importer and specifier: the MCP client (its SDK, zod and
 * ajv cost ~80 ms to load, which `import()` spreads over event-loop turns in the background while require() would
 * block the first turn of a session with MCP servers). It and what it imports are stateless helpers, so the copy
 * the loader makes of them is harmless.
 */
const LEFT_TO_ESM = new Map([["runtime/tools/registry.js", "./mcp.js"]]);

/** Packages that have no CommonJS entry point (bundled into the script; checked by the bundle step). */
const ESM_ONLY = new Set(["oauth4webapi", "@agentclientprotocol/sdk"]);

/**
 * Packages on the first turn's path, bundled into the script so they are compiled from its code cache instead of
 * resolved (package.json `exports`), read and compiled from node_modules when the first provider response arrives.
 * Stateless (a copy the ES module loader may also load is harmless).
 */
const FIRST_TURN_PACKAGES = new Set(["eventsource-parser"]);

/**
 * Packages bundled into one command's script only: the ACP SDK builds its message schemas with zod when it loads,
 * before `initialize` can be answered; from node_modules, compiling zod's CommonJS files alone cost ~35 ms there.
 */
const COMMAND_PACKAGES = { acp: ["zod"], daemon: ["zod", "ws"] };
const bundledFor = (command, spec) => (COMMAND_PACKAGES[command] ?? []).some((p) => spec === p || spec.startsWith(`${p}/`));

/**
 * Built-ins the script loads on first use instead of when an importing module initialises: node:crypto costs ~2–3 ms
 * to load and the first session and turn no longer call it (src/store/random.ts), but modules on their path import
 * it for other work (a sidecar's hash, a replay's tail hash). Each becomes an object whose named exports are getters
 * that require the built-in on first access (names listed from this Node at build time). node:fs/promises likewise
 * (~1.5–2 ms): a first `berth stdio` session and turn call none of it (settings reads and the skills scan use
 * node:fs's callbacks), though the session store, settings and tools import it.
 * The getters sit on the exported object's prototype, not on the object: esbuild's `__toESM`, run once per importing
 * module, copies a CommonJS module's own properties (a getter and a descriptor per name, ~40–70 names, ~20 importing
 * modules: ~0.3 MB of garbage and ~0.5 ms on a first stdio session), and starts its copy from that prototype.
 * node:module (~0.4 ms): only the provider client's load of node:https (an https: provider) calls it.
 */
const LAZY_BUILTINS = new Set(["node:crypto", "node:fs/promises", "node:module"]);

/** Bundles the script of each command in COLD_COMMANDS. */
export async function buildColdScripts() {
  await Promise.all(COLD_COMMANDS.map(buildColdScript));
}

/** Bundles the script (SPLIT_COMMANDS: the two scripts) of `command`, ended by a new build ID. */
async function buildColdScript(command) {
  const id = randomBytes(8).toString("hex");
  const srcDir = join(root, "dist", "src");
  const mainJs = join(srcDir, "cli", "main.js");
  if (SPLIT_COMMANDS[command] === undefined) {
    writeFileSync(scriptOf(command), await bundleScript(command, { entry: mainJs }, `//berth-build:${id}`));
    return;
  }
  // The module graph as the whole script would bundle it; the first part is the static closure of its roots.
  const graph = await bundleScript(command, { entry: mainJs, graph: true });
  const rel = (abs) => relative(root, abs).split("\\").join("/");
  const name = (abs) => relative(srcDir, abs).split("\\").join("/");
  const core = new Set();
  for (const queue = [mainJs, join(srcDir, "cli", SPLIT_COMMANDS[command]), join(srcDir, "cli", "handoff.js")].map(rel); queue.length > 0; ) {
    const f = queue.pop();
    if (core.has(f)) continue;
    if (graph.inputs[f] === undefined) throw new Error(`${f}: not in the module graph of berth-${command}.cjs`);
    core.add(f);
    for (const i of graph.inputs[f].imports) if (i.kind === "import-statement" && !i.external && i.path.startsWith("dist/src/")) queue.push(i.path);
  }
  // What the first part imports lazily from the second: the second's entry points.
  const lazy = new Set();
  for (const f of core) for (const i of graph.inputs[f].imports) if (i.kind === "dynamic-import" && i.path.startsWith("dist/src/") && !core.has(i.path)) lazy.add(i.path);
  const coreFiles = [...core];
  const coreEntry = [
    `export * from ${JSON.stringify(mainJs)};`,
    ...coreFiles.map((f, k) => `import * as c${k} from ${JSON.stringify(join(root, f))};`),
    `export const __berth_core = {${coreFiles.map((f, k) => `${JSON.stringify(name(join(root, f)))}: c${k}`).join(", ")}};`,
  ].join("\n");
  const restEntry = `export const __berth_rest = {${[...lazy].map((f) => `${JSON.stringify(name(join(root, f)))}: () => import(${JSON.stringify(join(root, f))})`).join(", ")}};`;
  const inCore = (abs) => core.has(rel(abs));
  // The first part's tail says that a second part belongs to it (the launcher checks that it is there at boot).
  const head = await bundleScript(command, { entry: coreEntry, external: (abs) => (inCore(abs) ? undefined : `berth-rest:${name(abs)}`) }, `//berth-build:${id} rest`);
  const rest = await bundleScript(command, { entry: restEntry, external: (abs) => (inCore(abs) ? `berth-core:${name(abs)}` : undefined) }, `//berth-build:${id}`);
  if (/\brequire\("berth-rest:/.test(head)) throw new Error(`berth-${command}.cjs: its first part imports a module of the second statically`);
  writeFileSync(scriptOf(command), head);
  writeFileSync(restScriptOf(command), rest);
}

/**
 * One script of `command` as text, or (`graph`) the esbuild metafile of the whole script. `entry`: main.js's path, or
 * the source of an entry module. `external(abs)`: the specifier one of our modules is left to at run time
 * (`berth-rest:<name>`, imported lazily from the second part; `berth-core:<name>`, required from the first), or
 * undefined to bundle it.
 */
async function bundleScript(command, { entry, graph = false, external = () => undefined }, footer = "") {
  const NOT_COLD = notCold(command);
  const srcDir = join(root, "dist", "src");
  const mainJs = join(srcDir, "cli", "main.js");
  const result = await build({
    ...(entry === mainJs ? { entryPoints: [mainJs] } : { stdin: { contents: entry, resolveDir: srcDir, loader: "js", sourcefile: "berth-entry.js" } }),
    outfile: scriptOf(command),
    absWorkingDir: root,
    metafile: graph,
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    minifyWhitespace: true,
    minifySyntax: true,
    minifyIdentifiers: true,
    logLevel: "error",
    banner: { js: "(function (exports, require, module, __filename, __dirname, __berth_url, __berth_import) {" },
    footer: { js: `})\n${footer}` },
    write: false,
    plugins: [
      {
        name: "cold-script",
        setup(b) {
          // Packages load from node_modules, as the ES module chunks load them, except the ESM-only ones, which a
          // CommonJS script could load only through require(esm) (Node 20.19+, with a warning when installed).
          b.onResolve({ filter: /^node:/ }, (args) => (LAZY_BUILTINS.has(args.path) && args.namespace !== "lazy-builtin" ? { path: args.path, namespace: "lazy-builtin" } : undefined));
          b.onLoad({ filter: /.*/, namespace: "lazy-builtin" }, async (args) => {
            const names = Object.keys(await import(args.path)).filter((k) => k !== "default" && /^[A-Za-z_$][\w$]*$/.test(k));
            const getters = names.map((k) => `get ${k}() { return load().${k}; }`).join(",\n");
            return { contents: `let m; const load = () => (m ??= require(${JSON.stringify(args.path)}));\nmodule.exports = Object.create({\n${getters}\n});\n`, loader: "js" };
          });
          b.onResolve({ filter: /^[^./]/ }, (args) =>
            ESM_ONLY.has(args.path) || FIRST_TURN_PACKAGES.has(args.path) || bundledFor(command, args.path) ? undefined : { path: args.path, external: true },
          );
          b.onResolve({ filter: /^\.\/[a-z/-]+\.js$/ }, (args) => {
            if (args.importer === mainJs && NOT_COLD.has(args.path)) return { path: args.path, namespace: "not-cold" };
            const from = relative(srcDir, args.importer).split("\\").join("/");
            if (LEFT_TO_ESM.get(from) === args.path && args.kind === "dynamic-import") {
              return { path: `berth-esm:${relative(srcDir, join(dirname(args.importer), args.path)).split("\\").join("/")}`, external: true };
            }
            return undefined;
          });
          // Our own modules on either side of a split script (SPLIT_COMMANDS).
          b.onResolve({ filter: /^\.\.?\// }, (args) => {
            if (!args.resolveDir.startsWith(srcDir)) return undefined;
            const spec = external(join(args.resolveDir, args.path));
            return spec === undefined ? undefined : { path: spec, external: true };
          });
          b.onLoad({ filter: /.*/, namespace: "not-cold" }, (args) => ({
            contents: `throw new Error(${JSON.stringify(`berth: ${args.path} is not in dist/cold/berth-${command}.cjs; the launcher runs that command from dist/cold/main.js`)});`,
            loader: "js",
          }));
          // import.meta.url → the module's own dist/src/ location, relative to the script's URL (a wrapper argument).
          b.onLoad({ filter: /\/dist\/src\/.*\.js$/ }, (args) => {
            let text = readFileSync(args.path, "utf8");
            if (text.includes("import.meta")) {
              const rel = relative(coldDir, args.path).split("\\").join("/");
              text = text.replaceAll("import.meta.url", `new URL(${JSON.stringify(rel)}, __berth_url).href`);
              // import.meta.dirname → the module's own dist/src/ directory, from the script's (a wrapper argument).
              text = text.replaceAll("import.meta.dirname", `(__dirname + ${JSON.stringify("/" + dirname(rel))})`);
              if (text.includes("import.meta")) throw new Error(`${args.path}: import.meta other than import.meta.url and import.meta.dirname cannot go into the CommonJS script`);
            }
            return { contents: text, loader: "js", resolveDir: dirname(args.path) };
          });
        },
      },
    ],
  });
  if (graph) return result.metafile;
  // esbuild leaves some non-ASCII (a regular expression's literal characters); one escaped is the same JavaScript
  // in strings, templates without String.raw, regular expressions and identifiers, and keeps the source one-byte.
  let text = result.outputFiles[0].text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  // A dynamic import() left in the script (built-ins loaded on demand, e.g. node:child_process for `bash`) would need
  // vm's importModuleDynamically, which functions restored from a code cache lose (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING);
  // the script requires them instead, as lazily (each such use takes named exports only), and imports the modules
  // LEFT_TO_ESM through `__berth_import`, the launcher's own import().
  text = text.replace(/\bimport\("berth-esm:([^"\\]+)"\)/g, (_, mod) => `__berth_import(new URL(${JSON.stringify(`../src/${mod}`)}, __berth_url).href)`);
  // The second part of a split script, which the launcher loads on the first such import.
  text = text.replace(/\bimport\(("berth-rest:[^"\\]+")\)/g, "__berth_import($1)");
  text = text.replace(/\bimport\(("[^"\\]+")\)/g, "Promise.resolve().then(() => require($1))");
  if (/\bimport\(/.test(text)) throw new Error(`berth-${command}: a dynamic import() with a computed specifier cannot go into the CommonJS script`);
  return text;
}

/** A loopback OpenAI Chat Completions endpoint answering every request with a short streamed text. */
async function startFakeProvider() {
  const chunk = (delta, extra = {}) => `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", model: "fake-model", choices: [{ index: 0, delta, ...extra }] })}\n\n`;
  const server = createServer((req, res) => {
    req.resume().on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (let i = 0; i < 20; i++) res.write(chunk({ content: `word${i} ` }));
      res.write(chunk({}, { finish_reason: "stop" }));
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/v1`, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** Runs `args` (node + a bin), answers its JSON lines with `onLine`, resolves at exit; stdin ends when `onLine` says. */
function drive(args, env, cwd, first, onLine) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env, cwd, stdio: ["pipe", "pipe", "pipe"] });
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    let buf = "";
    let err = "";
    const send = (m) => child.stdin.write(JSON.stringify(m) + "\n");
    const end = () => child.stdin.end();
    child.stderr.setEncoding("utf8").on("data", (d) => void (err += d));
    child.stdout.setEncoding("utf8").on("data", (d) => {
      buf += d;
      for (let k; (k = buf.indexOf("\n")) !== -1; buf = buf.slice(k + 1)) {
        const line = buf.slice(0, k);
        if (line.startsWith("{")) onLine(JSON.parse(line), send, end);
      }
    });
    if (first === null) end();
    else send(first);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`exited ${code}: ${err.trim().split("\n").slice(-3).join(" | ")}`));
    });
  });
}

const req = (id, method, payload, extra = {}) => ({ protocol_version: 1, kind: "request", request_id: id, method, payload, ...extra });

/** How each command is trained: a session and one turn, as a client of the command drives it. */
const TRAINING = {
  stdio: (bin, env, cwd) =>
    drive([join(bin, "berth"), "stdio"], env, cwd, { type: "initialize", request_id: "i", protocol_version: 3 }, (m, send, end) => {
      if (m.type === "initialized") send({ type: "session.start", request_id: "s", cwd });
      else if (m.type === "session.started") send({ type: "turn.start", request_id: "t", session_id: m.session_id, prompt: "hello" });
      else if (/^turn\.(completed|failed|cancelled)$/.test(m.type) || m.type === "error") end();
    }),
  // Two services: the first makes a session with a turn and replays it (its sidecar is written at exit); the second
  // (whose cache is kept) also replays that session as a restarted service's first request does (from the sidecar),
  // then creates a session, runs a turn and replays it (a full projection), then a second turn and a replay (an
  // extended projection, a sidecar write).
  service: async (bin, env, cwd) => {
    const args = [join(bin, "magi-code"), "--app", "service"];
    const init = req("i", "initialize", { supported_protocol_versions: [1] });
    let sid = null;
    const turns = (n) => {
      let done = 0;
      return (m, send, end) => {
        if (m.request_id === "s" && m.payload?.session_id) send(req("t0", "turn.start", { prompt: "hello" }, { session_id: (sid = m.payload.session_id) }));
        else if (m.event === "turn.terminal") send(req(`r${done}`, "session.replay", {}, { session_id: sid }));
        else if (m.kind === "error" || m.ok === false || m.request_id === `r${n - 1}`) end();
        else if (m.request_id === `r${done}`) send(req(`t${++done}`, "turn.start", { prompt: "again" }, { session_id: sid }));
      };
    };
    const first = turns(1);
    await drive(args, env, cwd, init, (m, send, end) => (m.request_id === "i" ? send(req("s", "session.create", {})) : first(m, send, end)));
    if (sid === null) throw new Error("the first service run made no session");
    const old = sid;
    const second = turns(2);
    await drive(args, env, cwd, init, (m, send, end) => {
      if (m.request_id === "i") send(req("l", "session.list", { limit: 1 }));
      else if (m.request_id === "l") send(req("old", "session.replay", {}, { session_id: old }));
      else if (m.request_id === "old") send(req("s", "session.create", {}));
      else second(m, send, end);
    });
  },
  daemon: (bin, env, cwd) => trainDaemon(bin, env, cwd),
  // An editor's first minutes: initialize, a new session, one prompt answered.
  acp: (bin, env, cwd) =>
    drive([join(bin, "berth"), "acp"], env, cwd, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } }, (m, send, end) => {
      if (m.id === 1 && m.result) send({ jsonrpc: "2.0", id: 2, method: "session/new", params: { cwd, mcpServers: [] } });
      else if (m.id === 2 && m.result) send({ jsonrpc: "2.0", id: 3, method: "session/prompt", params: { sessionId: m.result.sessionId, prompt: [{ type: "text", text: "hello" }] } });
      else if (m.method === undefined && (m.error || m.id === 3)) end();
    }),
  // With an MCP server configured whose tool list is cached (as every run after a user's first in a directory finds
  // it): a first run lists and caches its tools, the kept one offers them from the cache (the tool registry's
  // cached path, compiled lazily otherwise) and starts the server after the provider answered.
  chat: async (bin, env, cwd) => {
    const settingsFile = join(env.MC_HOME, "settings.json");
    const server = join(cwd, "mcp-server.cjs");
    writeFileSync(server, MCP_SERVER);
    writeFileSync(settingsFile, JSON.stringify({ ...JSON.parse(readFileSync(settingsFile, "utf8")), mcp_servers: { tools: { command: process.execPath, args: [server], env: {} } } }));
    const args = [join(bin, "berth"), "chat", "-p", "hello", "--json"];
    const { BERTH_CODE_CACHE_TRAIN: _kept, ...listing } = env;
    await drive(args, listing, cwd, null, () => {});
    await drive(args, env, cwd, null, () => {});
  },
};

/**
 * `berth daemon` to its ready line (the host, its state, the SCV socket and the web UI listener set up), then
 * SIGTERM: the launcher writes the cache as the daemon exits.
 */
function trainDaemon(bin, env, cwd) {
  return new Promise((resolve, reject) => {
    // Without the daemon's heap flags (daemon-heap.ts sets them once it runs): V8 stamps a cache with the flags in
    // force when it is made and rejects it under others, and a fresh daemon checks its cache before it sets them.
    const child = spawn(process.execPath, [join(bin, "berth"), "daemon"], { env: { ...env, BERTH_HOME: env.MC_HOME, BERTH_DAEMON_V8_FLAGS: "" }, cwd, stdio: ["ignore", "pipe", "pipe"] });
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    let err = "";
    let out = "";
    child.stderr.setEncoding("utf8").on("data", (d) => void (err += d));
    child.stdout.setEncoding("utf8").on("data", (d) => {
      out += d;
      if (out.includes("\n")) child.kill("SIGTERM");
    });
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`exited ${code}: ${err.trim().split("\n").slice(-3).join(" | ")}`));
    });
  });
}

/** A minimal stdio MCP server (newline-delimited JSON-RPC): one tool, listed; for the chat's training only. */
const MCP_SERVER = `"use strict";
let buf = "";
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\\n");
process.stdin.setEncoding("utf8").on("data", (d) => {
  buf += d;
  for (let k; (k = buf.indexOf("\\n")) !== -1; buf = buf.slice(k + 1)) {
    const m = JSON.parse(buf.slice(0, k));
    if (m.id === undefined) continue;
    if (m.method === "initialize") send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "train", version: "1" } } });
    else if (m.method === "tools/list") send({ id: m.id, result: { tools: [{ name: "echo", description: "Echoes.", inputSchema: { type: "object", properties: { text: { type: "string" } } } }] } });
    else send({ id: m.id, error: { code: -32601, message: "not here" } });
  }
});
`;

/** Trains one cache per command for the script just built; returns the commands that failed, with why. */
export async function trainCodeCache() {
  rmSync(CACHE_DIR, { recursive: true, force: true });
  mkdirSync(CACHE_DIR, { recursive: true });
  const fake = await startFakeProvider();
  const failed = [];
  try {
    for (const [command, train] of Object.entries(TRAINING)) {
      const home = mkdtempSync(join(tmpdir(), "berth-code-cache-"));
      try {
        writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: fake.url, auth: "none", models: [{ id: "fake-model" }] } }, provider: "fake", model: "fake-model" }));
        // A clean environment: no credentials, no user settings, no running daemon to talk to.
        const env = { PATH: process.env.PATH ?? "", HOME: home, MC_HOME: home, SCV_HOME: join(home, "scv"), BERTH_CHAT_NO_DAEMON: "1", BERTH_CODE_CACHE_TRAIN: join(CACHE_DIR, `${command}-${process.version}-${process.arch}.bin`) };
        await train(join(root, "bin"), env, home);
      } catch (err) {
        failed.push(`${command}: ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    }
  } finally {
    await fake.close();
  }
  return failed;
}
