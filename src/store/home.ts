/**
 * Resolution of Berth's shared home directory (auth store, global settings, catalog cache).
 * Contract: pure; never touches the filesystem. Creating the directory (mode 0700) is the
 * caller's job at startup; stores create their own files lazily inside it.
 */
import { homedir } from "node:os";
import { join, resolve } from "node:path";

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
