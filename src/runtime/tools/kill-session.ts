/**
 * Signals every process of a command's session. `bash` is spawned detached, so it leads a new session (and process
 * group) whose id is its PID. Processes that start a process group of their own stay in that session: GNU `timeout`
 * does (`timeout 60 npm test`), as do job-control shells (`set -m`) and some test runners. Signalling only the
 * leader's group left them running after a timeout or cancel. Contract:
 * - `killSession(sid, signal)` signals the group `sid` and every other process group that has a member in session
 *   `sid` (found in `/proc/<pid>/stat`, Linux). Elsewhere (no `/proc`) only the group `sid` is signalled.
 * - A process that left the session (`setsid`, a daemon) is not signalled: that is how a command keeps a process
 *   running on purpose.
 * - Synchronous (it also runs in a `process.on("exit")` hook); a scan reads one small file per process.
 */
import { readdirSync, readFileSync } from "node:fs";

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

/** Process groups with a member in session `sid` (Linux `/proc`; empty where there is none). */
export function sessionGroups(sid: number): Set<number> {
  const groups = new Set<number>();
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return groups;
  }
  for (const name of names) {
    const c = name.charCodeAt(0);
    if (c < 48 || c > 57) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue; // exited meanwhile
    }
    // pid (comm) state ppid pgrp session …: comm may hold spaces and parentheses, so fields count from the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[3]) === sid) groups.add(Number(fields[2]));
  }
  return groups;
}

/** Signals the group `sid` and every process group of session `sid` (see the module contract). */
export function killSession(sid: number, signal: NodeJS.Signals): void {
  signalGroup(sid, signal);
  for (const g of sessionGroups(sid)) if (g !== sid && g > 1) signalGroup(g, signal);
}
