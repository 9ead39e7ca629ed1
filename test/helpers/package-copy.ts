/**
 * A copy of the installed package as the launchers see it (bin/ and dist/cold/, timestamps kept so the bundle stays
 * current; dist/src and node_modules linked), for tests that damage or inspect the code-cache boot without touching
 * the repository's own files. Any copy of the launchers must take bin/package.json along: it makes their JavaScript
 * part CommonJS.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, statSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "./paths.js";

/** The repository's bundle directory. */
export const COLD = join(REPO_ROOT, "dist", "cold");

/** Whether dist/cold/ is at least as new as the last tsc build (else the launchers ignore it). */
export const bundled = (): boolean =>
  existsSync(join(COLD, "main.js")) && statSync(join(COLD, "main.js")).mtimeMs >= statSync(join(REPO_ROOT, "dist", ".tsbuildinfo")).mtimeMs;

/** The code cache of `command` under a package root, as the launchers (bin/berth, bin/magi-code) name it. */
export const cachePath = (root: string, command: string, version = process.version): string =>
  join(root, "dist", "cold", "cache", `${command}-${version}-${process.arch}.bin`);

/** The code cache of the second part of a split command's script (scripts/code-cache.mjs, SPLIT_COMMANDS). */
export const restCachePath = (root: string, command: string): string =>
  join(root, "dist", "cold", "cache", `${command}-${process.version}-${process.arch}.rest.bin`);

/** The second part of a split command's script. */
export const restScriptPath = (root: string, command: string): string => join(root, "dist", "cold", `berth-${command}.rest.cjs`);

/** A fresh copy of the package under a temporary directory whose name starts with `prefix`. */
export function packageCopy(prefix: string): string {
  const root = mkdtempSync(join(tmpdir(), prefix));
  mkdirSync(join(root, "bin"));
  for (const f of ["berth", "magi-code", "package.json"]) cpSync(join(REPO_ROOT, "bin", f), join(root, "bin", f), { preserveTimestamps: true });
  cpSync(join(REPO_ROOT, "package.json"), join(root, "package.json"));
  cpSync(COLD, join(root, "dist", "cold"), { recursive: true, preserveTimestamps: true });
  cpSync(join(REPO_ROOT, "dist", ".tsbuildinfo"), join(root, "dist", ".tsbuildinfo"), { preserveTimestamps: true });
  symlinkSync(join(REPO_ROOT, "dist", "src"), join(root, "dist", "src"));
  symlinkSync(join(REPO_ROOT, "node_modules"), join(root, "node_modules"));
  return root;
}
