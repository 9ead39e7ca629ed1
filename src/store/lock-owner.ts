/**
 * The owner file of a lock directory, `{pid, host, token}`, written by the process that made the directory, right
 * after its `mkdir`: a session's writer lease (`<id>.owner`, sessions/locks.ts) and a settings, auth or catalog file's
 * lock (`<file>.lock.owner`, settings/locked-json.ts). `token` names this process instance (pids are reused, e.g.
 * across container restarts). A missing or torn owner file reads as unknown (null), never as dead.
 */
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { hostname } from "node:os";
import { randomBytes } from "./random.js";
import { pidAlive } from "./process-alive.js";

/** Identifies this process instance (pids are reused, e.g. across container restarts). */
export const PROCESS_TOKEN = randomBytes(8).toString("hex");
export const HOST = hostname();

export interface OwnerInfo {
  pid: number;
  host: string;
  token: string;
  /** A session lease held only to settle a turn a dead writer left open (sessions/lease.ts); absent otherwise. */
  settling?: boolean;
}

export function readOwnerSync(path: string): OwnerInfo | null {
  try {
    const v = JSON.parse(readFileSync(path, "utf8")) as Partial<OwnerInfo>;
    if (typeof v.pid === "number" && typeof v.host === "string" && typeof v.token === "string") return v as OwnerInfo;
  } catch {
    /* missing or torn owner file: treated as unknown */
  }
  return null;
}

export async function readOwner(path: string): Promise<OwnerInfo | null> {
  try {
    const v = JSON.parse(await readFile(path, "utf8")) as Partial<OwnerInfo>;
    if (typeof v.pid === "number" && typeof v.host === "string" && typeof v.token === "string") return v as OwnerInfo;
  } catch {
    /* missing or torn owner file: treated as unknown */
  }
  return null;
}

/** Dead for certain (same host, and the pid is gone or is ours under another token). Unknown → false. */
export function ownerIsDead(o: OwnerInfo): boolean {
  if (o.host !== HOST) return false;
  if (o.pid === process.pid) return o.token !== PROCESS_TOKEN;
  return !pidAlive(o.pid);
}
