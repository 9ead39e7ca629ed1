"use strict";
// Loads the CLI of a fresh `berth service` / `berth stdio` / `berth chat` / `magi-code` process from that command's
// script (dist/cold/berth-<command>.cjs) with the V8 code cache made for it at build time (scripts/code-cache.mjs), so the
// process neither resolves, links nor compiles ES modules. `load` returns the CLI's exports, or null when the caller
// must load dist/cold/main.js as before: another command, BERTH_CODE_CACHE=0, no script, no cache for this script and
// this Node version and architecture, or V8 rejecting the cache (other V8 flags, a corrupt file). It never writes a
// file, except when scripts/code-cache.mjs trains it (BERTH_CODE_CACHE_TRAIN names the file to write at exit).
// See docs/runtime.md, "First turn of a fresh process".
const { readFileSync, statSync, writeFileSync } = require("node:fs");
const { join, resolve } = require("node:path");

/** The largest script or cache read (both are a few MiB at most). */
const MAX_FILE = 64 * 1024 * 1024;

/** A regular file of at most MAX_FILE bytes: a FIFO or a device in its place would block or never end. */
function readRegular(path, encoding) {
  const st = statSync(path);
  if (!st.isFile() || st.size > MAX_FILE) throw new Error("not a regular file of a sane size");
  return readFileSync(path, encoding);
}

const COLD = new Set(["service", "stdio", "chat"]);

function mark(label) {
  if (process.env.BERTH_DEBUG_TIMING === "1") process.stderr.write(`berth-timing ${performance.now().toFixed(2)} ${label}\n`);
}

/**
 * The file: URL of an absolute POSIX path (as `url.pathToFileURL(p).href` names it, with `encodeURI`'s escaping, an
 * equivalent URL) without loading the WHATWG URL machinery before the handshake; pathToFileURL elsewhere.
 */
function fileHref(p) {
  if (process.platform !== "win32" && p.startsWith("/")) {
    try {
      return "file://" + encodeURI(p).replace(/\?/g, "%3F").replace(/#/g, "%23");
    } catch {
      // a lone surrogate: pathToFileURL below
    }
  }
  return require("node:url").pathToFileURL(p).href;
}

/** `command`: the CLI's first argument (`service` for magi-code); `coldPath`: the path (or file URL) of dist/cold/. */
exports.load = function load(command, coldPath) {
  const coldDir = typeof coldPath === "string" && !coldPath.startsWith("file:") ? resolve(coldPath) : require("node:url").fileURLToPath(coldPath);
  const train = process.env.BERTH_CODE_CACHE_TRAIN;
  delete process.env.BERTH_CODE_CACHE_TRAIN; // not inherited by the processes this one starts
  if (!COLD.has(command) || process.env.BERTH_CODE_CACHE === "0") return null;
  const file = join(coldDir, `berth-${command}.cjs`);
  let source;
  let cachedData;
  let id;
  try {
    // The cache first (no cache: nothing else read); its first 16 bytes name the script build it was made for.
    if (train === undefined) cachedData = readRegular(join(coldDir, "cache", `${command}-${process.version}-${process.arch}.bin`));
    source = readRegular(file, "latin1"); // ASCII by construction: a one-byte string, no UTF-8 decoding
    id = /\/\/berth-build:([0-9a-f]{16})\s*$/.exec(source.slice(-64))?.[1];
    if (id === undefined || (cachedData !== undefined && cachedData.toString("latin1", 0, 16) !== id)) throw new Error("stale");
    cachedData = cachedData?.subarray(16);
  } catch {
    mark("boot esm (no code cache)");
    return null;
  }
  const vm = require("node:vm");
  let script;
  try {
    script = new vm.Script(source, { filename: file, cachedData }); // no import() in it (scripts/code-cache.mjs)
  } catch {
    mark("boot esm (script failed to compile)");
    return null;
  }
  if (train === undefined && script.cachedDataRejected !== false) {
    mark("boot esm (code cache rejected)");
    return null;
  }
  mark(train === undefined ? "boot code cache" : "boot code cache training");
  const mod = { exports: {} };
  const esm = (url) => import(url); // the modules the script leaves to the ES module loader (the MCP client)
  // This file's own require: the script requires only built-ins and packages (no relative paths), which resolve from
  // bin/ as from dist/cold/ (both find the package's node_modules); createRequire would first load node:module.
  script.runInThisContext().call(mod.exports, mod.exports, require, mod, file, coldDir, fileHref(file), esm);
  if (train !== undefined) process.on("exit", () => writeFileSync(train, Buffer.concat([Buffer.from(id, "latin1"), script.createCachedData()])));
  return mod.exports;
};
