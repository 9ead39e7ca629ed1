/**
 * Starts a Berth child process (`node <bin> ARGS`) the way the `bin/berth` launcher would: credential-like variables
 * of `env` are not put in the child's exec-time environment but handed over on its descriptor 3
 * (core/secret-names.ts, docs/security.md), so the child's tools cannot read them from `/proc/<pid>/environ`.
 * `stdio` gives descriptors 0–2; descriptor 3 is added (a pipe, written and closed at once) when there is anything
 * to hand over.
 */
import { spawn, type ChildProcess } from "node:child_process";
import type { Writable } from "node:stream";
import { credentialHandoff } from "../core/secret-names.js";

type Stdio = "pipe" | "ignore" | "inherit" | number;

export function spawnBerth(
  bin: string,
  args: string[],
  env: Readonly<Record<string, string | undefined>>,
  o: { stdio: [Stdio, Stdio, Stdio]; cwd?: string; detached?: boolean },
): ChildProcess {
  const { env: childEnv, handoff } = credentialHandoff(env);
  const child = spawn(process.execPath, [bin, ...args], {
    env: childEnv,
    ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
    ...(o.detached === true ? { detached: true } : {}),
    stdio: handoff === null ? o.stdio : [...o.stdio, "pipe"],
  });
  if (handoff !== null) {
    const fd3 = child.stdio[3] as Writable;
    fd3.on("error", () => {});
    fd3.end(handoff);
  }
  return child;
}
