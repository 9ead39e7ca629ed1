/**
 * The delegate CLIs' PATH lookup (src/cli/delegates/executables.ts): the answers equal a fresh scan, installing or
 * removing a CLI shows at the first lookup once the reuse window passed (or at once under another PATH value), within
 * the window a lookup costs no file system call, and a check with nothing changed costs one stat per PATH directory
 * (counted through the `stat` seam) instead of one per directory and CLI.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync, type Stats } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { ExecutableResolver, REUSE_MS } from "../../src/cli/delegates/executables.js";

const NAMES = ["codex", "claude", "pi"] as const;
const HOUR_AGO = new Date(Date.now() - 3600_000);

/** PATH directories whose last change is an hour old (so cached answers are not racy). */
function pathDirs(n: number): string[] {
  const root = mkdtempSync(join(tmpdir(), "exe-path-"));
  return Array.from({ length: n }, (_, i) => {
    const d = join(root, `bin${i}`);
    mkdirSync(d);
    return d;
  });
}
const age = (dir: string): void => utimesSync(dir, HOUR_AGO, HOUR_AGO);

function install(dir: string, name: string, mode = 0o755): string {
  const p = join(dir, name);
  writeFileSync(p, "#!/bin/sh\n");
  chmodSync(p, mode);
  return p;
}

function counting(): { stat: (p: string) => Stats; calls: string[] } {
  const calls: string[] = [];
  return { calls, stat: (p) => (calls.push(p), statSync(p)) };
}

test("answers equal a fresh scan: first executable regular file on PATH; relative, empty and missing entries skipped", () => {
  const [a, b, c] = pathDirs(3) as [string, string, string];
  install(a, "codex", 0o644); // not executable
  mkdirSync(join(a, "claude")); // not a file
  const codex = install(b, "codex");
  const claude = install(c, "claude");
  for (const d of [a, b, c]) age(d);
  const path = ["", "relative/bin", a, join(a, "missing"), b, c].join(delimiter);
  const r = new ExecutableResolver();
  assert.deepEqual(r.resolve(NAMES, path), [codex, claude, null]);
  assert.deepEqual(r.resolve(NAMES, path), [codex, claude, null], "the cached answer is the same");
  assert.deepEqual(new ExecutableResolver().resolve(NAMES, undefined), [null, null, null]);
});

test("installing, shadowing and removing a CLI show at the first lookup after the reuse window", () => {
  const [a, b] = pathDirs(2) as [string, string];
  for (const d of [a, b]) age(d);
  const path = [a, b].join(delimiter);
  let now = Date.now();
  const r = new ExecutableResolver({ now: () => now });
  const later = (): number => (now += REUSE_MS);
  assert.deepEqual(r.resolve(NAMES, path), [null, null, null]);
  const inB = install(b, "pi");
  later();
  assert.equal(r.resolve(NAMES, path)[2], inB, "installed");
  const inA = install(a, "pi");
  later();
  assert.equal(r.resolve(NAMES, path)[2], inA, "an earlier PATH directory now shadows it");
  rmSync(inA);
  later();
  assert.equal(r.resolve(NAMES, path)[2], inB, "removed from the first directory");
  rmSync(inB);
  later();
  assert.equal(r.resolve(NAMES, path)[2], null, "removed");
  const missing = join(a, "later");
  assert.equal(r.resolve(["codex"], [missing, b].join(delimiter))[0], null);
  mkdirSync(missing);
  const late = install(missing, "codex");
  later();
  assert.equal(r.resolve(["codex"], [missing, b].join(delimiter))[0], late, "a PATH directory created later is seen");
});

test("within the reuse window a lookup checks nothing; an install shows once it passed, or at once under a new PATH", () => {
  const [a, b] = pathDirs(2) as [string, string];
  for (const d of [a, b]) age(d);
  const path = [a, b].join(delimiter);
  let now = Date.now();
  const { stat, calls } = counting();
  const r = new ExecutableResolver({ stat, now: () => now });
  assert.deepEqual(r.resolve(NAMES, path), [null, null, null]);
  const codex = install(b, "codex");
  calls.length = 0;
  now += REUSE_MS - 1;
  assert.deepEqual(r.resolve(NAMES, path), [null, null, null], "still the answer of the last check");
  assert.deepEqual(calls, [], "no file system call within the window");
  now += 1;
  assert.deepEqual(r.resolve(NAMES, path), [codex, null, null], "the window passed: the install is seen");
  const claude = install(a, "claude");
  calls.length = 0;
  const other = [b, a].join(delimiter);
  assert.deepEqual(r.resolve(NAMES, other), [codex, claude, null], "another PATH value is checked at once");
  assert.ok(calls.length > 0);
  calls.length = 0;
  now -= 10 * REUSE_MS; // a clock stepped back is not a reason to trust the cache
  assert.deepEqual(r.resolve(NAMES, other), [codex, claude, null]);
  assert.ok(calls.length > 0);
});

test("with nothing changed a lookup stats each PATH directory once, not each CLI in each directory", () => {
  const dirs = pathDirs(6);
  const codex = install(dirs[4]!, "codex");
  for (const d of dirs) age(d);
  const path = dirs.join(delimiter);
  const { stat, calls } = counting();
  let now = Date.now();
  const r = new ExecutableResolver({ stat, now: () => now });
  assert.deepEqual(r.resolve(NAMES, path), [codex, null, null]);
  assert.ok(calls.length > dirs.length, "the first lookup scans");
  calls.length = 0;
  now += REUSE_MS;
  assert.deepEqual(r.resolve(NAMES, path), [codex, null, null]);
  assert.deepEqual(calls, dirs, "only the directories were checked");
  calls.length = 0;
  const other = [dirs[1]!, dirs[4]!].join(delimiter);
  assert.deepEqual(r.resolve(NAMES, other), [codex, null, null]);
  assert.ok(calls.some((p) => p.endsWith("claude")), "another PATH value is scanned afresh");
});

test("a directory changed just before the answers were cached is scanned again (same-tick changes)", () => {
  const [a] = pathDirs(1) as [string];
  let now = Date.now();
  const { stat, calls } = counting();
  const r = new ExecutableResolver({ stat, now: () => now });
  assert.deepEqual(r.resolve(["codex"], a), [null]); // `a` was created just now: racy
  calls.length = 0;
  now += REUSE_MS;
  assert.deepEqual(r.resolve(["codex"], a), [null]);
  assert.ok(calls.includes(join(a, "codex")), "not reused while the directory's change is that recent");
  now += 5000; // the next check is well after the change: the answers cached now may be reused
  r.resolve(["codex"], a);
  calls.length = 0;
  now += REUSE_MS;
  assert.deepEqual(r.resolve(["codex"], a), [null]);
  assert.deepEqual(calls, [a]);
});
