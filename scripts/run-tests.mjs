#!/usr/bin/env node
// Runs every compiled test file (dist/test/**/*.test.js) with node's built-in runner.
// Node 20's --test takes no globs, so the list is built here. Extra args filter by substring.
import { readdirSync, statSync } from "node:fs";
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
const chosen = files.filter((f) => filters.length === 0 || filters.some((s) => relative(root, f).includes(s)));
if (chosen.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}
// Node applies --test-timeout to each whole file too: a long fuzz run (FUZZ_COUNT set, `npm run fuzz`) gets none.
const timeout = process.env.FUZZ_COUNT === undefined ? ["--test-timeout=120000"] : [];
const r = spawnSync(process.execPath, ["--test", "--test-concurrency=2", ...timeout, ...chosen], {
  stdio: "inherit",
  cwd: root,
});
process.exit(r.status ?? 1);
