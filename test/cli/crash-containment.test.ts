/**
 * A daemon whose parent went away (stderr closed) must not spin on its own diagnostics: one
 * contained crash is logged once, and the process still answers afterwards.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath, pathToFileURL } from "node:url";
import { join, dirname } from "node:path";

const MODULE = pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), "../../src/cli/crash-containment.js")).href;

// The child logs every contained crash to stderr and counts its log calls. After the parent has
// closed its end of stderr it throws once, waits until stderr has failed and many more loop turns
// have passed, then reports the count on stdout.
const CHILD = `
import { containCrashes } from ${JSON.stringify(MODULE)};
let calls = 0;
let failed = false;
containCrashes((m) => { calls++; process.stderr.write(m + "\\n", (err) => { if (err) failed = true; }); });
process.stdin.once("data", () => {
  setImmediate(() => { throw new Error("planted"); });
  const check = (turns) => {
    if (!failed && turns < 100000) return setImmediate(() => check(turns + 1));
    let more = 0;
    const settle = () => (++more < 200 ? setImmediate(settle) : process.stdout.write(JSON.stringify({ calls, errored: failed }) + "\\n", () => process.exit(0)));
    settle();
  };
  setImmediate(() => check(0));
});
`;

// Before the fix the child never reports (it spins on its own log), so a generous bound fails it.
test("a contained crash with stderr closed is logged once, not in a loop", { timeout: 60_000 }, async (t) => {
  const child = spawn(process.execPath, ["--input-type=module", "-e", CHILD], { stdio: ["pipe", "pipe", "pipe"] });
  // A spinning child (the bug) must not outlive a timed-out test.
  t.signal.addEventListener("abort", () => child.kill("SIGKILL"));
  child.stderr.destroy(); // the reader of our diagnostics is gone
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stdin.write("go\n");
  const [code] = (await once(child, "exit")) as [number | null];
  assert.equal(code, 0);
  const report = JSON.parse(out.trim()) as { calls: number; errored: boolean };
  assert.equal(report.errored, true, "the child saw stderr fail");
  assert.equal(report.calls, 1, "one crash, one log call");
});
