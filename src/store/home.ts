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
