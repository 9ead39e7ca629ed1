/**
 * Turn figures (issue 4), against the spawned service and an in-bench loopback SSE provider (Chat Completions):
 * - turns.delta_latency_ms.p99: provider writes one delta every 2 ms; latency = stdout event arrival − SSE write
 *   (both on this process's clock; includes both loopback hops and the service's parse/project/encode path).
 * - turns.deltas_per_s: 1-byte deltas up to the 16 KiB text bound, several turns back to back, counted from the
 *   first delta to the terminal of each turn (the provider writes as fast as the socket takes it).
 * - turns.idle_rss_mb: the idle service's RSS after initialize (lazy families loaded in idle time);
 *   turns.rss_after_turns_mb (informational): RSS after the runs above (V8 keeps its grown heap).
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { ServiceProcess } from "../test/helpers/service-process.js";
import { fakeSettings } from "../test/turns/helpers.js";
import type { Figure } from "./run.js";

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

export default async function (): Promise<Figure[]> {
  const writes = new Map<string, number>();
  let mode: "latency" | "throughput" = "latency";
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      void (async () => {
        if (mode === "latency") {
          for (let i = 0; i < 400; i++) {
            const text = `d${i}.`;
            writes.set(text, performance.now());
            await writeAll(res, chunk(text));
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
  const svc = new ServiceProcess();
  mkdirSync(svc.home, { recursive: true });
  writeFileSync(join(svc.home, "settings.json"), JSON.stringify(fakeSettings(base)));
  const figures: Figure[] = [];
  try {
    await svc.initialize();
    await new Promise((r) => setTimeout(r, 1000));
    const idle = rssMb(svc.child.pid!);
    figures.push({ name: "turns.idle_rss_mb", value: Math.round(idle * 10) / 10, unit: "MB", target: "<= 80", ok: idle <= 80 });
    // Latency: match each delta event to its write time.
    const from = svc.lines.length;
    svc.send({ protocol_version: 1, kind: "request", request_id: "lat", method: "turn.start", payload: { prompt: "x" } });
    const lat: number[] = [];
    let seen = from;
    for (;;) {
      await svc.waitLines(seen + 1, 30_000);
      const now = performance.now();
      for (; seen < svc.lines.length; seen++) {
        const m = JSON.parse(svc.lines[seen]!) as { event?: string; payload?: { text?: string } };
        if (m.event === "turn.assistant_delta") {
          const w = writes.get(m.payload!.text!);
          if (w !== undefined) lat.push(now - w);
        }
        if (m.event === "turn.terminal") break;
      }
      if (svc.lines.slice(from).some((l) => l.includes('"turn.terminal"'))) break;
    }
    lat.sort((a, b) => a - b);
    const p99 = lat[Math.floor(lat.length * 0.99)] ?? NaN;
    figures.push({ name: "turns.delta_latency_ms.p99", value: Math.round(p99 * 100) / 100, unit: "ms", target: "<= 2", ok: p99 <= 2, samples: lat.length, p50: Math.round((lat[lat.length >> 1] ?? NaN) * 100) / 100 });

    // Throughput: several turns of 16,384 one-byte deltas.
    mode = "throughput";
    let deltas = 0;
    let streamingMs = 0;
    const turns = 6;
    for (let t = 0; t < turns; t++) {
      const start = svc.lines.length;
      svc.send({ protocol_version: 1, kind: "request", request_id: `tp${t}`, method: "turn.start", payload: { prompt: "x" } });
      let first = NaN;
      let idx = start;
      for (;;) {
        await svc.waitLines(idx + 1, 60_000);
        let done = false;
        for (; idx < svc.lines.length; idx++) {
          const l = svc.lines[idx]!;
          if (l.includes('"turn.assistant_delta"')) {
            if (Number.isNaN(first)) first = performance.now();
            deltas++;
          } else if (l.includes('"turn.terminal"')) done = true;
        }
        if (done) break;
      }
      streamingMs += performance.now() - first;
    }
    const rate = deltas / (streamingMs / 1000);
    figures.push({ name: "turns.deltas_per_s", value: Math.round(rate), unit: "deltas/s", target: ">= 50000", ok: rate >= 50_000, deltas, turns });

    await new Promise((r) => setTimeout(r, 500));
    const rss = rssMb(svc.child.pid!);
    figures.push({ name: "turns.rss_after_turns_mb", value: Math.round(rss * 10) / 10, unit: "MB" });
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
