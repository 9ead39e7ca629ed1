/** Runs an inline ESM script in a child Node process (multi-process store tests); rejects with its stderr on failure. */
import { spawn } from "node:child_process";

export function runChild(script: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script, ...args], { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`child exited ${code}: ${err.slice(0, 500)}`))));
  });
}

/** True while `pid` names a process (a zombie not yet reaped included); signal 0 only checks, it sends nothing. */
export function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
