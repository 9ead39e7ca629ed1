/**
 * Foundation figures (issue 2): spawn -> initialize answered (median of N cold spawns), and pipelined
 * `status` throughput through stdio with the service's RSS sampled along the way (flat memory).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { BERTH_BIN } from "../test/helpers/paths.js";
import type { Figure } from "./run.js";

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

const INIT = JSON.stringify({ protocol_version: 1, kind: "request", request_id: "init", method: "initialize", payload: { supported_protocol_versions: [1] } }) + "\n";

/**
 * `node`: `node bin/berth service`. `exec`: the launcher executed directly (its POSIX sh part runs first), as
 * frontends do; `exec+credentials`: the same with two credential variables to hand over on fd 3.
 */
async function spawnToInit(mode: "node" | "exec" | "exec+credentials" = "node"): Promise<number> {
  const home = mkdtempSync(join(tmpdir(), "berth-bench-"));
  const env = { ...process.env, MC_HOME: home, ...(mode === "exec+credentials" ? { ANTHROPIC_API_KEY: "sk-bench", GITHUB_TOKEN: "ghp-bench" } : {}) };
  const t0 = performance.now();
  const child =
    mode === "node"
      ? spawn(process.execPath, [BERTH_BIN, "service"], { env, stdio: ["pipe", "pipe", "inherit"] })
      : spawn(BERTH_BIN, ["service"], { env, stdio: ["pipe", "pipe", "inherit"] });
  child.stdin.write(INIT);
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  const dt = performance.now() - t0;
  child.stdin.end();
  await new Promise((r) => child.on("close", r));
  return dt;
}

async function pipelinedStatus(n: number): Promise<{ perSec: number; rss: number[] }> {
  const home = mkdtempSync(join(tmpdir(), "berth-bench-"));
  const child = spawn(process.execPath, [BERTH_BIN, "service"], { env: { ...process.env, MC_HOME: home }, stdio: ["pipe", "pipe", "inherit"] });
  child.stdin.write(INIT);
  let lines = 0;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  let first = true;
  let resolveInit!: () => void;
  const inited = new Promise<void>((r) => (resolveInit = r));
  child.stdout.on("data", (d: Buffer) => {
    for (let i = d.indexOf(10); i !== -1; i = d.indexOf(10, i + 1)) {
      lines++;
      if (first) {
        first = false;
        resolveInit();
      }
      if (lines === n + 1) resolveDone();
    }
  });
  await inited;
  const rss: number[] = [];
  const sampler = setInterval(() => rss.push(rssMb(child.pid!)), 50);
  const chunk = Array.from({ length: 1000 }, (_, i) => JSON.stringify({ protocol_version: 1, kind: "request", request_id: `s${i}`, method: "status", payload: {} })).join("\n") + "\n";
  const t0 = performance.now();
  for (let sent = 0; sent < n; sent += 1000) if (!child.stdin.write(chunk)) await new Promise((r) => child.stdin.once("drain", r));
  await done;
  const dt = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  child.stdin.end();
  await new Promise((r) => child.on("close", r));
  return { perSec: n / dt, rss: rss.filter((x) => !Number.isNaN(x)) };
}

export default async function (): Promise<Figure[]> {
  await spawnToInit(); // warm the file cache
  const times: number[] = [];
  const execTimes: number[] = [];
  const handoffTimes: number[] = [];
  // Interleaved so machine load affects the three launch modes alike.
  for (let i = 0; i < 15; i++) {
    times.push(await spawnToInit());
    execTimes.push(await spawnToInit("exec"));
    handoffTimes.push(await spawnToInit("exec+credentials"));
  }
  const { perSec, rss } = await pipelinedStatus(400_000);
  // Lazy families load right after initialize; compare the second fifth (warmed up) with the last fifth.
  const q = Math.max(1, Math.floor(rss.length / 5));
  const early = median(rss.slice(q, 2 * q));
  const late = median(rss.slice(-q));
  return [
    { name: "service.spawn_to_initialize_ms.median", value: round(median(times)), unit: "ms", target: "<= 100", ok: median(times) <= 100 },
    { name: "service.spawn_to_initialize_ms.exec_launcher_median", value: round(median(execTimes)), unit: "ms", target: "<= 100", ok: median(execTimes) <= 100 },
    {
      name: "service.spawn_to_initialize_ms.exec_launcher_credential_handoff_median",
      value: round(median(handoffTimes)),
      unit: "ms",
      target: "<= 100",
      ok: median(handoffTimes) <= 100,
    },
    { name: "service.pipelined_status_per_sec", value: Math.round(perSec), unit: "req/s", target: ">= 20000", ok: perSec >= 20000 },
    { name: "service.pipelined_status_rss_mb.warm_median", value: round(early), unit: "MB" },
    { name: "service.pipelined_status_rss_mb.last_fifth_median", value: round(late), unit: "MB", target: "flat (<= warm + 10)", ok: late <= early + 10 },
  ];
}
