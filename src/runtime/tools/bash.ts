/**
 * `bash`: runs `bash -c <command>` in `ctx.cwd`, in its own session and process group. Contract:
 * - stdin is /dev/null; stdout and stderr are captured merged, in arrival order, keeping the first
 *   `headBytes` and the last `tailBytes` (memory stays bounded however much is printed); the
 *   result says how many bytes were omitted between them. The output is made plain text first (bash-output.ts:
 *   escape sequences removed, control characters shown as control pictures) and the bounds hold for that text.
 * - On timeout or `ctx.signal` abort the WHOLE session gets SIGTERM, then SIGKILL after `killGraceMs`: its group
 *   and every process group started inside it (GNU `timeout`, `set -m`; kill-session.ts). When the call ends for any
 *   reason, whatever is left of the session is terminated the same way, so background jobs (`cmd &`) do not outlive
 *   the call; a process that wants to survive must leave the session itself (`setsid`). A process exit while the
 *   call runs (e.g. a door's "second signal exits at once") SIGKILLs the session as it exits: its SIGTERM grace dies
 *   with the process.
 * - Result: output plus an `exit code: N` line; non-zero exit → `failed`; timeout → `limit` with
 *   `timedOut: true`; abort → `cancelled`. `timedOut` is always set (true/false).
 * - With the tool policy's `sandbox: "bubblewrap"` the command runs inside bubblewrap (sandbox.ts); a missing
 *   `bwrap` is an `unavailable` result, never a silent fallback to running unsandboxed.
 */
import { stat } from "node:fs/promises";
import type { Tool, ToolResult } from "../types.js";
import type { CommandOutcome } from "../workspace.js";
import { cleanOutput } from "../../core/terminal-text.js";
import { HeadTailCapture } from "./bash-output.js";
import { canonical, policyOf } from "./confine.js";
import { defineLocalTool } from "./define.js";
import { killSession } from "./kill-session.js";
import { fail, MAX_RESULT_BYTES } from "./result.js";
import { bwrapArgs, findBwrap, SANDBOX_MISSING } from "./sandbox.js";
import { BASH_DEFAULT_TIMEOUT_MS, BASH_MAX_TIMEOUT_MS, bashDef } from "./specs.js";

export interface BashOptions {
  /** Default timeout when the call gives none. Default 120 s. */
  defaultTimeoutMs?: number;
  /** Largest timeout a call may ask for. Default 600 s. */
  maxTimeoutMs?: number;
  /** SIGTERM → SIGKILL grace. Default 2 s. */
  killGraceMs?: number;
  /** Environment for the shell. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Kept output bytes from the start / end. Defaults keep the result under MAX_RESULT_BYTES. */
  headBytes?: number;
  tailBytes?: number;
}

export { BASH_DEFAULT_TIMEOUT_MS, BASH_MAX_TIMEOUT_MS };
export { HeadTailCapture };
export const BASH_KILL_GRACE_MS = 2000;

/** The sessions of commands still running in this process (their leaders' PIDs). */
const running = new Set<number>();
let exitHooked = false;

/** Tracks a command's session until its call ends; a process exit before that (a second signal) SIGKILLs it. */
function trackGroup(pid: number): () => void {
  if (!exitHooked) {
    exitHooked = true;
    process.on("exit", () => {
      for (const g of running) killSession(g, "SIGKILL");
    });
  }
  running.add(pid);
  return () => void running.delete(pid);
}

export function createBashTool(opts: BashOptions = {}): Tool {
  const defaultTimeoutMs = opts.defaultTimeoutMs ?? BASH_DEFAULT_TIMEOUT_MS;
  const maxTimeoutMs = opts.maxTimeoutMs ?? BASH_MAX_TIMEOUT_MS;
  const graceMs = opts.killGraceMs ?? BASH_KILL_GRACE_MS;
  const headMax = opts.headBytes ?? Math.floor((MAX_RESULT_BYTES - 1024) * 0.4);
  const tailMax = opts.tailBytes ?? Math.floor((MAX_RESULT_BYTES - 1024) * 0.6);

  return defineLocalTool({
    ...bashDef(defaultTimeoutMs, maxTimeoutMs),
    async execute(args, ctx) {
      try {
        if (!(await stat(ctx.cwd)).isDirectory()) return fail("failed", "bash: working directory is not a directory");
      } catch {
        return fail("failed", "bash: working directory does not exist");
      }
      const timeoutMs = args.timeout !== undefined ? Math.round(args.timeout * 1000) : defaultTimeoutMs;
      const policy = policyOf(ctx);
      const ws = ctx.workspace;
      if (ws?.runCommand && policy.sandbox !== "bubblewrap") {
        // The workspace's terminal (e.g. the editor's): it runs, bounds and kills the command itself. A sandboxed
        // policy keeps commands local, inside bubblewrap (docs/security.md).
        ctx.onProgress("running");
        const done = await ws.runCommand({
          callId: ctx.callId ?? "",
          command: args.command,
          cwd: ctx.cwd,
          timeoutMs,
          outputByteLimit: headMax + tailMax,
          signal: ctx.signal,
        });
        return commandResult(cleanOutput(done.output), done.end, timeoutMs, ctx.onProgress, "command");
      }
      let wrap: string[] | null = null;
      if (policy.sandbox === "bubblewrap") {
        const bwrap = findBwrap();
        if (bwrap === null) return fail("unavailable", SANDBOX_MISSING, { timedOut: false });
        const cwd = await canonical(ctx.cwd);
        const writable = [cwd, ...(await Promise.all(policy.files.extraRoots.map((r) => canonical(r))))];
        const hidden = await Promise.all(policy.files.protectedRoots.map((r) => canonical(r)));
        wrap = [bwrap, ...bwrapArgs({ cwd, writable, hidden })];
      }
      return runBash(args.command, ctx.cwd, ctx.signal, ctx.onProgress, { timeoutMs, graceMs, headMax, tailMax, env: opts.env ?? process.env, wrap });
    },
  });
}

interface RunOpts {
  timeoutMs: number;
  graceMs: number;
  headMax: number;
  tailMax: number;
  env: NodeJS.ProcessEnv;
  /** Sandbox launcher and its arguments (`bash -c command` is appended), or null to run bash directly. */
  wrap: string[] | null;
}

/** node:child_process loads on the first command (a first turn that runs none never pays for it). */
async function runBash(command: string, cwd: string, signal: AbortSignal, onProgress: (l: string) => void, o: RunOpts): Promise<ToolResult> {
  const { spawn } = await import("node:child_process");
  return new Promise((resolve) => {
    const capture = new HeadTailCapture(o.headMax, o.tailMax);
    const [file, argv] = o.wrap === null ? ["bash", ["-c", command]] : [o.wrap[0] as string, [...o.wrap.slice(1), "bash", "-c", command]];
    const child = spawn(file, argv, { cwd, env: o.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const untrack = child.pid !== undefined ? trackGroup(child.pid) : () => undefined;
    let stopReason: "timeout" | "cancelled" | null = null;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let killTimer: NodeJS.Timeout | undefined;
    let closeGuard: NodeJS.Timeout | undefined;
    let settled = false;

    /** SIGTERM to the session now, SIGKILL after the grace period (once). */
    const terminateGroup = (): void => {
      if (child.pid === undefined || killTimer !== undefined) return;
      const pid = child.pid;
      killSession(pid, "SIGTERM");
      killTimer = setTimeout(() => killSession(pid, "SIGKILL"), o.graceMs);
    };
    const stop = (reason: "timeout" | "cancelled"): void => {
      if (stopReason !== null || exit !== null) return;
      stopReason = reason;
      onProgress(reason === "timeout" ? "timed out" : "cancelling");
      terminateGroup();
    };
    const onAbort = (): void => stop("cancelled");
    const timer = setTimeout(() => stop("timeout"), o.timeoutMs);
    signal.addEventListener("abort", onAbort, { once: true });

    const finish = (result: ToolResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(killTimer);
      clearTimeout(closeGuard);
      signal.removeEventListener("abort", onAbort);
      // Nothing of the session outlives the call, even a member that ignored SIGTERM.
      if (child.pid !== undefined) killSession(child.pid, "SIGKILL");
      untrack();
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve(result);
    };

    child.stdout?.on("data", (c: Buffer) => capture.push(c));
    child.stderr?.on("data", (c: Buffer) => capture.push(c));
    child.on("error", (err) => finish(fail("failed", `bash: could not start: ${err.message}`, { timedOut: false })));
    child.on("exit", (code, sig) => {
      exit = { code, signal: sig };
      // Stop stragglers in the session; their open pipes would otherwise hold `close` back.
      terminateGroup();
      closeGuard = setTimeout(() => finish(result()), o.graceMs + 500);
    });
    child.on("close", () => finish(result()));
    if (signal.aborted) stop("cancelled");
    else onProgress("running");

    function result(): ToolResult {
      const end: CommandOutcome["end"] = stopReason !== null ? { kind: stopReason } : { kind: "exit", code: exit?.code ?? null, signal: exit?.signal ?? null };
      return commandResult(capture.text(), end, o.timeoutMs, onProgress, "processes");
    }
  });
}

/** The model's view of a finished command, the same wherever it ran (`killed` names what was killed). */
function commandResult(raw: string, end: CommandOutcome["end"], timeoutMs: number, onProgress: (l: string) => void, killed: string): ToolResult {
  let out = raw;
  if (out.length === 0) out = "(no output)";
  else if (out.endsWith("\n")) out = out.slice(0, -1);
  if (end.kind === "timeout") return fail("limit", `${out}\n[timed out after ${timeoutMs / 1000} s; ${killed} killed]`, { timedOut: true });
  if (end.kind === "cancelled") return fail("cancelled", `${out}\n[cancelled; ${killed} killed]`, { timedOut: false });
  const code = end.code;
  if (code === 0) {
    onProgress("exit 0");
    return { content: `${out}\nexit code: 0`, isError: false, timedOut: false };
  }
  const how = code !== null ? `exit code: ${code}` : `killed by signal ${end.signal ?? "unknown"}`;
  onProgress(code !== null ? `exit ${code}` : "killed");
  return fail("failed", `${out}\n${how}`, { timedOut: false });
}

export const bashTool: Tool = createBashTool();
