/** Shared helpers for the tools tests: temp trees, a ToolContext, and process liveness checks. */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Tool, ToolContext, ToolResult } from "../../src/runtime/types.js";

export function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), "berth-tools-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export interface TestCtx extends ToolContext {
  progress: string[];
}

export function makeCtx(cwd: string, signal: AbortSignal = new AbortController().signal): TestCtx {
  const progress: string[] = [];
  return { cwd, signal, progress, onProgress: (l) => progress.push(l) };
}

/** Validates then runs, as the turn loop does; a validation failure becomes `invalid_arguments`. */
export async function call(tool: Tool, args: unknown, ctx: ToolContext): Promise<ToolResult> {
  const v = tool.validate(args);
  if (!v.ok) return { content: v.message, isError: true, errorKind: "invalid_arguments" };
  return tool.run(v.value, ctx);
}

/** True while `pid` exists and is not a zombie (PID 1 here may not reap orphans). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/** Polls `cond` until true or `ms` elapse (for process death, which the kernel finishes asynchronously). */
export async function waitFor(cond: () => boolean, ms = 30_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return cond();
}
