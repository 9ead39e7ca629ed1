/** Launch-line rules and the state root. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BERTH_BIN, MAGI_BIN } from "../helpers/paths.js";
import { ServiceProcess } from "../helpers/service-process.js";

const tmp = () => mkdtempSync(join(tmpdir(), "berth-cli-"));

describe("launch line @req AS-CLI-02", () => {
  const refused = [
    ["--app", "service", "--prompt", "hi"],
    ["--app", "service", "-p", "hi"],
    ["--app", "service", "--provider", "anthropic"],
    ["--app", "service", "--model", "m"],
    ["--app", "service", "--api-key", "sk-test-SECRETMARKER-1"],
    ["--app", "service", "--theme", "dark"],
    ["--app", "service", "--session", "abc"],
    ["--app", "service", "--resume"],
    ["--app", "service", "login"],
    ["login", "--app", "service"],
    ["--app", "chat"],
    [],
  ];
  for (const args of refused) {
    it(`magi-code ${args.join(" ")} is refused`, () => {
      const home = join(tmp(), "home");
      const r = spawnSync(process.execPath, [MAGI_BIN, ...args], { env: { ...process.env, MC_HOME: home }, input: "", encoding: "utf8" });
      assert.notEqual(r.status, 0);
      assert.equal(r.stdout, "");
      assert.match(r.stderr, /magi-code/);
      assert.ok(!r.stderr.includes("SECRETMARKER"), "a refused credential is not echoed");
      assert.throws(() => statSync(home), "nothing is created for a refused launch");
    });
  }
  it("berth with an unknown command names it, suggests a near one, and shows the usage (exit 2)", () => {
    const run = (cmd: string) => spawnSync(process.execPath, [BERTH_BIN, cmd], { input: "", encoding: "utf8" });
    for (const [typed, hint] of [["chta", "chat"], ["sevrice", "service"], ["deamon", "daemon"], ["Chat", "chat"], ["acpp", "acp"]] as const) {
      const r = run(typed);
      assert.equal(r.status, 2);
      assert.equal(r.stdout, "");
      assert.match(r.stderr, new RegExp(`^berth: unknown command '${typed}' \\(did you mean '${hint}'\\?\\)\\nusage: berth <command>`));
    }
    const far = run("deploy");
    assert.equal(far.status, 2);
    assert.match(far.stderr, /^berth: unknown command 'deploy'\nusage: berth <command>/);
  });
  it("every command's --help and -h print its usage on stdout and exit 0, as `berth <command> [--help]` promises", () => {
    const home = join(tmp(), "home");
    for (const cmd of ["chat", "service", "stdio", "daemon", "open", "acp", "channel", "build-info"]) {
      for (const flag of ["--help", "-h"]) {
        const r = spawnSync(process.execPath, [BERTH_BIN, cmd, flag], { env: { ...process.env, MC_HOME: home }, input: "", encoding: "utf8" });
        assert.equal(r.status, 0, `berth ${cmd} ${flag}: ${r.stderr}`);
        assert.equal(r.stderr, "", `berth ${cmd} ${flag}`);
        assert.match(r.stdout, new RegExp(`^usage:(\\n)? +berth ${cmd}\\b`), `berth ${cmd} ${flag}`);
      }
    }
    assert.throws(() => statSync(home), "asking for help creates no state root");
  });
  it("berth daemon and berth open name an unknown argument and where the options are listed", () => {
    for (const cmd of ["daemon", "open"]) {
      const r = spawnSync(process.execPath, [BERTH_BIN, cmd, "--bogus"], { input: "", encoding: "utf8" });
      assert.equal(r.status, 2);
      assert.equal(r.stdout, "");
      assert.equal(r.stderr, `berth ${cmd}: unknown argument --bogus; berth ${cmd} --help lists the options\n`);
    }
  });
  it("berth service refuses extra arguments", () => {
    const r = spawnSync(process.execPath, [BERTH_BIN, "service", "--model", "x"], { input: "", encoding: "utf8" });
    assert.notEqual(r.status, 0);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /takes no arguments/);
  });
});

describe("state root", () => {
  it("creates MC_HOME owner-only and writes nothing else at startup @req AS-CLI-03", async () => {
    const home = join(tmp(), "nested", "home");
    const svc = new ServiceProcess({ home, env: { MC_HOME: home } });
    await svc.initialize();
    const st = await svc.request("status", {});
    assert.equal(st.error, null);
    svc.end();
    assert.equal((await svc.exited).code, 0);
    assert.equal(statSync(home).mode & 0o777, 0o700);
    assert.deepEqual(readdirSync(home), []);
  });
  it("berth open refuses a state root others may write, as the daemon it would start does, and writes nothing there", () => {
    const home = join(tmp(), "open-home");
    mkdirSync(home, { mode: 0o700 });
    chmodSync(home, 0o777);
    const env = { ...process.env, MC_HOME: home, DISPLAY: "", WAYLAND_DISPLAY: "" };
    const r = spawnSync(process.execPath, [BERTH_BIN, "open", "--no-browser"], { env, input: "", encoding: "utf8" });
    assert.equal(r.status, 1, r.stderr);
    assert.equal(r.stdout, "");
    assert.equal(r.stderr, `berth open: the state directory ${home} is writable by others (mode 777); fix it with: chmod 700 ${home}\n`);
    assert.deepEqual(readdirSync(home), []);
  });
  it("accepts BERTH_HOME as an alias of MC_HOME @req AS-CLI-04", async () => {
    const home = join(tmp(), "bh");
    const svc = new ServiceProcess({ home, env: { BERTH_HOME: home, MC_HOME: "" } });
    await svc.initialize();
    svc.end();
    await svc.exited;
    assert.equal(statSync(home).mode & 0o777, 0o700);
  });
});

describe("a working directory removed before the launch", () => {
  // Each door started (through its launcher, as a shell would) in a directory that was removed meanwhile: one line
  // saying so and how to go on, exit 1, nothing created; it used to be a stack trace or "unexpected error (Error)".
  const cases: Array<[string, string[]]> = [
    ["berth chat", [BERTH_BIN, "chat", "-p", "hi"]],
    ["berth stdio", [BERTH_BIN, "stdio"]],
    ["berth service", [BERTH_BIN, "service"]],
    ["berth daemon", [BERTH_BIN, "daemon"]],
    ["berth acp", [BERTH_BIN, "acp"]],
    ["berth open", [BERTH_BIN, "open", "--no-browser"]],
    ["magi-code", [MAGI_BIN, "--app", "service"]],
  ];
  for (const [name, cmd] of cases) {
    it(`${name} names the missing directory and exits 1`, () => {
      const home = join(tmp(), "home");
      const gone = tmp();
      const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
      const r = spawnSync("/bin/sh", ["-c", `cd ${q(gone)} && rmdir ${q(gone)} && exec ${cmd.map(q).join(" ")}`], { env: { ...process.env, MC_HOME: home, SCV_HOME: "" }, input: "", encoding: "utf8", timeout: 60_000 });
      assert.equal(r.status, 1, r.stderr);
      assert.equal(r.stdout, "");
      assert.ok(r.stderr.includes(`${name}: the current directory no longer exists (it was removed or renamed); cd to an existing directory and run it again\n`), r.stderr);
      assert.doesNotMatch(r.stderr, /\n\s+at |uv_cwd|unexpected error/);
      assert.throws(() => statSync(home), "nothing is created");
    });
  }
});
