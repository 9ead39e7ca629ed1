/**
 * `berth stdio` whose stdout fails with a system error (here /dev/full: ENOSPC on every write) says so on stderr and
 * exits 1; a client that goes away (its read end closed: EPIPE) ends it like EOF, exit 0, with nothing said.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, openSync, closeSync } from "node:fs";
import { BERTH_BIN } from "../helpers/paths.js";
import { childEnv, startRig } from "./client.js";

const INIT = JSON.stringify({ type: "initialize", request_id: "i", protocol_version: 3 }) + "\n";

it("a stdout that fails (ENOSPC) is named on stderr and exits 1", { skip: existsSync("/dev/full") ? false : "no /dev/full here" }, async () => {
  const rig = await startRig();
  const full = openSync("/dev/full", "w");
  try {
    const child = spawn(process.execPath, [BERTH_BIN, "stdio"], { env: childEnv(rig.env), stdio: ["pipe", full, "pipe"] });
    let err = "";
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
    child.stdin!.end(INIT);
    const code = await new Promise<number | null>((r) => child.once("close", r));
    assert.equal(code, 1, err);
    assert.equal(err, "berth stdio: the output stream failed (ENOSPC); closing the connection\n");
  } finally {
    closeSync(full);
    await rig.fake.close();
  }
});

it("a client that closes its read end ends berth stdio like EOF: exit 0, nothing said", async () => {
  const rig = await startRig();
  try {
    const child = spawn(process.execPath, [BERTH_BIN, "stdio"], { env: childEnv(rig.env), stdio: ["pipe", "pipe", "pipe"] });
    let err = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    child.stdout.destroy(); // our read end closed: the server's writes fail EPIPE
    child.stdin.write(INIT);
    // stdin stays open: the failed write alone ends it.
    const code = await new Promise<number | null>((r) => child.once("close", r));
    assert.equal(code, 0, err);
    assert.doesNotMatch(err, /output stream failed/);
  } finally {
    await rig.fake.close();
  }
});
