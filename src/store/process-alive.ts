/**
 * Whether a process ID names a running process: the liveness test of lock owners and delegation run records.
 * Contract: true when `kill(pid, 0)` succeeds (or fails EPERM: a process of another user) and, on Linux, the process
 * has not exited: `/proc/<pid>/stat` shows neither a zombie (`Z`) nor a dead task (`X`). A zombie has exited (its
 * descriptors are closed, it can write nothing) but keeps its PID until its parent reaps it, which for a daemon whose
 * parent is gone (started by `berth open`, or from a shell's `( … & )`) can take a while; whatever it held is free.
 * When `/proc` cannot be read for a process `kill` found, it counts as running (the conservative answer for a lock).
 */
import { readFileSync } from "node:fs";

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
  if (process.platform !== "linux") return true;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return true;
  }
  // `pid (comm) S …`: the command name may hold spaces and parentheses, the state follows the last ")".
  const state = stat.charAt(stat.lastIndexOf(")") + 2);
  return state !== "Z" && state !== "X";
}

/**
 * The start time of process `pid`: `/proc/<pid>/stat` field 22 (clock ticks after boot), as its decimal text. With
 * the PID it names one process instance for the life of a boot (a PID reused by a later process comes with a later
 * start time). Null where `/proc` cannot tell: not Linux, or no such process (or an unreadable entry).
 */
export function processStartTime(pid: number): string | null {
  if (process.platform !== "linux") return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const field = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    return field !== undefined && /^\d+$/.test(field) ? field : null;
  } catch {
    return null;
  }
}
