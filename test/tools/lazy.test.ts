/**
 * Tool stand-ins (src/runtime/tools/lazy.ts) under the conditions a first call can meet: the tool's code fails to
 * load, several first calls arrive at once, the call is cancelled while the code loads. Each call must end exactly
 * once with the right status; the real `write` tool is the implementation, loaded through a load function the test
 * controls (a real failing `import()` for the failure case).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lazyTool } from "../../src/runtime/tools/lazy.js";
import { WRITE_DEF } from "../../src/runtime/tools/specs.js";
import { writeTool } from "../../src/runtime/tools/write.js";
import type { Tool, ToolContext } from "../../src/runtime/types.js";

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
const ctxFor = (cwd: string, signal = new AbortController().signal): ToolContext => ({ cwd, signal, onProgress: () => undefined });

void test("lazy tool: concurrent first calls share one load and each ends once", async () => {
  const dir = mkdtempSync(join(tmpdir(), "lazy-"));
  let loads = 0;
  const gate = deferred<Tool>();
  const tool = lazyTool(WRITE_DEF, () => {
    loads++;
    return gate.promise;
  });
  const calls = [0, 1, 2].map((i) => tool.run({ path: `f${i}.txt`, content: `c${i}` }, ctxFor(dir)));
  gate.resolve(writeTool);
  const results = await Promise.all(calls);
  assert.equal(loads, 1, "one load for the concurrent first calls");
  for (const [i, r] of results.entries()) {
    assert.equal(r.isError, false, r.content);
    assert.equal(readFileSync(join(dir, `f${i}.txt`), "utf8"), `c${i}`);
  }
});

void test("lazy tool: code that fails to load fails each waiting call once, naming the cause; the next call retries", async () => {
  const dir = mkdtempSync(join(tmpdir(), "lazy-"));
  let loads = 0;
  let broken = true;
  const tool = lazyTool(WRITE_DEF, async () => {
    loads++;
    if (broken) return ((await import(join(dir, "missing-module.js"))) as { writeTool: Tool }).writeTool;
    return writeTool;
  });
  const results = await Promise.all([tool.run({ path: "a.txt", content: "x" }, ctxFor(dir)), tool.run({ path: "b.txt", content: "y" }, ctxFor(dir))]);
  assert.equal(loads, 1);
  for (const r of results) {
    assert.equal(r.isError, true);
    assert.equal(r.errorKind, "failed");
    assert.match(r.content, /^write: the tool could not be loaded \(.*missing-module\.js/);
  }
  assert.equal(existsSync(join(dir, "a.txt")), false);
  broken = false;
  const again = await tool.run({ path: "a.txt", content: "x" }, ctxFor(dir));
  assert.equal(again.isError, false, again.content);
  assert.equal(loads, 2, "the failed load is retried by the next call");
});

void test("lazy tool: a call cancelled while its code loads ends cancelled at once and never runs", { timeout: 20_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "lazy-"));
  const gate = deferred<Tool>();
  let loads = 0;
  const tool = lazyTool(WRITE_DEF, () => {
    loads++;
    return gate.promise;
  });
  const ac = new AbortController();
  const pending = tool.run({ path: "late.txt", content: "x" }, ctxFor(dir, ac.signal));
  ac.abort();
  // The code has not loaded (the gate is closed): the cancelled call must still end now.
  const r = await pending;
  assert.equal(r.isError, true);
  assert.equal(r.errorKind, "cancelled");
  assert.match(r.content, /^write: cancelled/);
  gate.resolve(writeTool);
  // The load went on: a later call uses it, and the cancelled call never wrote.
  const next = await tool.run({ path: "next.txt", content: "y" }, ctxFor(dir));
  assert.equal(next.isError, false, next.content);
  assert.equal(loads, 1);
  assert.equal(existsSync(join(dir, "late.txt")), false, "the cancelled call did not run");
  // Already cancelled before the call: cancelled, nothing loaded or run.
  const fresh = lazyTool(WRITE_DEF, () => {
    loads++;
    return Promise.resolve(writeTool);
  });
  const pre = await fresh.run({ path: "pre.txt", content: "z" }, ctxFor(dir, AbortSignal.abort()));
  assert.equal(pre.errorKind, "cancelled");
  assert.equal(loads, 1);
  assert.equal(existsSync(join(dir, "pre.txt")), false);
});
