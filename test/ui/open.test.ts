/**
 * `berth open`: starts a detached daemon when none answers for this home, finds the running one
 * the next time, hands the opener the UI URL (token in the fragment only), and prints the URL when
 * no opener exists. The opener is a recording `xdg-open` script first on PATH.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BERTH_BIN } from "../helpers/paths.js";
import { until } from "../host/helpers.js";

function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [BERTH_BIN, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    p.stdout.on("data", (b: Buffer) => (out += b.toString()));
    p.stderr.on("data", (b: Buffer) => (err += b.toString()));
    // "close", not "exit": only then has all of stdout and stderr been read.
    p.on("close", (code) => resolve({ code, out, err }));
  });
}

test("berth open: starts the daemon once, then finds it; the opener gets the fragment URL; no opener prints it", async () => {
  const home = mkdtempSync(join(tmpdir(), "open-home-"));
  const bin = mkdtempSync(join(tmpdir(), "open-bin-"));
  const opened = join(bin, "opened.txt");
  writeFileSync(join(bin, "xdg-open"), `#!/bin/sh\necho "$1" >> "${opened}"\n`);
  chmodSync(join(bin, "xdg-open"), 0o755);
  const env = { PATH: `${bin}:${process.env.PATH}`, BERTH_HOME: home, MC_HOME: home, HOME: home };
  let pid = 0;
  try {
    const first = await run(["open"], env);
    assert.equal(first.code, 0, first.err);
    assert.match(first.err, /starting `berth daemon --berth-runtime`/);
    assert.equal(first.out, "", "with an opener nothing is printed on stdout");
    const endpoint = JSON.parse(readFileSync(join(home, "host", "endpoint.json"), "utf8")) as { pid: number; http: string; ui: string };
    pid = endpoint.pid;
    assert.ok(!JSON.stringify(endpoint).includes("#token"), "the discovery record holds no token");
    const token = readFileSync(join(home, "host", "token"), "utf8").trim();
    await until(() => existsSync(opened), 5000, "the opener to run");
    const url = readFileSync(opened, "utf8").trim();
    assert.equal(url, `${endpoint.http}/#token=${token}`);
    assert.equal((await fetch(`${endpoint.http}/healthz`)).status, 200);
    assert.ok(!first.err.includes(token), "the token is never on stderr");

    const second = await run(["open"], env);
    assert.equal(second.code, 0, second.err);
    assert.doesNotMatch(second.err, /starting/, "the running daemon is found, not replaced");
    await until(() => readFileSync(opened, "utf8").trim().split("\n").length === 2, 5000, "the second open");
    assert.equal(readFileSync(opened, "utf8").trim().split("\n")[1], url);

    const printed = await run(["open", "--no-browser"], env);
    assert.equal(printed.code, 0, printed.err);
    assert.equal(printed.out.trim(), url);

    const noOpener = await run(["open"], { ...env, PATH: "/nonexistent" });
    assert.equal(noOpener.code, 0, noOpener.err);
    assert.equal(noOpener.out.trim(), url);
    assert.match(noOpener.err, /no browser opener found/);

    assert.equal((await run(["open", "--bogus"], env)).code, 2);
  } finally {
    if (pid) {
      process.kill(pid, "SIGTERM");
      await until(() => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      }, 10_000, "the daemon to exit");
    }
  }
});
