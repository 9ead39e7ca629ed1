/**
 * The opt-in OS sandbox for `bash` (tool policy `sandbox: "bubblewrap"`). Contract of the sandbox a command gets:
 * - the whole filesystem read-only, the session's workspace and the extra allowed directories read-write, a private
 *   empty `/tmp`, a fresh `/dev` and a `/proc` of its own PID namespace (`--unshare-pid`: no Berth process, and so no
 *   Berth `/proc/<pid>/environ`, is visible);
 * - Berth's state root and the home's secrets directories (~/.ssh, ~/.gnupg, ~/.aws) hidden under empty tmpfs;
 * - the network is NOT isolated (package installs and test servers keep working);
 * - `--die-with-parent`: the sandbox ends with the service. The sandbox stays in the call's session and process group, so the
 *   bash tool's session kill reaches every process inside it.
 * When the policy asks for the sandbox and `bwrap` is not on PATH, the call fails with `unavailable` and says how
 * to install it or turn the sandbox off.
 */
import { accessSync, constants as FS, existsSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { SECRET_HOME_DIRS } from "./confine.js";

let cached: { path: string | null; forPath: string | undefined } | null = null;

/** Absolute path of `bwrap` on PATH, or null. */
export function findBwrap(pathVar: string | undefined = process.env["PATH"]): string | null {
  if (cached !== null && cached.forPath === pathVar) return cached.path;
  let found: string | null = null;
  for (const dir of (pathVar ?? "").split(delimiter)) {
    if (dir === "") continue;
    const p = join(dir, "bwrap");
    try {
      accessSync(p, FS.X_OK);
      found = p;
      break;
    } catch {
      /* next */
    }
  }
  cached = { path: found, forPath: pathVar };
  return found;
}

export const SANDBOX_MISSING =
  'bash: the bash sandbox is enabled (settings tools.sandbox: "bubblewrap") but bubblewrap is not installed; install it (Debian/Ubuntu: apt-get install bubblewrap) or set tools.sandbox to "none"';

export interface SandboxLayout {
  /** Working directory of the command (inside `writable[0]` normally). */
  cwd: string;
  /** Read-write directories (canonical). */
  writable: readonly string[];
  /** Directories hidden under an empty tmpfs (canonical): Berth's state root. */
  hidden: readonly string[];
}

/** bwrap arguments up to and including `--`; append the command (`bash -c …`). */
export function bwrapArgs(l: SandboxLayout): string[] {
  const args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"];
  for (const w of l.writable) if (existsSync(w)) args.push("--bind", w, w);
  const home = homedir();
  const hidden = [...l.hidden, ...SECRET_HOME_DIRS.map((d) => join(home, d))];
  for (const h of hidden) if (existsSync(h)) args.push("--tmpfs", h);
  args.push("--unshare-pid", "--die-with-parent", "--chdir", l.cwd, "--");
  return args;
}
