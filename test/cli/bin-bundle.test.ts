/**
 * bin/berth and bin/magi-code run the esbuild bundle (dist/cold/) only when it is at least as new as the last tsc build
 * (dist/.tsbuildinfo); otherwise, or when it is missing, they run dist/src/ (docs/architecture.md, "Build and launch"):
 * a bare `tsc` after a bundle must never leave the launchers running stale code. Checked on copies of the real
 * launchers in a scratch tree whose two entry points say which one ran.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { REPO_ROOT } from "../helpers/paths.js";

function scratch(): string {
  const root = mkdtempSync(join(tmpdir(), "berth-bin-"));
  mkdirSync(join(root, "bin"));
  mkdirSync(join(root, "dist", "cold"), { recursive: true });
  mkdirSync(join(root, "dist", "src", "cli"), { recursive: true });
  writeFileSync(join(root, "package.json"), JSON.stringify({ type: "module" }));
  for (const b of ["berth", "magi-code", "package.json"]) copyFileSync(join(REPO_ROOT, "bin", b), join(root, "bin", b));
  const entry = (which: string): string =>
    `export function main(a) { process.stdout.write("${which} main " + a.join(" ") + "\\n"); }\n` +
    `export function magiCode(a) { process.stdout.write("${which} magi " + a.join(" ") + "\\n"); }\n`;
  writeFileSync(join(root, "dist", "cold", "main.js"), entry("bundle"));
  writeFileSync(join(root, "dist", "src", "cli", "main.js"), entry("modules"));
  writeFileSync(join(root, "dist", ".tsbuildinfo"), "{}");
  return root;
}

const at = (path: string, secondsAgo: number): void => {
  const t = new Date(Date.now() - secondsAgo * 1000);
  utimesSync(path, t, t);
};

function run(root: string, bin: string, ...args: string[]): string {
  const r = spawnSync(process.execPath, [join(root, "bin", bin), ...args], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test("the launchers run the bundle when it is newer than the last tsc build", () => {
  const root = scratch();
  at(join(root, "dist", ".tsbuildinfo"), 60);
  at(join(root, "dist", "cold", "main.js"), 30);
  assert.equal(run(root, "berth", "service"), "bundle main service\n");
  assert.equal(run(root, "magi-code", "--app", "service"), "bundle magi --app service\n");
});

test("after a tsc build newer than the bundle, the launchers run dist/src (never stale code)", () => {
  const root = scratch();
  at(join(root, "dist", "cold", "main.js"), 60);
  at(join(root, "dist", ".tsbuildinfo"), 30);
  assert.equal(run(root, "berth", "stdio"), "modules main stdio\n");
  assert.equal(run(root, "magi-code", "--app", "service"), "modules magi --app service\n");
});

test("without a bundle (or without a tsc build record) the launchers run dist/src", () => {
  const root = scratch();
  rmSync(join(root, "dist", "cold"), { recursive: true });
  assert.equal(run(root, "berth", "chat"), "modules main chat\n");
  const other = scratch();
  rmSync(join(other, "dist", ".tsbuildinfo"));
  assert.equal(run(other, "berth", "chat"), "modules main chat\n");
});

test("nothing built: the launchers say how to build and exit 70", () => {
  const root = scratch();
  rmSync(join(root, "dist"), { recursive: true });
  const r = spawnSync(process.execPath, [join(root, "bin", "berth"), "chat"], { encoding: "utf8" });
  assert.equal(r.status, 70);
  assert.match(r.stderr, /^berth: not built \(ERR_MODULE_NOT_FOUND\); run `npm run build`\n$/);
});

test("nothing built: magi-code says so under its own name", () => {
  const root = scratch();
  rmSync(join(root, "dist"), { recursive: true });
  const r = spawnSync(process.execPath, [join(root, "bin", "magi-code"), "--app", "service"], { encoding: "utf8" });
  assert.equal(r.status, 70);
  assert.match(r.stderr, /^magi-code: not built \(ERR_MODULE_NOT_FOUND\); run `npm run build`\n$/);
});

test("bin/berth and bin/magi-code are one launcher but for the lines marked \"launcher\"", () => {
  // Each is one file (no boot module to resolve and compile before the handshake), so the code-cache boot is in both.
  const common = (bin: string): string[] => readFileSync(join(REPO_ROOT, "bin", bin), "utf8").split("\n").filter((l) => !l.includes("// launcher"));
  assert.deepEqual(common("magi-code"), common("berth"));
  const marked = readFileSync(join(REPO_ROOT, "bin", "berth"), "utf8").split("\n").filter((l) => l.includes("// launcher"));
  assert.equal(marked.length, 3, marked.join("\n"));
});
