/**
 * Turn figures (issue 4), against the spawned service and an in-bench loopback SSE provider (Chat Completions):
 * - turns.delta_latency_ms.p99 (p50, p90, p999, max alongside): the provider writes one delta every 2 ms, LAT_TURNS
 *   turns of LAT_DELTAS deltas (3,200 samples, so p99 is the 32nd-worst, not a single outlier). Latency = the bench's
 *   `performance.now()` when the service's stdout chunk carrying that delta event is read (the first 'data'
 *   listener, before any parsing) − `performance.now()` right before the SSE chunk is handed to the socket. One
 *   process, one clock; the figure includes both loopback hops and the service's parse → runtime → project →
 *   encode → write path. `floor_p50`/`floor_p99`: the same measurement through a minimal relay child (node:http SSE
 *   in, one stdout line per event out), taken just before — what the machine's two hops cost at the time.
 * - turns.deltas_per_s: 1-byte deltas up to the 16 KiB text bound, several turns back to back, counted from the
 *   first delta to the terminal of each turn (the provider writes as fast as the socket takes it).
 * - turns.idle_rss_mb: the idle service's RSS after initialize (lazy families loaded in idle time);
 *   turns.rss_after_turns_mb (informational): RSS after the runs above, and after as many turns again
 *   (`rss_after_2x_mb`): equal values mean the heap is reused, not retained per turn.
 */
import { spawn } from "node:child_process";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { BERTH_BIN } from "../test/helpers/paths.js";
import { ServiceProcess } from "../test/helpers/service-process.js";
import { fakeSettings } from "../test/turns/helpers.js";
import type { Figure } from "./run.js";

const LAT_TURNS = 2;
const LAT_DELTAS = 1600;
const TP_TURNS = 6;

const chunk = (content: string): string =>
  `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const END =
  `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n` +
  `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })}\n\n` +
  "data: [DONE]\n\n";

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function writeAll(res: ServerResponse, s: string): Promise<void> {
  if (!res.write(s)) await new Promise((r) => res.once("drain", r));
}

const round = (v: number | undefined): number => Math.round((v ?? NaN) * 100) / 100;

export default async function (): Promise<Figure[]> {
  /** Delta text → write time, for the latency turns (texts are unique across them). */
  const writes = new Map<string, number>();
  let mode: "floor" | "latency" | "throughput" = "floor";
  let latTurn = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      void (async () => {
        if (mode !== "throughput") {
          const t = mode === "floor" ? "f" : latTurn++;
          for (let i = 0; i < LAT_DELTAS; i++) {
            const line = chunk(`${t}.${i};`);
            writes.set(`${t}.${i};`, performance.now());
            await writeAll(res, line);
            await new Promise((r) => setTimeout(r, 2));
          }
        } else {
          let buf = "";
          for (let i = 0; i < 16384; i++) {
            buf += chunk("a");
            if (buf.length > 32 * 1024) {
              await writeAll(res, buf);
              buf = "";
            }
          }
          await writeAll(res, buf);
        }
        res.end(END);
      })();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // BENCH_SERVICE_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"): node flags for the service (profiling).
  const flags = (process.env.BENCH_SERVICE_NODE_ARGS ?? "").split(" ").filter((f) => f !== "");
  const [nodeBin, ...nodeArgs] = flags;
  const svc = new ServiceProcess(nodeBin !== undefined ? { bin: nodeBin, args: [...nodeArgs, BERTH_BIN, "service"] } : {});
  mkdirSync(svc.home, { recursive: true });
  writeFileSync(join(svc.home, "settings.json"), JSON.stringify(fakeSettings(base)));
  // Read timestamps: taken when a stdout chunk arrives, before anything parses it.
  const reads: Array<[number, string]> = [];
  let tail = "";
  const onData = (d: string): void => {
    const now = performance.now();
    const text = tail + d;
    const cut = text.lastIndexOf("\n") + 1;
    tail = text.slice(cut);
    if (cut > 0) reads.push([now, text.slice(0, cut)]);
  };
  const latencies = (): number[] => {
    const lat: number[] = [];
    for (const [at, text] of reads) {
      for (const line of text.split("\n")) {
        if (!line.includes('"turn.assistant_delta"')) continue;
        const w = writes.get((JSON.parse(line) as { payload: { text: string } }).payload.text);
        if (w !== undefined) lat.push(at - w);
      }
    }
    reads.length = 0;
    return lat.sort((a, b) => a - b);
  };
  const q = (lat: number[], p: number): number | undefined => lat[Math.min(lat.length - 1, Math.floor(lat.length * p))];
  const figures: Figure[] = [];
  try {
    await svc.initialize();
    await new Promise((r) => setTimeout(r, 1000));
    const idle = rssMb(svc.child.pid!);
    figures.push({ name: "turns.idle_rss_mb", value: Math.round(idle * 10) / 10, unit: "MB", target: "<= 80", ok: idle <= 80 });

    await relayFloor(base, onData);
    const floor = latencies();
    mode = "latency";
    svc.child.stdout.prependListener("data", onData);
    let sid: string | undefined;
    for (let t = 0; t < LAT_TURNS; t++) {
      const r = await svc.request("turn.start", { prompt: "x" }, sid !== undefined ? { session_id: sid } : {}, `lat${t}`);
      sid = (r.payload as { session_id: string }).session_id;
      await waitTerminal(svc, svc.lines.length - 1);
    }
    svc.child.stdout.off("data", onData);
    const lat = latencies();
    const p99 = q(lat, 0.99) ?? NaN;
    figures.push({
      name: "turns.delta_latency_ms.p99",
      value: round(p99),
      unit: "ms",
      target: "<= 2",
      ok: p99 <= 2 && lat.length === LAT_TURNS * LAT_DELTAS,
      samples: lat.length,
      p50: round(q(lat, 0.5)),
      p90: round(q(lat, 0.9)),
      p999: round(q(lat, 0.999)),
      max: round(lat.at(-1)),
      floor_p50: round(q(floor, 0.5)),
      floor_p99: round(q(floor, 0.99)),
    });

    // Throughput: several turns of 16,384 one-byte deltas.
    mode = "throughput";
    const tp = await throughputTurns(svc, TP_TURNS);
    const rate = tp.deltas / (tp.ms / 1000);
    figures.push({ name: "turns.deltas_per_s", value: Math.round(rate), unit: "deltas/s", target: ">= 50000", ok: rate >= 50_000, deltas: tp.deltas, turns: TP_TURNS });

    await new Promise((r) => setTimeout(r, 500));
    const rss = rssMb(svc.child.pid!);
    await throughputTurns(svc, TP_TURNS + LAT_TURNS);
    await new Promise((r) => setTimeout(r, 500));
    const rss2 = rssMb(svc.child.pid!);
    figures.push({ name: "turns.rss_after_turns_mb", value: Math.round(rss * 10) / 10, unit: "MB", turns: TP_TURNS + LAT_TURNS, rss_after_2x_mb: Math.round(rss2 * 10) / 10 });
  } finally {
    svc.end();
    await svc.exited;
    await new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  }
  return figures;
}

/** A minimal relay: node:http SSE in, one stdout line per event out. */
const RELAY = `
import { request } from "node:http";
request(process.argv[1], { method: "POST" }, (res) => {
  let buf = "";
  res.setEncoding("utf8");
  res.on("data", (d) => {
    buf += d;
    let out = "";
    for (let i; (i = buf.indexOf("\\n\\n")) >= 0; buf = buf.slice(i + 2)) {
      const ev = buf.slice(0, i);
      if (ev.startsWith("data: {")) out += JSON.stringify({ event: "turn.assistant_delta", payload: { text: JSON.parse(ev.slice(6)).choices[0]?.delta?.content } }) + "\\n";
    }
    if (out !== "") process.stdout.write(out);
  });
  res.on("end", () => process.exit(0));
}).end();
`;

/** Runs one latency stream through the relay (the server must be in "floor" mode), its stdout read by `onData`. */
async function relayFloor(base: string, onData: (d: string) => void): Promise<void> {
  const child = spawn(process.execPath, ["--input-type=module", "-e", RELAY, `${base}/v1/chat/completions`], { stdio: ["ignore", "pipe", "inherit"] });
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", onData);
  await new Promise((r) => child.on("close", r));
}

/** Waits for the next `turn.terminal` line at or after index `from`. */
async function waitTerminal(svc: ServiceProcess, from: number): Promise<void> {
  for (let idx = from; ; ) {
    await svc.waitLines(idx + 1, 60_000);
    for (; idx < svc.lines.length; idx++) if (svc.lines[idx]!.includes('"turn.terminal"')) return;
  }
}

async function throughputTurns(svc: ServiceProcess, turns: number): Promise<{ deltas: number; ms: number }> {
  let deltas = 0;
  let ms = 0;
  for (let t = 0; t < turns; t++) {
    const start = svc.lines.length;
    svc.send({ protocol_version: 1, kind: "request", request_id: `tp${t}`, method: "turn.start", payload: { prompt: "x" } });
    let first = NaN;
    let idx = start;
    for (let done = false; !done; ) {
      await svc.waitLines(idx + 1, 60_000);
      for (; idx < svc.lines.length; idx++) {
        const l = svc.lines[idx]!;
        if (l.includes('"turn.assistant_delta"')) {
          if (Number.isNaN(first)) first = performance.now();
          deltas++;
        } else if (l.includes('"turn.terminal"')) done = true;
      }
    }
    ms += performance.now() - first;
  }
  return { deltas, ms };
}
