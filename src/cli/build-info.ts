/**
 * `berth build-info`: prints `{"version": …, "commit": …}` as one JSON line — what `restart_when_idle` asks the
 * release installed at the daemon's executable path. `commit` is the short Git commit of the package checkout, or
 * null when the installed package carries no Git metadata.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { packageVersion } from "./process-io.js";

function commit(): string | null {
  try {
    const root = fileURLToPath(new URL("../../../", import.meta.url));
    const out = execFileSync("git", ["rev-parse", "--short=7", "HEAD"], { cwd: root, stdio: ["ignore", "pipe", "ignore"], timeout: 5000 });
    const c = out.toString().trim();
    return /^[0-9a-f]{7,40}$/.test(c) ? c : null;
  } catch {
    return null;
  }
}

export function runBuildInfo(argv: string[]): number {
  if (argv.length > 0) {
    process.stderr.write("berth build-info: takes no arguments\n");
    return 2;
  }
  process.stdout.write(JSON.stringify({ version: packageVersion(), commit: commit() }) + "\n");
  return 0;
}
