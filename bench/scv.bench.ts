/**
 * SCV figures over the daemon's socket, each beside a floor measured in the same run:
 * - scv.first_delta_ms.median: `turn.start` written → first `assistant.delta` line read (the fake provider echoes
 *   the prompt in one delta). Median of FIRST_SAMPLES turns on one session (default 30), each after one of the floor's.
 * - scv.long_turn_ms.median: `turn.start` → `turn.completed` of a 20,000-delta answer (about 215 KB of text). Median
 *   of SCV_LONG_SAMPLES turns (default 3; more turns show the daemon's heap growth in scv.peak_rss_mb).
 * - scv.peak_rss_mb: the daemon's peak RSS (VmHWM) after the runs.
 * - scv.long_turn_cpu_ms.mean: CPU time (user + system, /proc/<pid>/stat) the daemon spends per long turn, beside the
 *   floor host's. No target: wall-clock ratios swing on a shared machine, CPU time per turn is the steadier measure
 *   of the daemon's own cost.
 * - scv.short_turn_cpu_ms.mean: the same per first-delta turn (a one-delta echo: prompt to terminal), beside the floor
 *   host's. No target; clock ticks are 10 ms, so it is a mean over all FIRST_SAMPLES turns.
 * The floor is a minimal Node NDJSON echo host on a Unix socket: it reads a prompt line, POSTs the same request to the
 * same loopback fake provider, and relays each SSE delta as one NDJSON line, then a terminal line. Targets: first
 * delta ≤ 2× floor, whole turn ≤ 1.5× floor, peak RSS ≤ 100 MB.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { defaultTurn, lastUserText } from "../test/fakes/fake-provider.js";
import { startDaemon, startRig, type Msg } from "../test/scv/client.js";
import type { Figure } from "./run.js";

const FIRST_SAMPLES = Number(process.env["SCV_FIRST_SAMPLES"] ?? 30);
const LONG_SAMPLES = Number(process.env["SCV_LONG_SAMPLES"] ?? 3);
const LONG_PROMPT = "long answer 20000";

/** The floor host: one NDJSON line in ({prompt}), the provider's SSE deltas out as NDJSON lines, then {"done":true}. */
const ECHO_HOST = `
import { createServer } from "node:net";
import { request } from "node:http";
const [path, url] = process.argv.slice(1);
createServer((s) => {
  let inbuf = "";
  s.setEncoding("utf8");
  s.on("data", (d) => {
    inbuf += d;
    for (let i; (i = inbuf.indexOf("\\n")) >= 0; inbuf = inbuf.slice(i + 1)) {
      const { prompt } = JSON.parse(inbuf.slice(0, i));
      const body = JSON.stringify({ model: "fake-model", stream: true, messages: [{ role: "user", content: prompt }] });
      request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
        let buf = "";
        res.setEncoding("utf8");
        res.on("data", (c) => {
          buf += c;
          let out = "";
          for (let j; (j = buf.indexOf("\\n\\n")) >= 0; buf = buf.slice(j + 2)) {
            const ev = buf.slice(0, j);
            if (!ev.startsWith("data: {")) continue;
            const t = JSON.parse(ev.slice(6)).choices?.[0]?.delta?.content;
            if (typeof t === "string" && t !== "") out += JSON.stringify({ type: "assistant.delta", content: t }) + "\\n";
          }
          if (out !== "") s.write(out);
        });
        res.on("end", () => s.write(JSON.stringify({ type: "turn.completed" }) + "\\n"));
      }).end(body);
    }
  });
}).listen(path, () => process.stdout.write("ready\\n"));
`;

/** Line reader: `time` writes a line and measures until a matching line; unmatched lines stay in a backlog. */
class Lines {
  private buf = "";
  private backlog: Msg[] = [];
  private waiter: ((m: Msg) => boolean) | null = null;
  private resolve: (() => void) | null = null;
  constructor(readonly s: Socket) {
    s.setEncoding("utf8");
    s.on("data", (d: string) => {
      this.buf += d;
      let i: number;
      while ((i = this.buf.indexOf("\n")) >= 0) {
        const m = JSON.parse(this.buf.slice(0, i)) as Msg;
        this.buf = this.buf.slice(i + 1);
        if (this.waiter !== null && this.waiter(m)) {
          this.waiter = null;
          this.resolve?.();
        } else this.backlog.push(m);
      }
    });
  }
  /** Writes `line` and resolves with the ms until a line matching `pred` arrives (or is already in the backlog). */
  async time(line: string, pred: (m: Msg) => boolean): Promise<number> {
    const t0 = performance.now();
    const i = line === "" ? this.backlog.findIndex(pred) : -1;
    if (i >= 0) {
      this.backlog.splice(0, i + 1);
      return 0;
    }
    this.backlog = [];
    const done = new Promise<void>((r) => (this.resolve = r));
    this.waiter = pred;
    if (line !== "") this.s.write(line);
    await done;
    return performance.now() - t0;
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** CPU time (user + system) of process `pid` so far, in ms (clock ticks of 10 ms). */
const cpuMs = (pid: number): number => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
};
const round = (v: number): number => Math.round(v * 100) / 100;
const open = (path: string): Promise<Socket> =>
  new Promise((resolve, reject) => {
    const s = connect(path, () => resolve(s));
    s.once("error", reject);
  });

export default async function (): Promise<Figure[]> {
  // 20,000 deltas of about 10.75 bytes: a 215,000-byte answer.
  const rig = await startRig({
    fake: {
      defaultTurn: (api, json) =>
        lastUserText(json).startsWith("long answer")
          ? { steps: [{ text: "lorem ipsum dolor sit amet ".repeat(8000).slice(0, 215_000), chunks: 20_000 }], usage: { input: 10, output: 20_000 } }
          : defaultTurn(api, json),
    },
  });
  const figures: Figure[] = [];
  // The floor host and the daemon run side by side and their turns alternate (a floor turn, then Berth's), so a change
  // in the machine's load during the run reaches both alike instead of one phase.
  const sock = join(mkdtempSync(join(tmpdir(), "scv-floor-")), "echo.sock");
  const host = spawn(process.execPath, ["--input-type=module", "-e", ECHO_HOST, sock, `${rig.fake.baseUrl}/v1/chat/completions`], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise((r) => host.stdout.once("data", r));
  const f = new Lines(await open(sock));
  // SCV_BENCH_DAEMON_ENV: a JSON object of extra daemon environment (profiling: NODE_OPTIONS, BERTH_DEBUG_TIMING).
  const d = await startDaemon({ ...rig.env, ...(JSON.parse(process.env["SCV_BENCH_DAEMON_ENV"] ?? "{}") as Record<string, string>) });
  try {
    const c = new Lines(await open(d.socket));
    await c.time(JSON.stringify({ type: "initialize", request_id: "i", protocol_version: 3 }) + "\n", (m) => m.type === "initialized");
    let sid = "";
    await c.time(JSON.stringify({ type: "session.start", request_id: "s", cwd: tmpdir() }) + "\n", (m) => {
      if (m.type === "session.started") sid = m.session_id as string;
      return m.type === "queue.snapshot";
    });
    const floorFirst: number[] = [];
    const floorLong: number[] = [];
    const first: number[] = [];
    const long: number[] = [];
    const floorShort0 = cpuMs(host.pid!);
    const short0 = cpuMs(d.child.pid!);
    for (let i = 0; i < FIRST_SAMPLES; i++) {
      floorFirst.push(await f.time(JSON.stringify({ prompt: `hello ${i}` }) + "\n", (m) => m.type === "assistant.delta"));
      await f.time("", (m) => m.type === "turn.completed");
      const rid = `f${i}`;
      first.push(await c.time(JSON.stringify({ type: "turn.start", request_id: rid, session_id: sid, prompt: `hello ${i}` }) + "\n", (m) => m.type === "assistant.delta" && m.request_id === rid));
      await c.time("", (m) => m.request_id === rid && typeof m.type === "string" && m.type.startsWith("turn.") && m.type !== "turn.started");
    }
    const floorShortCpu = cpuMs(host.pid!) - floorShort0;
    const shortCpu = cpuMs(d.child.pid!) - short0;
    let floorCpu = 0;
    let cpu = 0;
    for (let i = 0; i < LONG_SAMPLES; i++) {
      const f0 = cpuMs(host.pid!);
      floorLong.push(await f.time(JSON.stringify({ prompt: LONG_PROMPT }) + "\n", (m) => m.type === "turn.completed"));
      floorCpu += cpuMs(host.pid!) - f0;
      const rid = `l${i}`;
      const c0 = cpuMs(d.child.pid!);
      long.push(await c.time(JSON.stringify({ type: "turn.start", request_id: rid, session_id: sid, prompt: LONG_PROMPT }) + "\n", (m) => m.request_id === rid && m.type === "turn.completed"));
      cpu += cpuMs(d.child.pid!) - c0;
      // A fresh context for the next sample (history would grow by 215 KB per turn otherwise).
      await c.time(JSON.stringify({ type: "session.clear", request_id: `c${i}`, session_id: sid }) + "\n", (m) => m.request_id === `c${i}`);
    }
    const peak = Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${d.child.pid}/status`, "utf8"))?.[1] ?? NaN) / 1024;
    c.s.destroy();
    const ff = median(floorFirst);
    const fl = median(floorLong);
    const bf = median(first);
    const bl = median(long);
    figures.push({ name: "scv.first_delta_ms.median", value: round(bf), unit: "ms", floor: round(ff), ratio: round(bf / ff), target: "<= 2x floor", ok: bf <= 2 * ff, samples: FIRST_SAMPLES });
    figures.push({ name: "scv.long_turn_ms.median", value: round(bl), unit: "ms", floor: round(fl), ratio: round(bl / fl), target: "<= 1.5x floor", ok: bl <= 1.5 * fl, samples: LONG_SAMPLES, deltas: 20000 });
    figures.push({ name: "scv.long_turn_cpu_ms.mean", value: round(cpu / LONG_SAMPLES), unit: "ms", floor: round(floorCpu / LONG_SAMPLES), ratio: round(cpu / Math.max(floorCpu, 1)), samples: LONG_SAMPLES });
    figures.push({ name: "scv.short_turn_cpu_ms.mean", value: round(shortCpu / FIRST_SAMPLES), unit: "ms", floor: round(floorShortCpu / FIRST_SAMPLES), ratio: round(shortCpu / Math.max(floorShortCpu, 1)), samples: FIRST_SAMPLES });
    figures.push({ name: "scv.peak_rss_mb", value: Math.round(peak * 10) / 10, unit: "MB", target: "<= 100", ok: peak <= 100 });
  } finally {
    f.s.destroy();
    host.kill();
    await d.stop();
    await rig.fake.close();
  }
  return figures;
}
