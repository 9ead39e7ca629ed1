/**
 * The state root's trust check, shared by every door (app-service, chat, daemon, and the SCV door `berth stdio`).
 * Berth runs what the state root's `settings.json` says (MCP servers) and keeps credentials there, so a root that
 * another user owns or may write is refused. Contracts:
 * - `checkStateRoot(path)`: the directory (symlinks followed) must exist, be a directory, be owned by the current
 *   user, and not be writable by group or others. Returns null when trusted, else one sentence naming the problem
 *   and the fix (`chmod 700 …`, or another `MC_HOME`). Never throws; never changes anything.
 * - `prepareStateRoot(path, base?)`: creates a missing root (mode 0700, parents as needed), then checks it. With
 *   `base` (the user's home directory, for the default `~/.berth`), a missing root is created only when `base` is
 *   an existing directory: a HOME naming nothing is reported (set HOME or MC_HOME), never created. A root that
 *   exists is never chmodded: loosening or tightening someone's directory silently is the user's call.
 * - `prepareHome(env)`: the state root every door uses (`resolveHome`), prepared as above with the home directory
 *   as `base` when it is the default one.
 * - A root below something that is not a directory (`MC_HOME=/tmp/somefile/home`: ENOTDIR) is named by that
 *   component, the nearest existing one (`notADirectoryIn`), with the fix, never as a bare error code.
 * On a platform without user IDs (no `process.getuid`), ownership is not checked.
 */
import { lstatSync, mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { defaultHomeBase, resolveHome, type EnvLike } from "./home.js";

export type StateRootProblem = string;

/**
 * The existing component of `path` that is not a directory (the nearest existing ancestor, when it is not one), and
 * what it is instead, or null when there is none: why `path` cannot be a directory (ENOTDIR).
 */
export function notADirectoryIn(path: string): { component: string; is: string } | null {
  for (let p = dirname(path); p !== dirname(p); p = dirname(p)) {
    let st;
    try {
      st = statSync(p);
    } catch {
      continue; // missing, or itself below the component looked for
    }
    if (st.isDirectory()) return null;
    const kind = st.isFile() ? "a file" : "something other than a directory";
    const link = lstatSync(p, { throwIfNoEntry: false })?.isSymbolicLink() === true;
    return { component: p, is: link ? `a symbolic link to ${kind}` : kind };
  }
  return null;
}

/** The one sentence for a root that cannot exist because a component of its path is not a directory. */
function blockedRoot(path: string, b: { component: string; is: string }): StateRootProblem {
  return `the state directory ${path} cannot be created: ${b.component} is ${b.is}, not a directory; set MC_HOME to a directory you own, or move ${b.component} out of the way`;
}

export function checkStateRoot(path: string, uid: number | undefined = process.getuid?.()): StateRootProblem | null {
  let st;
  try {
    st = statSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    const why = code === "ENOTDIR" ? notADirectoryIn(path) : null;
    if (why !== null) return blockedRoot(path, why);
    return `the state directory ${path} cannot be used (${code}); set MC_HOME to a directory you own`;
  }
  if (!st.isDirectory()) return `the state directory ${path} is not a directory; set MC_HOME to a directory you own`;
  if (uid !== undefined && st.uid !== uid) {
    return `the state directory ${path} is owned by another user (uid ${st.uid}); use a directory you own (set MC_HOME), or as its owner run: chown ${uid} ${path} && chmod 700 ${path}`;
  }
  if ((st.mode & 0o022) !== 0) {
    const mode = (st.mode & 0o777).toString(8).padStart(3, "0");
    return `the state directory ${path} is writable by ${(st.mode & 0o002) !== 0 ? "others" : "its group"} (mode ${mode}); fix it with: chmod 700 ${path}`;
  }
  return null;
}

/** Creates `path` (0700) when missing (and `base`, if given, exists), then `checkStateRoot`. */
export function prepareStateRoot(path: string, base?: string): StateRootProblem | null {
  try {
    statSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      if (base !== undefined && statSync(base, { throwIfNoEntry: false })?.isDirectory() !== true) {
        return `the home directory ${base} (HOME) does not exist, so the state directory ${path} was not created; set HOME to your home directory, or MC_HOME to a directory you own`;
      }
      try {
        mkdirSync(path, { recursive: true, mode: 0o700 });
      } catch (e) {
        const why = notADirectoryIn(path);
        if (why !== null) return blockedRoot(path, why);
        return `the state directory ${path} cannot be created (${(e as NodeJS.ErrnoException).code ?? "error"}); set MC_HOME to a directory you own`;
      }
    }
  }
  return checkStateRoot(path);
}

/** The doors' state root for `env` (MC_HOME, BERTH_HOME or ~/.berth), prepared: its path and the problem, if any. */
export function prepareHome(env: EnvLike): { home: string; problem: StateRootProblem | null } {
  const home = resolveHome(env);
  return { home, problem: prepareStateRoot(home, defaultHomeBase(env)) };
}
