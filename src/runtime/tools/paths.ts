/**
 * Path policy for file tools: a relative path resolves against `ctx.cwd`; an absolute path is
 * used as given, including outside `cwd` (whether a call may touch it is the approval gate's
 * decision, not the tool's). A leading `~/` expands to the home directory.
 */
import { homedir } from "node:os";
import { isAbsolute, resolve } from "node:path";

export function resolvePath(cwd: string, p: string): string {
  if (p === "~") return homedir();
  if (p.startsWith("~/")) return resolve(homedir(), p.slice(2));
  return isAbsolute(p) ? resolve(p) : resolve(cwd, p);
}
