/**
 * Who is at the other end of a daemon SCV socket connection, as far as a same-user daemon can tell: used to refuse
 * daemon management from a delegated agent run even when it unset `SCV_PARENT` before connecting.
 *
 * Contract:
 * - `peerPids(socket)` names the processes holding the client end of an accepted Unix socket connection (Linux:
 *   our end's inode from `/proc/self/fd`, its peer inode and holders from `ss -xpn`, iproute2's socket-diag view).
 *   `{unknown}` when that cannot be determined on this system (no `/proc`, no `ss`); `{pids: []}` when the peer is
 *   known but no process holds it any more (a client that sent its request and exited).
 * - `delegatedPeer(pids, home)` is a reason string when any peer process, or any of its ancestors below the daemon
 *   and the daemon's own ancestors, is part of a delegated run: its initial environment carries a non-empty
 *   `SCV_PARENT` (so a child started with the variable removed is still caught through its parent), or it is the
 *   agent process of a delegation record or in that agent's process group. Null otherwise.
 * - Threat model (docs/scv.md): a process of the same user can always detach itself (double fork + `setsid` with a
 *   scrubbed environment) or reach the user's files directly; this check stops an agent that merely unsets the
 *   variable, not a determined same-user attacker.
 */
import { execFile } from "node:child_process";
import { readFile, readlink } from "node:fs/promises";
import type { Socket } from "node:net";
import { readRecords, sameProcess } from "../runtime/delegation/records.js";

const SS_TIMEOUT_MS = 5000;
const MAX_ANCESTRY = 64;

export type PeerLookup = { pids: number[] } | { unknown: string };

/** The file descriptor of a socket's libuv handle (null when the socket has none). */
function fdOf(socket: Socket): number | null {
  const handle: unknown = (socket as unknown as { _handle?: unknown })._handle;
  if (typeof handle !== "object" || handle === null) return null;
  const fd: unknown = (handle as { fd?: unknown }).fd;
  return typeof fd === "number" && fd >= 0 ? fd : null;
}

function runSs(): Promise<string | null> {
  return new Promise((resolve) => {
    execFile("ss", ["-xpn"], { timeout: SS_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 }, (err, stdout) => resolve(err ? null : stdout));
  });
}

interface SsRow {
  local: string;
  peer: string;
  pids: number[];
}

/** Rows of `ss -xpn`: `u_str ESTAB 0 0 <addr> <inode> <addr> <peer inode> users:((…,pid=N,fd=M),…)`. */
export function parseSs(text: string): SsRow[] {
  const rows: SsRow[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("u_")) continue;
    const at = line.indexOf(" users:(");
    const head = at < 0 ? line : line.slice(0, at);
    const numbers = head.trim().split(/\s+/).slice(4).filter((t) => /^\d+$/.test(t));
    if (numbers.length < 2) continue;
    const pids = at < 0 ? [] : [...line.slice(at).matchAll(/pid=(\d+)/g)].map((m) => Number(m[1]));
    rows.push({ local: numbers[numbers.length - 2]!, peer: numbers[numbers.length - 1]!, pids });
  }
  return rows;
}

export async function peerPids(socket: Socket): Promise<PeerLookup> {
  if (process.platform !== "linux") return { unknown: "peer processes are only known on Linux" };
  const fd = fdOf(socket);
  if (fd === null) return { unknown: "the connection has no file descriptor" };
  let link: string;
  try {
    link = await readlink(`/proc/self/fd/${fd}`);
  } catch {
    return { unknown: "/proc is not readable" };
  }
  const m = /^socket:\[(\d+)\]$/.exec(link);
  if (m === null) return { unknown: "the connection is not a socket" };
  const out = await runSs();
  if (out === null) return { unknown: "`ss` (iproute2) is not available" };
  const rows = parseSs(out);
  const ours = rows.find((r) => r.local === m[1]);
  if (ours === undefined) return { pids: [] };
  const pids = new Set<number>();
  for (const r of rows) if (r.local === ours.peer) for (const p of r.pids) pids.add(p);
  return { pids: [...pids] };
}

async function stat(pid: number): Promise<{ ppid: number; pgrp: number } | null> {
  try {
    const s = await readFile(`/proc/${pid}/stat`, "utf8");
    const rest = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(rest[1]), pgrp: Number(rest[2]) };
  } catch {
    return null;
  }
}

async function tagged(pid: number): Promise<boolean> {
  try {
    const env = await readFile(`/proc/${pid}/environ`, "latin1");
    return env.split("\0").some((kv) => kv.startsWith("SCV_PARENT=") && kv.length > "SCV_PARENT=".length);
  } catch {
    return false;
  }
}

/** This process and its ancestors (a run that started the daemon owns it anyway). */
async function daemonLine(): Promise<Set<number>> {
  const line = new Set<number>();
  let pid = process.pid;
  for (let i = 0; i < MAX_ANCESTRY && pid > 1 && !line.has(pid); i++) {
    line.add(pid);
    const s = await stat(pid);
    if (s === null) break;
    pid = s.ppid;
  }
  line.add(1);
  return line;
}

export async function delegatedPeer(pids: number[], home: string): Promise<string | null> {
  const stop = await daemonLine();
  const agents: Array<{ pid: number; start: string | null; handle: string }> = [];
  for (const r of await readRecords(home)) agents.push({ pid: r.pid, start: r.pid_start, handle: r.handle });
  for (const first of pids) {
    let pid = first;
    for (let i = 0; i < MAX_ANCESTRY && !stop.has(pid); i++) {
      const s = await stat(pid);
      if (s === null) break;
      if (await tagged(pid)) return `process ${pid} belongs to a delegated agent run (SCV_PARENT)`;
      for (const a of agents)
        if ((a.pid === pid || a.pid === s.pgrp) && (await sameProcess(a.pid, a.start))) return `process ${pid} belongs to delegated run ${a.handle}`;
      pid = s.ppid;
    }
  }
  return null;
}
