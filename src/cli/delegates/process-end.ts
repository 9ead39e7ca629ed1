/**
 * When a delegated agent's process counts as ended: when it exits, not when every holder of its pipes lets go.
 * Shared by the CLI agents (cli-agents.ts) and the nested Berth (agent-berth.ts).
 *
 * Why: "close" waits for every process holding the child's stdout or stderr. A helper the agent started (an MCP
 * server, a tool's background process, a `setsid` escapee without the `SCV_PARENT` tag) can hold them for as long as
 * it lives, which kept a call whose agent had finished running to its time limit, or for ever, and the session's
 * close with it. Once the agent itself is gone, what it wrote is read for `STDOUT_DRAIN_MS` and the pipes are let go;
 * the caller then stops what is left of its run (records.ts `stopRun`).
 *
 * The pipes are let go in a check phase: a drain timer that fired late (a busy loop) runs before that turn's poll
 * phase, which still reads what the agent wrote last (at most a pipe buffer, already in the kernel).
 */
import type { ChildProcess } from "node:child_process";

/** How long an exited agent's pipes are still read when another process holds them open. */
export const STDOUT_DRAIN_MS = 500;

/**
 * Resolves with the child's exit code once it has ended: at "close" (nobody else held its pipes), or
 * `STDOUT_DRAIN_MS` after its exit, its pipes then destroyed; with null when it could not be started.
 */
export function processEnded(child: ChildProcess): Promise<number | null> {
  return new Promise<number | null>((resolve) => {
    child.once("close", (code) => resolve(code));
    child.once("error", () => resolve(null));
    child.once("exit", (code) => {
      setTimeout(() => {
        setImmediate(() => {
          child.stdout?.destroy();
          child.stderr?.destroy();
          resolve(code);
        });
      }, STDOUT_DRAIN_MS);
    });
  });
}
