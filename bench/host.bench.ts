/**
 * Host benchmarks (issue 6): a spawned `berth daemon`, driven over its real sockets.
 *  - 10,000 dormant sessions registered over one v8 provider connection (≤ 2 s, daemon RSS ≤ 300 MB)
 *  - sequenced events fanned out to 10 AHP clients (≥ 50,000 events/s; with the daemon's CPU time for them)
 *  - /healthz latency and daemon RSS growth while one backend streams a 64 MiB turn (issue 18),
 *    beside the same probe against a bare Node HTTP server (the floor)
 *  - 160 turns × 256 KiB on one session: the last turns' round trip against the first ones', and
 *    database bytes written per byte of text (issue 18: the transcript was rewritten per persist)
 *  - MCP side-channel round trips through the host (≥ 5,000 req/s, p99 ≤ 5 ms; host-mcp.ts)
 */
import { spawn } from "node:child_process";
import { createConnection, type Socket } from "node:net";
import { existsSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import type { Figure } from "./run.js";
import { mcpRoundTrips } from "./host-mcp.js";
import { textOf } from "../src/core/json-text.js";

/** One JSON-lines frame from the daemon (read as untyped JSON; fields are narrowed where used). */
type Frame = Record<string, unknown>;

function asFrame(v: unknown): Frame | null {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Frame) : null;
}

/** The daemon's ready line: its string members (socket paths, URLs, token). */
function readyFields(line: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(asFrame(JSON.parse(line)) ?? {})) if (typeof v === "string") out[k] = v;
  return out;
}

const bin = fileURLToPath(new URL("../../bin/berth", import.meta.url));

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** CPU time (user + system, all threads) the process has used, in ms (Linux: /proc, USER_HZ 100). */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

class Lines {
  private buf = "";
  private waiters: Array<{ pred: (f: Frame) => boolean; resolve: (f: Frame) => void }> = [];
  onFrame: ((f: Frame) => void) | undefined;
  constructor(readonly sock: Socket) {
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => {
      this.buf += d;
      let start = 0;
      let i: number;
      const lines: string[] = [];
      while ((i = this.buf.indexOf("\n", start)) !== -1) {
        lines.push(this.buf.slice(start, i));
        start = i + 1;
      }
      this.buf = this.buf.slice(start);
      for (const line of lines) {
        const f = asFrame(JSON.parse(line));
        if (f === null) continue;
        this.onFrame?.(f);
        const w = this.waiters.findIndex((x) => x.pred(f));
        if (w !== -1) this.waiters.splice(w, 1)[0]!.resolve(f);
      }
    });
  }
  send(f: unknown): void {
    this.sock.write(JSON.stringify(f) + "\n");
  }
  wait(pred: (f: Frame) => boolean): Promise<Frame> {
    return new Promise((resolve) => this.waiters.push({ pred, resolve }));
  }
}

/** A bare Node HTTP server in a child process (the floor for the /healthz probe). */
async function bareServer(): Promise<{ url: string; close: () => void }> {
  const child = spawn(process.execPath, ["-e", "const s=require('http').createServer((q,r)=>r.end('{}')).listen(0,'127.0.0.1',()=>console.log(s.address().port))"], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<string>((r) => child.stdout.once("data", (d: Buffer) => r(d.toString().trim())));
  return { url: `http://127.0.0.1:${port}`, close: () => child.kill() };
}

/** Poll `<url>/healthz` back to back while `work` runs; the slowest answer in ms. */
async function healthzMaxMs(url: string, work: () => Promise<unknown>): Promise<number> {
  let done = false;
  let max = 0;
  const probe = (async () => {
    while (!done) {
      const t = performance.now();
      await (await fetch(`${url}/healthz`)).arrayBuffer();
      max = Math.max(max, performance.now() - t);
    }
  })();
  await work();
  done = true;
  await probe;
  return max;
}

export default async (): Promise<Figure[]> => {
  const home = mkdtempSync(join(tmpdir(), "bhb-"));
  const proc = spawn(process.execPath, [bin, "daemon"], { env: { ...process.env, BERTH_HOME: home }, stdio: ["ignore", "pipe", "inherit"] });
  const ready = await new Promise<Record<string, string>>((resolve, reject) => {
    let b = "";
    proc.stdout.on("data", (d: Buffer) => {
      b += d.toString();
      if (b.includes("\n")) resolve(readyFields(b.split("\n")[0]!));
    });
    proc.once("exit", (c) => reject(new Error(`daemon exited ${c}`)));
  });
  const figures: Figure[] = [];
  try {
    const sock = createConnection(ready.backend_socket!);
    await new Promise((r) => sock.once("connect", r));
    const be = new Lines(sock);
    be.send({ type: "provider_hello", protocolVersion: 8, instanceId: "bench", providers: [{ id: "bench", displayName: "Bench" }] });
    await be.wait((f) => f.type === "provider_registered");

    // 1. 10,000 dormant sessions over one v8 provider connection.
    const N = 10_000;
    let registered = 0;
    let lastSession = "";
    let lastChat = "";
    let lastId = "";
    const allDone = new Promise<void>((resolve) => {
      be.onFrame = (f) => {
        if (f.type === "session_registered" && ++registered === N) {
          lastSession = textOf(f.session);
          lastChat = textOf(f.chat);
          lastId = textOf(f.backendConnectionId);
          resolve();
        }
      };
    });
    const t0 = performance.now();
    let batch = "";
    for (let i = 0; i < N; i++) {
      batch += JSON.stringify({
        type: "register_session",
        requestId: `r${i}`,
        hello: { protocolVersion: 8, instanceId: `i${i}`, sourceId: `source-${i}`, provider: "bench", title: `Dormant ${i}`, cwd: "/workspace" },
      }) + "\n";
      if (batch.length > 256 * 1024) {
        sock.write(batch);
        batch = "";
      }
    }
    sock.write(batch);
    await allDone;
    const regMs = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 200)); // let the write-behind commit land before sampling RSS
    const rss = rssMb(proc.pid!);
    figures.push({ name: "host.register_10k_dormant_sessions_ms", value: Math.round(regMs), unit: "ms", target: "<= 2000", ok: regMs <= 2000 });
    figures.push({ name: "host.daemon_rss_after_10k_sessions_mb", value: Math.round(rss), unit: "MB", target: "<= 300", ok: rss <= 300 });

    // 2. Fan-out of sequenced events to 10 AHP clients.
    const CLIENTS = Number(process.env.HOST_BENCH_CLIENTS ?? 10);
    const EVENTS = 50_000;
    const counts = new Array<number>(CLIENTS).fill(0);
    const clients: WebSocket[] = [];
    for (let i = 0; i < CLIENTS; i++) {
      const ws = new WebSocket(ready.ahp!, { headers: { authorization: `Bearer ${ready.token}` } });
      await new Promise((r) => ws.once("open", r));
      let inited = false;
      await new Promise<void>((resolve) => {
        ws.on("message", () => {
          if (!inited) {
            inited = true;
            return resolve();
          }
          counts[i]!++;
        });
        ws.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { channel: "ahp-root://", protocolVersions: ["1.0.0"], clientId: `b${i}`, initialSubscriptions: [lastChat] } }));
      });
      clients.push(ws);
    }
    be.onFrame = undefined;
    let acked = 0;
    be.onFrame = (f) => {
      if (f.type === "event_ack" && typeof f.sequence === "number") acked = f.sequence;
    };
    be.send({ type: "sequenced_event", session: lastSession, sequence: 1, event: { type: "agent_started", turnId: "bench" }, backendConnectionId: lastId });
    await new Promise<void>((r) => {
      const t = setInterval(() => {
        if (acked >= 1 && counts.every((c) => c >= 1)) {
          clearInterval(t);
          r();
        }
      }, 2);
    });
    const base = counts.slice();
    const cpu1 = cpuMs(proc.pid!);
    const t1 = performance.now();
    let out = "";
    for (let s = 2; s < EVENTS + 2; s++) {
      out += JSON.stringify({ type: "sequenced_event", session: lastSession, sequence: s, event: { type: "text_delta", text: "x" }, backendConnectionId: lastId }) + "\n";
      if (out.length > 256 * 1024) {
        if (!sock.write(out)) await new Promise((r) => sock.once("drain", r));
        out = "";
      }
    }
    sock.write(out);
    await new Promise<void>((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error(`fan-out stalled at ${counts.join(",")}`)), 60_000);
      const t = setInterval(() => {
        if (counts.every((c, i) => c - base[i]! >= EVENTS)) {
          clearInterval(t);
          clearTimeout(deadline);
          resolve();
        }
      }, 2);
    });
    const fanMs = performance.now() - t1;
    const rate = EVENTS / (fanMs / 1000);
    // The daemon's CPU time for the burst reads the same on a busy machine, where the rate does not.
    const fanCpu = cpuMs(proc.pid!) - cpu1;
    figures.push({ name: "host.fanout_10_clients_events_per_s", value: Math.round(rate), unit: "events/s", target: ">= 50000", ok: rate >= 50_000, deliveries_per_s: Math.round(rate * CLIENTS), daemon_cpu_ms: fanCpu });
    for (const ws of clients) ws.close();
    sock.destroy();

    // 3. Responsiveness while one backend streams a 64 MiB turn (per-turn text is bounded).
    const bare = await bareServer();
    const floorMs = await healthzMaxMs(bare.url, () => new Promise((r) => setTimeout(r, 1500)));
    bare.close();
    const hs = createConnection(ready.backend_socket!);
    await new Promise((r) => hs.once("connect", r));
    const big = new Lines(hs);
    big.send({ type: "hello", protocolVersion: 1, instanceId: "huge", provider: "bench", sourceId: "huge-turn" });
    const reg = await big.wait((f) => f.type === "registered");
    const rss0 = rssMb(proc.pid!);
    const chunk = JSON.stringify({ type: "text_delta", text: "z".repeat(1024 * 1024) });
    const maxMs = await healthzMaxMs(ready.http!, async () => {
      big.send({ type: "event", session: reg.session, event: { type: "user_message", text: "go" } });
      for (let i = 0; i < 64; i++) if (!hs.write(`{"type":"event","session":${JSON.stringify(reg.session)},"event":${chunk}}\n`)) await new Promise((r) => hs.once("drain", r));
      big.send({ type: "ping", id: "done" });
      await big.wait((f) => f.type === "pong");
    });
    const grow = rssMb(proc.pid!) - rss0;
    figures.push({ name: "host.healthz_max_ms_during_64mib_turn", value: Math.round(maxMs), unit: "ms", floor_bare_node_ms: Math.round(floorMs), target: "<= 250", ok: maxMs <= 250 });
    figures.push({ name: "host.rss_growth_mb_during_64mib_turn", value: Math.round(grow), unit: "MB", target: "<= 100", ok: grow <= 100 });
    hs.destroy();

    // 4. 160 turns of 256 KiB each on one session: a turn's round trip must not grow with the
    //    transcript (persistence appends one row per turn), and bytes written stay near the text.
    const ts = createConnection(ready.backend_socket!);
    await new Promise((r) => ts.once("connect", r));
    const many = new Lines(ts);
    many.send({ type: "hello", protocolVersion: 1, instanceId: "many", provider: "bench", sourceId: "many-turns" });
    const mreg = await many.wait((f) => f.type === "registered");
    const dbBytes = () => ["host.db", "host.db-wal"].reduce((n, f) => n + (existsSync(join(home, "host", f)) ? statSync(join(home, "host", f)).size : 0), 0);
    const db0 = dbBytes();
    const text = JSON.stringify({ type: "text_delta", text: "t".repeat(256 * 1024) });
    const trips: number[] = [];
    for (let i = 0; i < 160; i++) {
      const t = performance.now();
      ts.write(`{"type":"event","session":${JSON.stringify(mreg.session)},"event":{"type":"user_message","text":"q${i}"}}\n`);
      ts.write(`{"type":"event","session":${JSON.stringify(mreg.session)},"event":${text}}\n`);
      ts.write(`{"type":"event","session":${JSON.stringify(mreg.session)},"event":{"type":"settled","cancelled":false}}\n`);
      many.send({ type: "ping", id: `m${i}` });
      await many.wait((f) => f.type === "pong" && f.id === `m${i}`);
      trips.push(performance.now() - t);
    }
    // The last write-behind commit lands on the next event-loop turn; one more round trip covers it.
    many.send({ type: "ping", id: "flush" });
    await many.wait((f) => f.type === "pong" && f.id === "flush");
    await new Promise((r) => setTimeout(r, 200));
    const avg = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
    const first = avg(trips.slice(0, 10));
    const last = avg(trips.slice(-10));
    const written = (dbBytes() - db0) / (160 * 256 * 1024);
    figures.push({ name: "host.turn_round_trip_ms_at_160x256kib", value: Math.round(last), unit: "ms", first_10_turns_ms: Math.round(first), target: "<= 3 x first turns", ok: last <= 3 * Math.max(first, 5) });
    figures.push({ name: "host.db_bytes_per_text_byte_160x256kib", value: Math.round(written * 100) / 100, unit: "ratio", target: "<= 3", ok: written <= 3 });
    ts.destroy();

    // 5. MCP side-channel round trips (issue 15), beside a bare WebSocket echo (host-mcp.ts).
    figures.push(...(await mcpRoundTrips(ready)));
  } finally {
    proc.kill("SIGTERM");
    await new Promise((r) => proc.once("exit", r));
  }
  return figures;
};
