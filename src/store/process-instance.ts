/**
 * Which process instance on which machine: the identity written into names and marks that a later process judges
 * (an append lock's holder mark, sessions/holder-mark.ts; an atomic write's temporary file, runtime/tools/atomic-temp.ts).
 *
 * Contract:
 * - `selfInstance()` is this process's `start` — its start time (`/proc/<pid>/stat` field 22) in base 36, or, where
 *   there is none, `_` and random characters drawn once per process — and `tag`, a hash of the host name, the boot
 *   ID and the PID namespace (12 hex digits of SHA-256). With the PID, start names one process instance (a reused
 *   PID never passes for it); the tag says where a PID means that process.
 * - `instanceGone(pid, start, tag)` is true only when that instance is certainly gone: same tag, and no such PID (or a
 *   zombie), or that PID now started at another time, or it is our PID under another start. Everything else
 *   (another tag, a live PID with its start, a live PID whose start cannot be known) is false.
 */
import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";
import { sha256Hex } from "../core/sha256.js";
import { pidAlive, processStartTime } from "./process-alive.js";

export interface SelfInstance {
  start: string;
  tag: string;
}

/** Starts a start field made of random characters (no `/proc`): not a base-36 digit, so never a start time's. */
export const NO_START = "_";

let self: SelfInstance | null = null;

function readQuiet(f: () => string): string {
  try {
    return f();
  } catch {
    return "";
  }
}

/** Start times are compared as written: base 36. */
export function startText(procStart: string): string {
  return Number(procStart).toString(36);
}

/** This process's start and tag (read once). */
export function selfInstance(): SelfInstance {
  if (self === null) {
    const start = processStartTime(process.pid);
    const boot = readQuiet(() => readFileSync("/proc/sys/kernel/random/boot_id", "latin1").trim());
    const pidns = readQuiet(() => readlinkSync("/proc/self/ns/pid"));
    self = {
      start: start !== null ? startText(start) : NO_START + Math.floor(Math.random() * 36 ** 8).toString(36),
      tag: sha256Hex(`${hostname()}\0${boot}\0${pidns}`).slice(0, 12),
    };
  }
  return self;
}

/** True only when the instance (`pid`, `start`, `tag`) is certainly gone (see the module contract). */
export function instanceGone(pid: number, start: string, tag: string): boolean {
  const m = selfInstance();
  if (tag !== m.tag) return false;
  if (pid === process.pid) return start !== m.start;
  if (!pidAlive(pid)) return true;
  if (start.startsWith(NO_START)) return false; // no start time recorded: a live PID may be that instance
  const now = processStartTime(pid);
  return now !== null && startText(now) !== start;
}
