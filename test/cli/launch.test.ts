/** Launch-line rules and the state root. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, statSync } from "node:fs";
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
  it("accepts BERTH_HOME as an alias of MC_HOME @req AS-CLI-04", async () => {
    const home = join(tmp(), "bh");
    const svc = new ServiceProcess({ home, env: { BERTH_HOME: home, MC_HOME: "" } });
    await svc.initialize();
    svc.end();
    await svc.exited;
    assert.equal(statSync(home).mode & 0o777, 0o700);
  });
});
