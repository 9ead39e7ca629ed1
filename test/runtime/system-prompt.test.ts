/**
 * The system prompt's instruction files: a non-regular AGENTS.md (a FIFO nobody writes) is skipped without
 * blocking, and the regular CLAUDE.md beside it is still included.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildSystemPrompt } from "../../src/runtime/system-prompt.js";

test("an AGENTS.md that is a FIFO is skipped without blocking; CLAUDE.md still counts", { timeout: 30_000 }, async (t) => {
  // More workspaces than the libuv pool has threads: a blocking open of each FIFO would park every thread.
  const dirs = Array.from({ length: 6 }, () => mkdtempSync(join(tmpdir(), "sp-fifo-")));
  t.after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  for (const d of dirs) {
    execFileSync("mkfifo", [join(d, "AGENTS.md")]);
    writeFileSync(join(d, "CLAUDE.md"), "Use tabs.\n");
  }
  const prompts = await Promise.all(dirs.map((cwd) => buildSystemPrompt({ cwd, now: new Date(0), tools: [] })));
  for (const p of prompts) {
    assert.match(p, /Project instructions \(CLAUDE\.md\):\nUse tabs\./);
    assert.doesNotMatch(p, /AGENTS\.md/);
  }
});
