/**
 * Temporary files of atomic replacements (write, edit) left by a killed Berth: the next write of the same file
 * removes those whose writer is certainly gone, and nothing else (docs/tools.md, "Atomic replacement").
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, symlinkSync, watch, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeTool } from "../../src/runtime/tools/write.js";
import { editTool } from "../../src/runtime/tools/edit.js";
import { TEMP_REMOVALS, tempName } from "../../src/runtime/tools/atomic-temp.js";
import { selfInstance, startText } from "../../src/store/process-instance.js";
import { processStartTime } from "../../src/store/process-alive.js";
import { call, makeCtx, tempDir } from "./helpers.js";

/** A live child process and its instance (pid, start, tag as a temp name carries them). */
async function liveChild(t: { after(fn: () => void): void }): Promise<{ child: ChildProcess; inst: { pid: number; start: string; tag: string } }> {
  const child = spawn(process.execPath, ["-e", "process.stdin.resume(); console.log('up')"], { stdio: ["pipe", "pipe", "inherit"] });
  t.after(() => child.kill("SIGKILL"));
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  const start = processStartTime(child.pid!);
  assert.ok(start !== null, "the test needs /proc");
  return { child, inst: { pid: child.pid!, start: startText(start), tag: selfInstance().tag } };
}

/** A process instance that ran and is gone (killed and reaped). */
async function deadInstance(t: { after(fn: () => void): void }): Promise<{ pid: number; start: string; tag: string }> {
  const { child, inst } = await liveChild(t);
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGKILL");
  await exited;
  return inst;
}

void test("a dead writer's leftover temp file is removed by the next write of that file; nothing else is", async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, "a.txt"), "old\n");
  writeFileSync(join(dir, "b.txt"), "b\n");
  const dead = await deadInstance(t);
  const { inst: live } = await liveChild(t);
  const mine = { pid: process.pid, ...selfInstance() };
  const leftover = tempName("a.txt", dead);
  const names = {
    leftover,
    liveChild: tempName("a.txt", live),
    own: tempName("a.txt", mine),
    // The same PID under another start: a reused PID, so the writer is gone.
    reused: tempName("a.txt", { ...live, start: (parseInt(live.start, 36) + 1).toString(36) }),
    otherHost: tempName("a.txt", { ...dead, tag: "0123456789ab" === dead.tag ? "ba9876543210" : "0123456789ab" }),
    otherFile: tempName("b.txt", dead),
    olderBerth: ".a.txt.0123456789ab.berth-tmp",
    lookalike: leftover.replace(".berth-tmp", ".berth-tmp2"),
    symlink: tempName("a.txt", dead),
    directory: tempName("a.txt", dead),
  };
  for (const [k, n] of Object.entries(names)) {
    if (k === "symlink") symlinkSync("b.txt", join(dir, n));
    else if (k === "directory") mkdirSync(join(dir, n));
    else writeFileSync(join(dir, n), `partial ${k}`);
  }
  const r = await call(writeTool, { path: "a.txt", content: "new\n" }, makeCtx(dir));
  assert.equal(r.isError, false, r.content);
  assert.equal(readFileSync(join(dir, "a.txt"), "utf8"), "new\n");
  const left = new Set(readdirSync(dir));
  assert.ok(!left.has(names.leftover), "the dead writer's temp file is removed");
  assert.ok(!left.has(names.reused), "a reused PID's (another start) is removed");
  for (const k of ["liveChild", "own", "otherHost", "otherFile", "olderBerth", "lookalike", "symlink", "directory"] as const) {
    assert.ok(left.has(names[k]), `${k} is kept`);
  }
  assert.equal(readFileSync(join(dir, names.symlink), "utf8"), "b\n", "the symlink's target is untouched");
  assert.equal(readFileSync(join(dir, "b.txt"), "utf8"), "b\n");
  assert.equal(left.size, 2 + Object.keys(names).length - 2, "only the two dead writers' files went");
});

void test(`one write removes at most ${TEMP_REMOVALS} leftovers; the next removes the rest`, async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, "a.txt"), "x\n");
  const dead = await deadInstance(t);
  for (let i = 0; i < TEMP_REMOVALS + 1; i++) writeFileSync(join(dir, tempName("a.txt", dead)), "partial");
  const leftovers = () => readdirSync(dir).filter((n) => n.endsWith(".berth-tmp")).length;
  assert.equal((await call(editTool, { path: "a.txt", old_string: "x", new_string: "y" }, makeCtx(dir))).isError, false);
  assert.equal(leftovers(), 1, "the limit: 16 removed, one past it stays");
  assert.equal((await call(editTool, { path: "a.txt", old_string: "y", new_string: "z" }, makeCtx(dir))).isError, false);
  assert.equal(leftovers(), 0);
  assert.deepEqual(readdirSync(dir), ["a.txt"]);
});

void test("a Berth killed (SIGKILL) between the temp file's create and its rename: the next write cleans up", async (t) => {
  const dir = tempDir(t);
  const target = join(dir, "big.txt");
  writeFileSync(target, "old\n");
  const tools = new URL("../../src/runtime/tools/", import.meta.url).href;
  // 64 MiB: the kill lands while the text is still being written or flushed (the parent kills on the temp file's
  // creation); an attempt whose rename still won is repeated.
  const script = `
    const { writeTool } = await import(${JSON.stringify(`${tools}write.js`)});
    const ctx = { cwd: process.argv[1], signal: new AbortController().signal, onProgress: () => {} };
    await writeTool.run({ path: "big.txt", content: "n".repeat(64 * 1024 * 1024) }, ctx);`;
  let left: string[] = [];
  for (let attempt = 0; attempt < 5 && left.length === 0; attempt++) {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script, dir], { stdio: ["ignore", "ignore", "inherit"] });
    const exited = new Promise((r) => child.once("exit", r));
    const w = watch(dir, (_ev, name) => {
      if (name?.endsWith(".berth-tmp") === true) child.kill("SIGKILL");
    });
    await exited;
    w.close();
    left = readdirSync(dir).filter((n) => n.endsWith(".berth-tmp"));
    if (left.length === 0) writeFileSync(target, "old\n");
  }
  assert.equal(left.length, 1, "a killed writer left its temp file");
  assert.match(left[0]!, /^\.big\.txt\.w1-[0-9a-z]+-[0-9a-z]+-[0-9a-f]{12}-[0-9a-f]{12}\.berth-tmp$/);
  assert.equal(readFileSync(target, "utf8"), "old\n", "the old content is whole");
  const r = await call(editTool, { path: "big.txt", old_string: "old", new_string: "new" }, makeCtx(dir));
  assert.equal(r.isError, false, r.content);
  assert.deepEqual(readdirSync(dir), ["big.txt"], "the leftover is gone");
  assert.equal(readFileSync(target, "utf8"), "new\n");
});
