/**
 * Issue 18, tool findings: file tools refuse non-regular files without blocking the thread pool, and are confined
 * to the workspace by default (../, absolute paths, symlinks, ~/.ssh, Berth's state root); the bash sandbox.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync, existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";
import { test } from "node:test";
import { DEFAULT_TOOL_POLICY, type ToolPolicy } from "../../src/runtime/tools/confine.js";
import { createBashTool } from "../../src/runtime/tools/bash.js";
import { editTool } from "../../src/runtime/tools/edit.js";
import { globTool } from "../../src/runtime/tools/glob.js";
import { grepTool } from "../../src/runtime/tools/grep.js";
import { lsTool } from "../../src/runtime/tools/ls.js";
import { toolPolicyFromSettings } from "../../src/runtime/tools/policy.js";
import { readTool } from "../../src/runtime/tools/read.js";
import { findBwrap } from "../../src/runtime/tools/sandbox.js";
import { writeTool } from "../../src/runtime/tools/write.js";
import type { ToolContext } from "../../src/runtime/types.js";
import { call, makeCtx, tempDir } from "./helpers.js";

function withPolicy(ctx: ToolContext, policy: ToolPolicy): ToolContext {
  return { ...ctx, policy } as ToolContext;
}

const unrestricted = (protectedRoots: string[] = []): ToolPolicy => ({ files: { confine: false, extraRoots: [], protectedRoots }, sandbox: "none" });

test("read of a FIFO blocks the thread pool (issue 18): FIFOs are refused and the pool stays free", { timeout: 30_000 }, async (t) => {
  const dir = tempDir(t);
  // More FIFO reads than the libuv pool has threads (4 by default): before the fix these never settled and every
  // later file operation of the process waited behind them.
  const fifos = Array.from({ length: 8 }, (_, i) => join(dir, `p${i}`));
  for (const f of fifos) execFileSync("mkfifo", [f]);
  const ctx = makeCtx(dir);
  const results = await Promise.all([
    ...fifos.map((f, i) => call(readTool, { path: i % 2 === 0 ? f : `p${i}` }, ctx)),
    call(editTool, { path: "p0", old_string: "a", new_string: "b" }, ctx),
    call(writeTool, { path: "p1", content: "x" }, ctx),
    call(grepTool, { pattern: "x", path: "p2" }, ctx),
  ]);
  for (const r of results) {
    assert.equal(r.isError, true);
    assert.match(r.content, /is a FIFO; only regular files can be used|is not a directory or a regular file/);
  }
  // A symlink to a FIFO inside the workspace is refused the same way, and grep over the directory skips them.
  symlinkSync(fifos[0]!, join(dir, "link"));
  const viaLink = await call(readTool, { path: "link" }, ctx);
  assert.match(viaLink.content, /is a FIFO/);
  writeFileSync(join(dir, "real.txt"), "needle\n");
  const g = await call(grepTool, { pattern: "needle" }, ctx);
  assert.equal(g.isError, false);
  assert.match(g.content, /^real\.txt:1: needle$/m);
  // The pool is free: an ordinary file read still completes.
  assert.equal(await readFile(join(dir, "real.txt"), "utf8"), "needle\n");
});

test("read of a socket or a device (issue 18): refused before opening, even when file access is unrestricted", async (t) => {
  const dir = tempDir(t);
  const sock = join(dir, "s.sock");
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(sock, resolve));
  t.after(() => server.close());
  const ctx = withPolicy(makeCtx(dir), unrestricted());
  assert.match((await call(readTool, { path: "s.sock" }, ctx)).content, /is a socket; only regular files/);
  assert.match((await call(readTool, { path: "/dev/zero" }, ctx)).content, /is a device; only regular files/);
  assert.match((await call(writeTool, { path: "/dev/null", content: "x" }, ctx)).content, /is a device/);
  assert.match((await call(editTool, { path: "/dev/zero", old_string: "a", new_string: "b" }, ctx)).content, /is a device/);
});

test("file tools reach anywhere without approvals (issue 18): confined to the workspace by default", async (t) => {
  const root = tempDir(t);
  const ws = join(root, "ws");
  const outside = join(root, "outside");
  mkdirSync(ws);
  mkdirSync(outside);
  writeFileSync(join(outside, "secret.txt"), "top secret\n");
  writeFileSync(join(ws, "ok.txt"), "fine\n");
  symlinkSync(join(outside, "secret.txt"), join(ws, "escape.txt"));
  symlinkSync(outside, join(ws, "escape-dir"));
  const ctx = makeCtx(ws);
  const denied = async (p: Promise<{ isError: boolean; errorKind?: string; content: string }>, re: RegExp): Promise<void> => {
    const r = await p;
    assert.equal(r.isError, true, r.content);
    assert.equal(r.errorKind, "denied", r.content);
    assert.match(r.content, re);
    assert.doesNotMatch(r.content, /top secret/);
  };
  const outsideMsg = /outside the session's workspace; file tools may only use the workspace and the directories listed in settings/;
  await denied(call(readTool, { path: "../outside/secret.txt" }, ctx), outsideMsg);
  await denied(call(readTool, { path: join(outside, "secret.txt") }, ctx), outsideMsg);
  await denied(call(readTool, { path: "/etc/passwd" }, ctx), outsideMsg);
  await denied(call(readTool, { path: "escape.txt" }, ctx), outsideMsg);
  await denied(call(readTool, { path: "escape-dir/secret.txt" }, ctx), outsideMsg);
  await denied(call(writeTool, { path: "../outside/new.txt", content: "x" }, ctx), outsideMsg);
  await denied(call(writeTool, { path: "escape-dir/new.txt", content: "x" }, ctx), outsideMsg);
  await denied(call(editTool, { path: "escape.txt", old_string: "top", new_string: "no" }, ctx), outsideMsg);
  await denied(call(lsTool, { path: ".." }, ctx), outsideMsg);
  await denied(call(grepTool, { pattern: "secret", path: "../outside" }, ctx), outsideMsg);
  await denied(call(globTool, { pattern: "*", path: "escape-dir" }, ctx), outsideMsg);
  assert.equal(existsSync(join(outside, "new.txt")), false);
  assert.equal(readFileSync(join(outside, "secret.txt"), "utf8"), "top secret\n");
  // grep over the workspace does not follow a symlink out of it.
  const g = await call(grepTool, { pattern: "secret|fine" }, ctx);
  assert.equal(g.content, "ok.txt:1: fine");
  // Inside the workspace everything works, including new nested files.
  assert.equal((await call(writeTool, { path: "sub/new.txt", content: "hello" }, ctx)).isError, false);
  assert.equal((await call(readTool, { path: join(ws, "sub/new.txt") }, ctx)).content, "hello");
  // Directories listed in settings are allowed too.
  const withExtra = withPolicy(ctx, toolPolicyFromSettings({ allowed_dirs: [outside] }, join(root, "state")));
  assert.equal((await call(readTool, { path: join(outside, "secret.txt") }, withExtra)).content, "top secret");
});

test("~/.ssh is readable by the model (issue 18): secrets directories of the home are refused even inside the workspace", async (t) => {
  const home = tempDir(t);
  mkdirSync(join(home, ".ssh"));
  writeFileSync(join(home, ".ssh", "id_ed25519"), "PRIVATE KEY\n");
  const saved = process.env.HOME;
  process.env.HOME = home;
  t.after(() => (saved === undefined ? delete process.env.HOME : (process.env.HOME = saved)));
  const ctx = makeCtx(home); // the workspace is the home itself
  for (const p of ["~/.ssh/id_ed25519", ".ssh/id_ed25519", join(home, ".ssh", "id_ed25519")]) {
    const r = await call(readTool, { path: p }, ctx);
    assert.equal(r.errorKind, "denied");
    assert.match(r.content, /secrets directories of the home \(~\/\.ssh, ~\/\.gnupg, ~\/\.aws\) are not accessible to tools/);
  }
  const g = await call(grepTool, { pattern: "PRIVATE" }, ctx);
  assert.doesNotMatch(g.content, /PRIVATE KEY/);
});

test("tools can write Berth's state root (issue 18): never writable, even with unrestricted file access", async (t) => {
  const root = tempDir(t);
  const state = join(root, "state");
  mkdirSync(state);
  writeFileSync(join(state, "settings.json"), "{}\n");
  const ctx = withPolicy(makeCtx(root), unrestricted([state]));
  const w = await call(writeTool, { path: join(state, "settings.json"), content: '{"mcp_servers":{}}' }, ctx);
  assert.equal(w.errorKind, "denied");
  assert.match(w.content, /Berth's state directory is never writable by tools/);
  const e = await call(editTool, { path: "state/settings.json", old_string: "{}", new_string: "[]" }, ctx);
  assert.equal(e.errorKind, "denied");
  assert.equal(readFileSync(join(state, "settings.json"), "utf8"), "{}\n");
  // Confined (the default built from settings), it is not even readable.
  const confined = withPolicy(makeCtx(root), toolPolicyFromSettings(undefined, state));
  const r = await call(readTool, { path: "state/settings.json" }, confined);
  assert.match(r.content, /Berth's state directory is not readable by tools/);
});

test("the bash sandbox is enabled but bubblewrap is missing: a clear unavailable error, nothing runs", async (t) => {
  const dir = tempDir(t);
  const saved = process.env.PATH;
  process.env.PATH = join(dir, "empty-bin");
  t.after(() => (process.env.PATH = saved));
  const bash = createBashTool({ env: { PATH: saved ?? "" } });
  const r = await call(bash, { command: "touch ran" }, withPolicy(makeCtx(dir), { ...DEFAULT_TOOL_POLICY, sandbox: "bubblewrap" }));
  assert.equal(r.errorKind, "unavailable");
  assert.match(r.content, /bubblewrap is not installed; install it \(Debian\/Ubuntu: apt-get install bubblewrap\) or set tools.sandbox to "none"/);
  assert.equal(existsSync(join(dir, "ran")), false);
});

test("the bash sandbox (bubblewrap): workspace writable, the rest read-only, state root hidden, own PID namespace", async (t) => {
  if (findBwrap() === null) {
    t.skip("bubblewrap (bwrap) is not installed: apt-get install bubblewrap to run this test");
    return;
  }
  const root = tempDir(t);
  const ws = join(root, "ws");
  const state = join(root, "state");
  mkdirSync(ws);
  mkdirSync(state);
  writeFileSync(join(state, "auth.json"), "OAUTH-SECRET\n");
  const bash = createBashTool({ env: { PATH: process.env.PATH ?? "" } });
  const ctx = withPolicy(makeCtx(ws), toolPolicyFromSettings({ sandbox: "bubblewrap" }, state));
  const r = await call(
    bash,
    {
      command: [
        "echo inside > in.txt && echo wrote-inside",
        `(echo x > /usr/local/berth-sandbox-escape) 2>/dev/null || echo outside-refused`,
        `echo x > ${root}/escaped.txt`,
        `(cat ${state}/auth.json) 2>/dev/null || echo state-hidden`,
        `test -e /proc/${process.pid}/environ && echo parent-visible || echo parent-invisible`,
      ].join("; "),
    },
    ctx,
  );
  assert.equal(r.isError, false, r.content);
  assert.match(r.content, /wrote-inside/);
  assert.match(r.content, /outside-refused/);
  assert.match(r.content, /state-hidden/);
  assert.doesNotMatch(r.content, /OAUTH-SECRET/);
  assert.match(r.content, /parent-invisible/);
  assert.equal(readFileSync(join(ws, "in.txt"), "utf8"), "inside\n");
  // /tmp is private to the sandbox: a write there never reaches the host.
  assert.equal(existsSync(join(root, "escaped.txt")), false);
  assert.equal(existsSync("/usr/local/berth-sandbox-escape"), false);
});
