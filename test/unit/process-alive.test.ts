/**
 * `pidAlive`: a running process (ours, a child) is alive; a reaped one is not; a zombie (exited, not yet reaped by its
 * parent: here one whose event loop is blocked) is not either, though `kill(pid, 0)` still finds its PID.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { pidAlive } from "../../src/store/process-alive.js";

const state = (pid: number): string => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.charAt(stat.lastIndexOf(")") + 2);
  } catch {
    return "gone";
  }
};

test("pidAlive: running is alive; a zombie and a reaped process are not", { skip: process.platform !== "linux" && "zombies are read from /proc" }, async () => {
  assert.equal(pidAlive(process.pid), true);
  // A parent that starts `true` and then blocks its event loop (Atomics.wait), so it never reaps it: once `true` has
  // exited it is a zombie for as long as the parent lives, whatever the timing.
  const script = `const c = require("node:child_process").spawn("true"); c.on("spawn", () => { process.stdout.write(c.pid + "\\n"); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 600000); });`;
  const parent = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "ignore"] });
  try {
    let out = "";
    parent.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    while (!out.includes("\n")) await new Promise((r) => setTimeout(r, 10));
    const zombie = Number(out.trim());
    while (state(zombie) !== "Z") await new Promise((r) => setTimeout(r, 10));
    assert.doesNotThrow(() => process.kill(zombie, 0), "the zombie's PID still exists");
    assert.equal(pidAlive(zombie), false, "a zombie has exited");
    assert.equal(pidAlive(parent.pid!), true, "its parent runs");
  } finally {
    parent.kill("SIGKILL");
  }
  const gone = parent.pid!;
  await new Promise((r) => parent.once("close", r));
  assert.equal(pidAlive(gone), false, "a reaped process is gone");
});
