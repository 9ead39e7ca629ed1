/**
 * The workspace seam: with a workspace that owns files and commands, `read`, `edit`, `write` and `bash` go through
 * it (nothing touches this machine's files), with the same results the local tools give; without one, they stay
 * local.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bashTool, editTool, readTool, writeTool } from "../../src/runtime/tools/index.js";
import type { Tool, ToolContext } from "../../src/runtime/types.js";
import type { CommandRun, Workspace } from "../../src/runtime/workspace.js";

function memoryWorkspace(files: Map<string, string>, runs: CommandRun[]): Workspace {
  return {
    readTextFile: (path) => {
      const t = files.get(path);
      return t === undefined ? Promise.reject(new Error(`no buffer for ${path}`)) : Promise.resolve(t);
    },
    writeTextFile: (path, content) => {
      files.set(path, content);
      return Promise.resolve();
    },
    runCommand: (run) => {
      runs.push(run);
      if (run.command === "slow") return Promise.resolve({ output: "partial\n", end: { kind: "timeout" } });
      return Promise.resolve({ output: `ran ${run.command}\n`, end: { kind: "exit", code: run.command === "false" ? 1 : 0, signal: null } });
    },
  };
}

const run = (t: Tool, args: Record<string, unknown>, ctx: ToolContext) => t.run(args, ctx);

it("read, edit, write and bash go through the workspace when it has them", async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-ws-"));
  const files = new Map([[join(cwd, "a.txt"), "line one\nline two\n"]]);
  const runs: CommandRun[] = [];
  const ctx: ToolContext = { cwd, signal: new AbortController().signal, onProgress: () => undefined, callId: "c9", workspace: memoryWorkspace(files, runs) };

  assert.deepEqual(await run(readTool, { path: "a.txt", offset: 2 }, ctx), { content: "line two", isError: false });
  const missing = await run(readTool, { path: "nope.txt" }, ctx);
  assert.equal(missing.isError, true);
  assert.match(missing.content, /no buffer for/);

  assert.equal((await run(editTool, { path: "a.txt", old_string: "one", new_string: "1" }, ctx)).isError, false);
  assert.equal(files.get(join(cwd, "a.txt")), "line 1\nline two\n");
  assert.equal((await run(writeTool, { path: "sub/new.txt", content: "fresh" }, ctx)).isError, false);
  assert.equal(files.get(join(cwd, "sub", "new.txt")), "fresh");
  assert.equal(existsSync(join(cwd, "sub")), false, "nothing was written locally");

  assert.deepEqual(await run(bashTool, { command: "echo hi" }, ctx), { content: "ran echo hi\nexit code: 0", isError: false, timedOut: false });
  assert.equal(runs[0]!.callId, "c9");
  assert.equal(runs[0]!.cwd, cwd);
  const failed = await run(bashTool, { command: "false" }, ctx);
  assert.equal(failed.isError, true);
  assert.match(failed.content, /exit code: 1$/);
  const slow = await run(bashTool, { command: "slow", timeout: 2 }, ctx);
  assert.equal(slow.errorKind, "limit");
  assert.equal(slow.timedOut, true);
  assert.equal(runs[2]!.timeoutMs, 2000);
});

it("without a workspace the tools use this machine", async () => {
  const cwd = mkdtempSync(join(tmpdir(), "berth-ws-"));
  const ctx: ToolContext = { cwd, signal: new AbortController().signal, onProgress: () => undefined };
  assert.equal((await run(writeTool, { path: "x.txt", content: "local" }, ctx)).isError, false);
  assert.equal((await run(readTool, { path: "x.txt" }, ctx)).content, "local");
  assert.equal(existsSync(join(cwd, "x.txt")), true);
});
