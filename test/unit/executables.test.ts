/**
 * The delegate CLIs' PATH lookup (src/cli/delegates/executables.ts): the answers equal a fresh scan, installing or
 * removing a CLI shows at the next lookup, and with nothing changed a lookup costs one stat per PATH directory
 * (counted through the `stat` seam) instead of one per directory and CLI.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync, type Stats } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { ExecutableResolver } from "../../src/cli/delegates/executables.js";

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

test("installing, shadowing and removing a CLI show at the next lookup", () => {
  const [a, b] = pathDirs(2) as [string, string];
  for (const d of [a, b]) age(d);
  const path = [a, b].join(delimiter);
  const r = new ExecutableResolver();
  assert.deepEqual(r.resolve(NAMES, path), [null, null, null]);
  const inB = install(b, "pi");
  assert.equal(r.resolve(NAMES, path)[2], inB, "installed");
  const inA = install(a, "pi");
  assert.equal(r.resolve(NAMES, path)[2], inA, "an earlier PATH directory now shadows it");
  rmSync(inA);
  assert.equal(r.resolve(NAMES, path)[2], inB, "removed from the first directory");
  rmSync(inB);
  assert.equal(r.resolve(NAMES, path)[2], null, "removed");
  const missing = join(a, "later");
  assert.equal(r.resolve(["codex"], [missing, b].join(delimiter))[0], null);
  mkdirSync(missing);
  const late = install(missing, "codex");
  assert.equal(r.resolve(["codex"], [missing, b].join(delimiter))[0], late, "a PATH directory created later is seen");
});

test("with nothing changed a lookup stats each PATH directory once, not each CLI in each directory", () => {
  const dirs = pathDirs(6);
  const codex = install(dirs[4]!, "codex");
  for (const d of dirs) age(d);
  const path = dirs.join(delimiter);
  const { stat, calls } = counting();
  const r = new ExecutableResolver({ stat });
  assert.deepEqual(r.resolve(NAMES, path), [codex, null, null]);
  assert.ok(calls.length > dirs.length, "the first lookup scans");
  calls.length = 0;
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
  assert.deepEqual(r.resolve(["codex"], a), [null]);
  assert.ok(calls.includes(join(a, "codex")), "not reused while the directory's change is that recent");
  now += 5000; // the next check is well after the change: the answers cached now may be reused
  r.resolve(["codex"], a);
  calls.length = 0;
  assert.deepEqual(r.resolve(["codex"], a), [null]);
  assert.deepEqual(calls, [a]);
});
