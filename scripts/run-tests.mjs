#!/usr/bin/env node
// Runs every compiled test file (dist/test/**/*.test.js) with node's built-in runner.
// Node 20's --test takes no globs, so the list is built here. Extra args filter by substring.
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, relative } from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const testRoot = join(root, "dist", "test");
const filters = process.argv.slice(2);
const files = [];
(function walk(dir) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (name.endsWith(".test.js")) files.push(p);
  }
})(testRoot);
// The longest files start first: started last, one of them would run on alone while the other slots idle, and the
// whole run would end that much later. The rest keep their alphabetical order. (Measured per-file durations, slowest
// first; a path here that no longer exists is simply not matched.)
const LONGEST_FIRST = [
  "dist/test/ui/ui.test.js",
  "dist/test/chat/pipes-errors.test.js",
  "dist/test/conformance/scenarios.test.js",
  "dist/test/channels/cli.test.js",
  "dist/test/chat/transport.test.js",
  "dist/test/acp/methods.test.js",
  "dist/test/host/limits.test.js",
  "dist/test/host/families.fuzz.test.js",
  "dist/test/scv/load.test.js",
  "dist/test/host/daemon.test.js",
  "dist/test/scv/delegation.test.js",
];
const rank = (f) => {
  const i = LONGEST_FIRST.indexOf(relative(root, f).split("\\").join("/"));
  return i === -1 ? LONGEST_FIRST.length : i;
};
const chosen = files
  .filter((f) => filters.length === 0 || filters.some((s) => relative(root, f).includes(s)))
  .map((f, i) => ({ f, i }))
  .sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i)
  .map(({ f }) => f);
if (chosen.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}
// Node applies --test-timeout to each whole file too, not only to each test without its own: the bound must leave
// room for the longest file (the web UI in Chromium, ~25 s quiet) on a loaded 2-core machine, where it has taken
// several times as long. It only ends a run that is hung anyway. A long fuzz run (FUZZ_COUNT set, `npm run fuzz`)
// gets none.
const timeout = process.env.FUZZ_COUNT === undefined ? ["--test-timeout=300000"] : [];
// Every temporary directory the tests and the processes they spawn make (state roots, workspaces, sockets, the
// browser's profile) goes under one directory of this run, removed when the run ends, whatever the tests left.
const scratch = mkdtempSync(join(tmpdir(), "bt-"));
// Most test files spend their time waiting on the processes, sockets and fake servers they drive, not computing: two
// files per core keep both cores busy (on 2 cores, 4 files at once took the whole run from 235 s to 184 s, and passed
// beside two CPU burners). At most 8, so a large machine does not start dozens of browsers and daemons at once.
// BERTH_TEST_CONCURRENCY overrides it (1 runs the files one at a time).
const concurrency = Number(process.env.BERTH_TEST_CONCURRENCY) || Math.min(8, Math.max(4, availableParallelism() * 2));
const r = spawnSync(process.execPath, ["--test", `--test-concurrency=${concurrency}`, ...timeout, ...chosen], {
  stdio: "inherit",
  cwd: root,
  env: { ...process.env, TMPDIR: scratch },
});
rmSync(scratch, { recursive: true, force: true, maxRetries: 3 });
process.exit(r.status ?? 1);
