/**
 * The code-cache boot (the launchers' `coldBoot`) against files that are not what they should be: the cache or the script
 * replaced by a symlink to a FIFO (reading it would block forever), to /dev/zero (a read that never ends), or by a
 * file far larger than any cache. Each must fall back quietly to the ES modules and serve, never hang. Runs on a copy
 * of the launchers and dist/cold/ in a scratch tree (dist/src and node_modules linked), so the repository's own files
 * are never touched; nothing may be written under that package tree at run time.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { bundled, cachePath, packageCopy, restCachePath, restScriptPath } from "../helpers/package-copy.js";

const CACHE = (root: string): string => cachePath(root, "stdio");

const scratch = (): string => packageCopy("berth-cbh-");

/** Every path under `root` (links not followed) with its mtime. */
function tree(root: string, dir = root, out = new Map<string, number>()): Map<string, number> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    out.set(p, e.isSymbolicLink() ? 0 : statSync(p).mtimeMs);
    if (e.isDirectory()) tree(root, p, out);
  }
  return out;
}

/** `berth stdio` from `root`: initialize answered, then stdin closed; the boot mark and stderr. A hang is killed at the deadline. */
function initialize(root: string): Promise<{ boot: string; initialized: boolean; stderr: string; hung: boolean }> {
  const home = mkdtempSync(join(tmpdir(), "berth-cbh-home-"));
  const child = spawn(join(root, "bin", "berth"), ["stdio"], { env: { PATH: process.env["PATH"], HOME: home, MC_HOME: home, BERTH_DEBUG_TIMING: "1" }, cwd: home, stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  let out = "";
  let initialized = false;
  let hung = false;
  // Not a timing assertion: a boot that blocks on a FIFO never ends; the deadline turns that into a failure.
  const deadline = setTimeout(() => {
    hung = true;
    child.kill("SIGKILL");
  }, 30_000);
  child.stderr.setEncoding("utf8").on("data", (d: string) => void (stderr += d));
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    if (!initialized && /"type":"initialized"/.test(out)) {
      initialized = true;
      child.stdin.end();
    }
  });
  child.stdin.write(JSON.stringify({ type: "initialize", request_id: "i", protocol_version: 3 }) + "\n");
  return new Promise((resolve) =>
    child.on("close", () => {
      clearTimeout(deadline);
      rmSync(home, { recursive: true, force: true });
      resolve({ boot: /berth-timing \S+ (boot [^\n]*)/.exec(stderr)?.[1] ?? "(no boot mark)", initialized, stderr, hung });
    }),
  );
}

test("a cache or script that is a FIFO, a device or a huge file falls back quietly instead of hanging; nothing is written under the package", { skip: !bundled() && "dist/cold/ is older than the last tsc build", timeout: 240_000 }, async (t) => {
  const mkfifo = spawnSync("mkfifo", ["--help"]).status === 0;
  const roots: string[] = [];
  try {
    const cases: Array<[string, (root: string) => void]> = [
      // The intact tree first: the cached boot writes nothing under the package either.
      ["intact", () => undefined],
      ["the cache a symlink to /dev/zero", (r) => {
        rmSync(CACHE(r));
        symlinkSync("/dev/zero", CACHE(r));
      }],
      ["the cache a 100 MiB file", (r) => {
        rmSync(CACHE(r));
        writeFileSync(CACHE(r), "");
        truncateSync(CACHE(r), 100 * 1024 * 1024);
      }],
      ["the cache a directory", (r) => {
        rmSync(CACHE(r));
        mkdirSync(CACHE(r));
      }],
      ["the second part's cache a symlink to /dev/zero", (r) => {
        rmSync(restCachePath(r, "stdio"));
        symlinkSync("/dev/zero", restCachePath(r, "stdio"));
      }],
    ];
    if (mkfifo) {
      cases.push(["the cache a symlink to a FIFO", (r) => {
        const fifo = join(r, "fifo");
        assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
        rmSync(CACHE(r));
        symlinkSync(fifo, CACHE(r));
      }]);
      cases.push(["the script a FIFO", (r) => {
        const script = join(r, "dist", "cold", "berth-stdio.cjs");
        rmSync(script);
        assert.equal(spawnSync("mkfifo", [script]).status, 0);
      }]);
      cases.push(["the script's second part a FIFO", (r) => {
        rmSync(restScriptPath(r, "stdio"));
        assert.equal(spawnSync("mkfifo", [restScriptPath(r, "stdio")]).status, 0);
      }]);
    } else t.diagnostic("mkfifo not found: the FIFO cases are skipped");
    for (const [name, damage] of cases) {
      const r = scratch();
      roots.push(r);
      damage(r);
      const before = tree(r);
      const out = await initialize(r);
      assert.equal(out.hung, false, `${name}: the boot hung`);
      assert.equal(out.boot, name === "intact" ? "boot code cache" : "boot esm (no code cache)", `${name}: ${out.stderr}`);
      assert.ok(out.initialized, `${name}: initialize answered; stderr ${out.stderr}`);
      assert.ok(!/Error|warning|\n\s+at /i.test(out.stderr.replace(/berth-timing[^\n]*\n/g, "")), `${name}: quiet fallback, got ${out.stderr}`);
      assert.deepEqual(tree(r), before, `${name}: nothing written under the package tree`);
    }
  } finally {
    for (const r of roots) rmSync(r, { recursive: true, force: true });
  }
});
