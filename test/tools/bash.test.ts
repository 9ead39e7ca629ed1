import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { bashTool, createBashTool, HeadTailCapture } from "../../src/runtime/tools/bash.js";
import { MAX_RESULT_BYTES } from "../../src/runtime/tools/result.js";
import { call, isAlive, makeCtx, tempDir, waitFor } from "./helpers.js";

function pidFrom(file: string): number {
  const pid = Number(readFileSync(file, "utf8").trim());
  assert.ok(Number.isInteger(pid) && pid > 1, `pid file holds a pid: ${pid}`);
  return pid;
}

void test("bash: runs in ctx.cwd, captures stdout+stderr, reports exit codes and progress", async (t) => {
  const dir = tempDir(t);
  const ctx = makeCtx(dir);
  let r = await call(bashTool, { command: "pwd; echo out; echo err >&2" }, ctx);
  assert.equal(r.isError, false);
  assert.equal(r.timedOut, false);
  assert.equal(r.content, `${dir}\nout\nerr\nexit code: 0`);
  assert.deepEqual(ctx.progress, ["running", "exit 0"]);
  r = await call(bashTool, { command: "echo partial; exit 3" }, ctx);
  assert.equal(r.isError, true);
  assert.equal(r.errorKind, "failed");
  assert.equal(r.content, "partial\nexit code: 3");
  r = await call(bashTool, { command: "true" }, ctx);
  assert.equal(r.content, "(no output)\nexit code: 0");
});

void test("bash: argument validation and a missing working directory", async (t) => {
  const dir = tempDir(t);
  const ctx = makeCtx(dir);
  assert.equal((await call(bashTool, { command: "" }, ctx)).errorKind, "invalid_arguments");
  assert.equal((await call(bashTool, { command: "true", timeout: 10_000 }, ctx)).errorKind, "invalid_arguments");
  assert.equal((await call(bashTool, { cmd: "true" }, ctx)).errorKind, "invalid_arguments");
  const r = await call(bashTool, { command: "touch made" }, makeCtx(join(dir, "nope")));
  assert.equal(r.errorKind, "failed");
  assert.match(r.content, /working directory does not exist/);
});

void test("bash: output cap keeps head and tail and counts what was omitted", async (t) => {
  const dir = tempDir(t);
  const small = createBashTool({ headBytes: 100, tailBytes: 100 });
  const r = await call(small, { command: "seq 1 20000" }, makeCtx(dir));
  assert.equal(r.isError, false);
  assert.ok(r.content.startsWith("1\n2\n3\n"));
  assert.ok(r.content.endsWith("19999\n20000\nexit code: 0"));
  const m = /\[… (\d+) bytes of output omitted …\]/.exec(r.content);
  assert.ok(m !== null);
  const total = Buffer.byteLength(Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join(""));
  assert.equal(Number(m[1]), total - 200);
  const big = await call(bashTool, { command: "head -c 300000 /dev/zero | tr '\\0' a" }, makeCtx(dir));
  assert.ok(Buffer.byteLength(big.content) <= MAX_RESULT_BYTES);
  assert.match(big.content, /bytes of output omitted/);
});

void test("HeadTailCapture never splits a multi-byte character", () => {
  const c = new HeadTailCapture(4, 4);
  c.push(Buffer.from("ééééé")); // 10 bytes
  const text = c.text();
  assert.ok(!text.includes("\uFFFD"), text);
  assert.equal(text, "éé\n[… 2 bytes of output omitted …]\néé");
});

void test("bash: timeout kills the whole process group, grandchild included", async (t) => {
  const dir = tempDir(t);
  const ctx = makeCtx(dir);
  const r = await call(bashTool, { command: "bash -c 'sleep 30 & echo $! > gc.pid; wait'; echo unreachable", timeout: 1 }, ctx);
  assert.equal(r.isError, true);
  assert.equal(r.errorKind, "limit");
  assert.equal(r.timedOut, true);
  assert.match(r.content, /timed out after 1 s/);
  assert.ok(ctx.progress.includes("timed out"));
  const gc = pidFrom(join(dir, "gc.pid"));
  assert.ok(await waitFor(() => !isAlive(gc)), "grandchild sleep is gone");
});

void test("bash: abort kills the group; a member ignoring SIGTERM gets SIGKILL after the grace", async (t) => {
  const dir = tempDir(t);
  const tool = createBashTool({ killGraceMs: 200 });
  for (const command of ["sleep 30 & echo $! > gc.pid; wait", "trap '' TERM; sleep 30 & echo $! > gc.pid; wait"]) {
    const ac = new AbortController();
    const pidFile = join(dir, "gc.pid");
    const running = call(tool, { command }, makeCtx(dir, ac.signal));
    assert.ok(await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").endsWith("\n"), 30_000));
    const gc = pidFrom(pidFile);
    assert.ok(isAlive(gc));
    ac.abort();
    const r = await running;
    assert.equal(r.errorKind, "cancelled");
    assert.equal(r.timedOut, false);
    assert.ok(await waitFor(() => !isAlive(gc)), `grandchild of ${command} is gone`);
    await import("node:fs/promises").then((fs) => fs.rm(pidFile));
  }
});

void test("bash: background jobs do not outlive a command that exited normally", async (t) => {
  const dir = tempDir(t);
  // The background job never ends by itself: a tool that waited for it would never return (the test would time out).
  const r = await call(bashTool, { command: "sleep 2147483 & echo $! > gc.pid; echo bg" }, makeCtx(dir));
  assert.equal(r.content, "bg\nexit code: 0");
  const gc = pidFrom(join(dir, "gc.pid"));
  assert.ok(await waitFor(() => !isAlive(gc)), "background sleep is gone");
});

void test("bash: terminal escapes and control characters reach the model as plain text", async (t) => {
  const dir = tempDir(t);
  // Colours, a window title (OSC … BEL), a clipboard write (OSC 52 … ST), CRLF, a progress bar's lone CRs, NUL
  // separators (find -print0) and a bell.
  const command = String.raw`printf '\033[1;31mred\033[0m \033]0;title\007ok\033]52;c;aGk=\033\\\r\nprogress 1\rprogress 2\na\000b\000\007\n'`;
  const r = await call(bashTool, { command }, makeCtx(dir));
  assert.equal(r.isError, false, r.content);
  assert.equal(r.content, "red ok\nprogress 1\nprogress 2\na␀b␀␇\nexit code: 0");
});

void test("bash: binary output stays within the result bound with one note counting the bytes not shown", async (t) => {
  const dir = tempDir(t);
  // 60,000 bytes that are each invalid UTF-8: decoded, each is U+FFFD (three bytes), so the kept 50 KB would be 150 KB.
  const r = await call(bashTool, { command: "head -c 60000 /dev/zero | tr '\\0' '\\377'; printf '\\nend\\n'" }, makeCtx(dir));
  assert.equal(r.isError, false);
  assert.ok(Buffer.byteLength(r.content) <= MAX_RESULT_BYTES, `${Buffer.byteLength(r.content)} bytes`);
  const notes = r.content.match(/\[… \d+ bytes( of output)? omitted …\]/g) ?? [];
  assert.equal(notes.length, 1, `one note: ${notes.join(", ")}`);
  const shown = (r.content.match(/\uFFFD/g) ?? []).length;
  assert.equal(notes[0], `[… ${60_000 - shown} bytes of output omitted …]`);
  assert.ok(r.content.endsWith("\nend\nexit code: 0"));
});

void test("bash: a command reading stdin gets end-of-file at once", async (t) => {
  const dir = tempDir(t);
  const r = await call(bashTool, { command: "cat; read line; echo read=$?" }, makeCtx(dir));
  assert.equal(r.content, "read=1\nexit code: 0");
});

void test("bash: cancel, timeout and exit reach processes that started their own group (GNU timeout, set -m)", async (t) => {
  const dir = tempDir(t);
  const tool = createBashTool({ killGraceMs: 200 });
  // `timeout` moves itself and its command into a new process group of the same session.
  const command = "timeout 100 bash -c 'echo $$ > inner.pid; exec sleep 30' & echo $! > outer.pid; (set -m; sleep 31 & echo $! > jc.pid; wait) & wait";
  const pids = (): number[] => ["outer.pid", "inner.pid", "jc.pid"].map((f) => pidFrom(join(dir, f)));
  const started = (): boolean => ["outer.pid", "inner.pid", "jc.pid"].every((f) => existsSync(join(dir, f)) && readFileSync(join(dir, f), "utf8").endsWith("\n"));
  const ac = new AbortController();
  const running = call(tool, { command }, makeCtx(dir, ac.signal));
  assert.ok(await waitFor(started, 30_000));
  const [outer, inner, jc] = pids();
  assert.ok(isAlive(outer!) && isAlive(inner!) && isAlive(jc!));
  ac.abort();
  const r = await running;
  assert.equal(r.errorKind, "cancelled");
  assert.equal(r.content, "(no output)\n[cancelled; processes killed]");
  for (const pid of [outer!, inner!, jc!]) assert.ok(await waitFor(() => !isAlive(pid), 5000), `pid ${pid} is gone`);
  // A command that exits normally leaves none of them behind either.
  for (const f of ["outer.pid", "inner.pid", "jc.pid"]) await import("node:fs/promises").then((fs) => fs.rm(join(dir, f)));
  const done = await call(tool, { command: "timeout 100 bash -c 'echo $$ > inner.pid; exec sleep 30' > /dev/null & echo $! > outer.pid; until test -s inner.pid; do sleep 0.01; done; echo bg" }, makeCtx(dir));
  assert.equal(done.content, "bg\nexit code: 0");
  for (const f of ["outer.pid", "inner.pid"]) {
    const pid = pidFrom(join(dir, f));
    assert.ok(await waitFor(() => !isAlive(pid), 5000), `${f} ${pid} is gone`);
  }
});
