/**
 * Spawns `berth service` as a child process and attaches a client to its stdio.
 * Contract: the child's stderr (I/O diagnostics only) is kept as a bounded tail, never echoed; `close()` ends the
 * child's stdin (it cancels active work and exits) and waits for exit, killing it after `graceMs`.
 * Credential-like variables of `env` are not put in the child's exec-time environment: they are handed over on its
 * descriptor 3 (the launcher handoff, core/secret-names.ts), so the service's tools cannot read them from /proc.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Writable } from "node:stream";
import { credentialHandoff } from "../../core/secret-names.js";
import { AppServiceClient, type ClientOptions } from "./client.js";

export interface SpawnOptions extends Omit<ClientOptions, "input" | "output"> {
  /** Path of the `berth` launcher (default: this package's bin/berth). */
  bin?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  graceMs?: number;
}

export interface ServiceHandle {
  client: AppServiceClient;
  child: ChildProcessWithoutNullStreams;
  /** Last few KiB of the service's stderr. */
  stderrTail(): string;
  close(): Promise<void>;
}

export const DEFAULT_BIN = fileURLToPath(new URL("../../../../bin/berth", import.meta.url));

export function spawnService(opts: SpawnOptions = {}): ServiceHandle {
  const { env, handoff } = credentialHandoff(opts.env ?? process.env);
  const child = spawn(process.execPath, [opts.bin ?? DEFAULT_BIN, "service"], {
    env,
    cwd: opts.cwd ?? process.cwd(),
    stdio: handoff === null ? ["pipe", "pipe", "pipe"] : ["pipe", "pipe", "pipe", "pipe"],
  });
  if (handoff !== null) {
    const fd3 = child.stdio[3] as Writable;
    fd3.on("error", () => {});
    fd3.end(handoff);
  }
  let tail = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => {
    tail = (tail + d).slice(-4096);
  });
  child.stdin.on("error", () => {});
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("close", () => resolve());
  });
  const client = new AppServiceClient({ ...opts, input: child.stdout, output: child.stdin });
  return {
    client,
    child,
    stderrTail: () => tail,
    async close() {
      if (!child.stdin.writableEnded) child.stdin.end();
      const t = setTimeout(() => child.kill("SIGKILL"), opts.graceMs ?? 5000);
      try {
        await exited;
      } finally {
        clearTimeout(t);
      }
    },
  };
}
