/**
 * Resolution of Berth's shared home directory (auth store, global settings, catalog cache).
 * Contract: pure; never touches the filesystem. Creating the directory (mode 0700) is the
 * caller's job at startup; stores create their own files lazily inside it. A relative home is resolved against
 * the working directory; `pinHomeVars` makes that the start directory for every process Berth starts.
 */
import { homedir } from "node:os";
import { isAbsolute, join, resolve } from "node:path";

export type EnvLike = Readonly<Record<string, string | undefined>>;

/** `MC_HOME`, else `BERTH_HOME`, else `~/.berth`. Empty values count as unset. Always absolute. */
export function resolveHome(env: EnvLike, home: () => string = homedir): string {
  const mc = env["MC_HOME"];
  if (mc !== undefined && mc !== "") return resolve(mc);
  const berth = env["BERTH_HOME"];
  if (berth !== undefined && berth !== "") return resolve(berth);
  return join(home(), ".berth");
}

/**
 * The directory that must already exist for `resolveHome(env)` to be created in it: the user's home directory when
 * the default `~/.berth` is used (a HOME naming nothing is a misconfiguration, not a place to create), else
 * undefined (an explicit `MC_HOME` / `BERTH_HOME` is created with its parents).
 */
export function defaultHomeBase(env: EnvLike, home: () => string = homedir): string | undefined {
  if ((env["MC_HOME"] ?? "") !== "" || (env["BERTH_HOME"] ?? "") !== "") return undefined;
  return home();
}

/** The variables naming a Berth directory by path: the home (MC_HOME, BERTH_HOME) and the SCV socket's (SCV_HOME). */
const HOME_VARS = ["MC_HOME", "BERTH_HOME", "SCV_HOME"] as const;

/**
 * Makes each relative home variable of `env` absolute, in place, against `cwd`: called once at startup (cli/main.ts)
 * on `process.env`, so a relative `MC_HOME=./state` means the directory Berth was started in, for this process and
 * for every process it starts (they inherit the environment, but may run elsewhere: a session's workspace, a tool's
 * shell that changed directory, a child Berth). Empty and absolute values are left as they are; when `cwd` throws
 * (the start directory is gone) nothing changes, and the command reports that itself.
 */
export function pinHomeVars(env: Record<string, string | undefined>, cwd: () => string): void {
  for (const k of HOME_VARS) {
    const v = env[k];
    if (v === undefined || v === "" || isAbsolute(v)) continue;
    try {
      env[k] = resolve(cwd(), v);
    } catch {
      return;
    }
  }
}
