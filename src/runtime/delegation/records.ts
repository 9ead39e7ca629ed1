/**
 * Delegated-run records: one file per run under `$MC_HOME/run/delegations/<handle>.json` (0600, written atomically),
 * naming the agent process and the Berth process that owns it, each by PID *and* start time, so a reused PID never
 * matches.
 *
 * Contract:
 * - A run's processes are its agent's process group plus any process whose environment carries
 *   `SCV_PARENT=…/<handle>` (a `setsid` escapee keeps the tag). Only processes of this user are visible.
 * - A run is *orphaned* when its owner is gone (PID dead or started at another time) and any of its processes
 *   remain; a run with no process left is stale and its record is removed by `scan`.
 * - `stopRun` sends SIGTERM to every process of the run, waits up to `graceMs` (default 2 s) for them to go, sends
 *   SIGKILL to what is left, and removes the record.
 * - Process identity comes from Linux `/proc`; elsewhere start times are unknown and only PIDs are compared.
 * - A record is only trusted so far: one naming PID 1 or below (a damaged or edited file) is skipped and left in place,
 *   and on Linux one without the agent's start time never matches a live PID (only tagged escapees count). Signalling
 *   such a PID's group would reach init's group (`kill(-1)`: every process of the user) or an unrelated program.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, rm, chmod } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../../store/atomic-file.js";
import { pidAlive, processStartTime } from "../../store/process-alive.js";

export const KILL_GRACE_MS = 2000;

export interface DelegationRecord {
  handle: string;
  agent: string;
  instance: string;
  session: string;
  depth: number;
  pid: number;
  pid_start: string | null;
  owner_pid: number;
  owner_start: string | null;
  cwd: string;
  started_unix_seconds: number;
  conversation?: string;
  turn?: number;
}

export interface RunView {
  record: DelegationRecord;
  /** PIDs of the run still alive (the agent's group and tagged escapees). */
  pids: number[];
  orphaned: boolean;
}

export function delegationsDir(home: string): string {
  return join(home, "run", "delegations");
}

const HANDLE = /^[a-z][a-z0-9-]{0,63}$/;

/** A fresh run handle such as `berth-3f9a2c`. */
export function newHandle(agent: string): string {
  return `${agent}-${randomBytes(3).toString("hex")}`;
}

/**
 * `/proc/<pid>/stat` field 22 (start time in clock ticks since boot), or null when the process is gone; where there
 * is no `/proc` (not Linux), "" for a live PID.
 */
export function processStart(pid: number): Promise<string | null> {
  return Promise.resolve(process.platform !== "linux" ? (pidAlive(pid) ? "" : null) : processStartTime(pid));
}


/** True when `pid` runs and started at `start` (null start: PID alone). */
export async function sameProcess(pid: number, start: string | null): Promise<boolean> {
  const now = await processStart(pid);
  if (now === null) return false;
  return start === null || now === "" || now === start;
}

export async function writeRecord(home: string, r: DelegationRecord): Promise<void> {
  if (!HANDLE.test(r.handle)) throw new Error(`invalid delegation handle ${r.handle.slice(0, 64)}`);
  const dir = delegationsDir(home);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  await writeFileAtomic(join(dir, `${r.handle}.json`), JSON.stringify(r) + "\n");
}

export async function removeRecord(home: string, handle: string): Promise<void> {
  if (!HANDLE.test(handle)) return;
  await rm(join(delegationsDir(home), `${handle}.json`), { force: true });
}

/** A PID a record may name: not init (1), not 0 or negative (which `kill` reads as process groups). */
function validPid(pid: unknown): pid is number {
  return typeof pid === "number" && Number.isSafeInteger(pid) && pid > 1;
}

/**
 * True when the run's recorded agent process is alive. Without its start time on Linux (the agent was gone when
 * the record was written, or the file was edited) a live PID proves nothing; this process is never its own agent.
 */
async function agentAlive(r: DelegationRecord): Promise<boolean> {
  if (!validPid(r.pid) || r.pid === process.pid) return false;
  if (r.pid_start === null && process.platform === "linux") return false;
  return sameProcess(r.pid, r.pid_start);
}

export async function readRecords(home: string): Promise<DelegationRecord[]> {
  let names: string[];
  try {
    names = await readdir(delegationsDir(home));
  } catch {
    return [];
  }
  const out: DelegationRecord[] = [];
  for (const n of names.sort()) {
    if (!n.endsWith(".json") || n.startsWith(".")) continue;
    try {
      const r = JSON.parse(await readFile(join(delegationsDir(home), n), "utf8")) as DelegationRecord;
      if (typeof r.handle === "string" && HANDLE.test(r.handle) && validPid(r.pid) && validPid(r.owner_pid)) out.push(r);
    } catch {
      // A record being replaced or a damaged one: skipped this round, never deleted on a parse error.
    }
  }
  return out;
}

interface ProcInfo {
  pid: number;
  pgrp: number;
}

async function listProcesses(): Promise<ProcInfo[]> {
  let names: string[];
  try {
    names = await readdir("/proc");
  } catch {
    return [];
  }
  const out: ProcInfo[] = [];
  for (const n of names) {
    if (!/^\d+$/.test(n)) continue;
    try {
      const stat = await readFile(`/proc/${n}/stat`, "utf8");
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.push({ pid: Number(n), pgrp: Number(rest[2]) });
    } catch {
      // gone
    }
  }
  return out;
}

async function taggedWith(pid: number, handle: string): Promise<boolean> {
  try {
    const env = await readFile(`/proc/${pid}/environ`, "latin1");
    return env.split("\0").some((kv) => kv.startsWith("SCV_PARENT=") && kv.endsWith(`/${handle}`));
  } catch {
    return false;
  }
}

/** The live processes of a run: its agent's group (when the agent is the one recorded) and tagged escapees. */
export async function runProcesses(r: DelegationRecord, procs?: ProcInfo[]): Promise<number[]> {
  const all = procs ?? (await listProcesses());
  const alive = await agentAlive(r);
  const out = new Set<number>();
  if (alive) out.add(r.pid);
  for (const p of all) {
    if (p.pid === process.pid) continue;
    if ((alive && p.pgrp === r.pid) || (await taggedWith(p.pid, r.handle))) out.add(p.pid);
  }
  return [...out].sort((a, b) => a - b);
}

/** Every recorded run with its live processes; records whose processes are all gone are removed. */
export async function scan(home: string): Promise<RunView[]> {
  const records = await readRecords(home);
  if (records.length === 0) return [];
  const procs = await listProcesses();
  const out: RunView[] = [];
  for (const record of records) {
    const pids = await runProcesses(record, procs);
    if (pids.length === 0) {
      await removeRecord(home, record.handle);
      continue;
    }
    const orphaned = !(await sameProcess(record.owner_pid, record.owner_start));
    out.push({ record, pids, orphaned });
  }
  return out;
}

function signal(pids: number[], sig: NodeJS.Signals, pgid: number | null): void {
  if (pgid !== null) {
    try {
      process.kill(-pgid, sig);
    } catch {
      // group gone
    }
  }
  for (const p of pids) {
    try {
      process.kill(p, sig);
    } catch {
      // gone
    }
  }
}

/** TERM → `graceMs` → KILL for every process of the run; then its record is removed. */
export async function stopRun(home: string, r: DelegationRecord, graceMs = KILL_GRACE_MS): Promise<void> {
  const alive = await agentAlive(r);
  let pids = await runProcesses(r);
  signal(pids, "SIGTERM", alive ? r.pid : null);
  const deadline = Date.now() + graceMs;
  while (pids.length > 0 && Date.now() < deadline) {
    await new Promise((res) => setTimeout(res, 50));
    const left: number[] = [];
    for (const p of pids) if (pidAlive(p)) left.push(p);
    pids = left;
  }
  if (pids.length > 0) signal(pids, "SIGKILL", alive ? r.pid : null);
  await removeRecord(home, r.handle);
}

/**
 * Stops the orphaned runs of one session (its owning Berth process died mid-delegation, e.g. SIGKILLed) and resolves
 * with their handles. A session resumed after such a death calls it, so what its earlier process delegated does not
 * run on unseen when no `berth daemon` reaps orphans.
 */
export async function stopOrphansOf(home: string, session: string): Promise<string[]> {
  const records = (await readRecords(home)).filter((r) => r.session === session);
  const stopped: string[] = [];
  for (const r of records) {
    if (await sameProcess(r.owner_pid, r.owner_start)) continue;
    await stopRun(home, r);
    stopped.push(r.handle);
  }
  return stopped;
}
