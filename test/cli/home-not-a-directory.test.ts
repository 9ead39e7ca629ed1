/**
 * An `MC_HOME` below a regular file (`MC_HOME=/tmp/somefile/home`, a path pasted one level too deep, or a file left
 * where the home's parent should be) made `berth chat`, `berth service` and `berth stdio` say only `cannot be used
 * (ENOTDIR)`. Each door names the component that is not a directory and the fix, exits 1 as before, and prints no
 * stack trace.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { BERTH_BIN } from "../helpers/paths.js";

function runDoor(args: string[], home: string): { code: number | null; stderr: string; stdout: string } {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, MC_HOME: home };
  const r = spawnSync(process.execPath, [BERTH_BIN, ...args], { env, input: "", encoding: "utf8", timeout: 30_000 });
  return { code: r.status, stderr: r.stderr, stdout: r.stdout };
}

const DOORS = [
  ["chat", ["chat", "-p", "hi"]],
  ["chat", ["chat"]],
  ["service", ["service"]],
  ["stdio", ["stdio"]],
] as const;

describe("MC_HOME below a regular file", () => {
  it("every door names the file in the way and the fix; exit 1, no stack trace", { timeout: 60_000 }, () => {
    const dir = mkdtempSync(join(tmpdir(), "berth-notdir-"));
    const file = join(dir, "somefile");
    writeFileSync(file, "not a directory\n");
    for (const home of [join(file, "home"), join(file, "a", "b")]) {
      for (const [door, args] of DOORS) {
        const r = runDoor([...args], home);
        assert.equal(r.code, 1, `${args.join(" ")}: ${r.stderr}`);
        assert.equal(r.stdout, "", `${args.join(" ")} answered nothing`);
        assert.equal(
          r.stderr,
          `berth ${door}: the state directory ${home} cannot be created: ${file} is a file, not a directory; set MC_HOME to a directory you own, or move ${file} out of the way\n`,
        );
      }
    }
  });

  it("a symbolic link to a file in the path is named as the link, with what it points at", () => {
    const dir = mkdtempSync(join(tmpdir(), "berth-notdir-"));
    writeFileSync(join(dir, "target"), "");
    mkdirSync(join(dir, "d"));
    symlinkSync(join(dir, "target"), join(dir, "d", "link"));
    const home = join(dir, "d", "link", "home");
    const r = runDoor(["stdio"], home);
    assert.equal(r.code, 1, r.stderr);
    const link = join(dir, "d", "link");
    assert.equal(
      r.stderr,
      `berth stdio: the state directory ${home} cannot be created: ${link} is a symbolic link to a file, not a directory; set MC_HOME to a directory you own, or move ${link} out of the way\n`,
    );
  });
});
