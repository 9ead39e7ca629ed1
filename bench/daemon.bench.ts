/**
 * `berth daemon` from spawn to its ready line (the line the web UI, `berth open` and every client of a daemon started
 * for them wait for), and its resident memory then, beside a minimal Node daemon measured in the same run: one
 * process that listens on an owner-only Unix socket and on 127.0.0.1 (HTTP + WebSocket upgrade refused), then prints
 * a one-line JSON ready line. Each spawn uses a fresh state root (a first start: state directory, token, SQLite
 * store); the two are alternated so machine load hits both alike. Medians of DAEMON_RUNS (default 7).
 * No target was set by an issue for this figure; it is kept so a change to the daemon's start shows here.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { BERTH_BIN } from "../test/helpers/paths.js";
import { benchEnv } from "./env.js";
import type { Figure } from "./run.js";

const RUNS = Number(process.env["DAEMON_RUNS"] ?? 7);

const FLOOR_DAEMON = `
import { createServer as http } from "node:http";
import { createServer as net } from "node:net";
import { join } from "node:path";
const dir = process.env.FLOOR_HOME;
const sock = net((s) => s.end()).listen(join(dir, "backend.sock"), () => {
  const web = http((q, r) => r.end("{}")).listen(0, "127.0.0.1", () => {
    process.stdout.write(JSON.stringify({ ready: true, http: "http://127.0.0.1:" + web.address().port, backend_socket: join(dir, "backend.sock") }) + "\\n");
  });
});
process.on("SIGTERM", () => process.exit(0));
`;

interface Start {
  readyMs: number;
  rssMb: number;
}

/** Spawns one daemon, times its ready line, reads its RSS there, then stops it with SIGTERM. */
function startOnce(floor: boolean): Promise<Start> {
  const home = mkdtempSync(join(tmpdir(), "bench-daemon-"));
  const env = { ...benchEnv(), MC_HOME: home, BERTH_HOME: join(home, "berth"), FLOOR_HOME: home };
  const t0 = performance.now();
  const child = floor
    ? spawn(process.execPath, ["--input-type=module", "-e", FLOOR_DAEMON], { env, cwd: home, stdio: ["ignore", "pipe", "pipe"] })
    : spawn(BERTH_BIN, ["daemon"], { env, cwd: home, stdio: ["ignore", "pipe", "pipe"] });
  return new Promise<Start>((resolve, reject) => {
    let out = "";
    let err = "";
    let start: Start | null = null;
    child.stderr.setEncoding("utf8").on("data", (d: string) => void (err += d.slice(0, 2000)));
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      if (start !== null || !out.includes("\n")) return;
      const readyMs = performance.now() - t0;
      const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"));
      start = { readyMs, rssMb: m ? Number(m[1]) / 1024 : NaN };
      child.kill("SIGTERM");
    });
    child.on("error", reject);
    child.on("close", () => {
      rmSync(home, { recursive: true, force: true });
      if (start !== null) resolve(start);
      else reject(new Error(`${floor ? "floor" : "berth"} daemon exited without a ready line: ${err.slice(0, 400)}`));
    });
  });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (v: number): number => Math.round(v * 10) / 10;

export default async function daemonBench(): Promise<Figure[]> {
  const berth: Start[] = [];
  const floor: Start[] = [];
  await startOnce(true); // the page cache holds node and the scripts before the first timed spawn of either
  await startOnce(false);
  for (let i = 0; i < RUNS; i++) {
    floor.push(await startOnce(true));
    berth.push(await startOnce(false));
  }
  const ready = median(berth.map((s) => s.readyMs));
  const readyFloor = median(floor.map((s) => s.readyMs));
  const rss = median(berth.map((s) => s.rssMb));
  const rssFloor = median(floor.map((s) => s.rssMb));
  return [
    { name: "daemon.spawn_to_ready_line_ms", value: round(ready), unit: "ms", floor: round(readyFloor), ratio: Math.round((ready / readyFloor) * 100) / 100, runs: RUNS },
    { name: "daemon.rss_at_ready_mb", value: round(rss), unit: "MB", floor: round(rssFloor), ratio: Math.round((rss / rssFloor) * 100) / 100, runs: RUNS },
  ];
}
