/**
 * MCP side-channel round trips through a running daemon (issue 15): AHP client → host →
 * backend (v5 session, replying at once) → host → AHP client. Figures: throughput with 16
 * requests in flight on each of 4 connections (the per-connection bound), and p99 of sequential
 * round trips. The floor is the same traffic against a bare `ws` echo server in a child process
 * (one loopback WebSocket round trip, no host).
 */
import { spawn } from "node:child_process";
import { createConnection } from "node:net";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { wsText } from "../src/transport/ws-text.js";
import type { Figure } from "./run.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const WINDOW = 16;
const CONNS = 4;
const TOTAL = 20_000;
const SEQUENTIAL = 2_000;

interface Target {
  url: string;
  headers: Record<string, string>;
  channel: string;
  /** Run after open (AHP needs initialize). */
  prepare(ws: WebSocket): Promise<void>;
}

function open(t: Target): Promise<WebSocket> {
  const ws = new WebSocket(t.url, { headers: t.headers, perMessageDeflate: false });
  return new Promise((resolve, reject) => {
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}

/** Round trips on one socket: `n` requests with `window` in flight; per-request latencies in ms. */
function drive(ws: WebSocket, channel: string, n: number, window: number): Promise<number[]> {
  const sent = new Map<number, number>();
  const lat: number[] = [];
  let next = 0;
  return new Promise((resolve, reject) => {
    const send = () => {
      const id = next++;
      sent.set(id, performance.now());
      ws.send(`{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"i":${id}}},"channel":${JSON.stringify(channel)}}`);
    };
    ws.on("message", (d) => {
      const m = JSON.parse(wsText(d)) as { id?: number; error?: unknown };
      if (typeof m.id !== "number" || !sent.has(m.id)) return;
      if (m.error) return reject(new Error(`MCP error: ${JSON.stringify(m.error)}`));
      lat.push(performance.now() - sent.get(m.id)!);
      sent.delete(m.id);
      if (next < n) send();
      else if (sent.size === 0) resolve(lat);
    });
    for (let i = 0; i < Math.min(window, n); i++) send();
  });
}

async function measure(t: Target): Promise<{ rps: number; p99: number; p50: number; meanMs: number }> {
  const socks = await Promise.all(Array.from({ length: CONNS }, () => open(t)));
  for (const ws of socks) await t.prepare(ws);
  const t0 = performance.now();
  await Promise.all(socks.map((ws) => drive(ws, t.channel, TOTAL / CONNS, WINDOW)));
  const rps = TOTAL / ((performance.now() - t0) / 1000);
  for (const ws of socks) ws.removeAllListeners("message");
  const t1 = performance.now();
  const seq = (await drive(socks[0]!, t.channel, SEQUENTIAL, 1)).sort((a, b) => a - b);
  const meanMs = (performance.now() - t1) / SEQUENTIAL;
  for (const ws of socks) ws.close();
  return { rps, p99: seq[Math.floor(seq.length * 0.99)]!, p50: seq[Math.floor(seq.length / 2)]!, meanMs };
}

async function echoServer(): Promise<{ url: string; close: () => void }> {
  const src =
    "const {WebSocketServer}=require('ws');const s=new WebSocketServer({port:0,host:'127.0.0.1',perMessageDeflate:false});" +
    "s.on('listening',()=>console.log(s.address().port));" +
    "s.on('connection',w=>w.on('message',d=>{const m=JSON.parse(d.toString());w.send(JSON.stringify({jsonrpc:'2.0',id:m.id,result:{content:[]},channel:m.channel}))}))";
  const child = spawn(process.execPath, ["-e", src], { cwd: root, stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<string>((r) => child.stdout.once("data", (d: Buffer) => r(d.toString().trim())));
  return { url: `ws://127.0.0.1:${port}`, close: () => child.kill() };
}

/** MCP round-trip figures against the daemon described by its ready line. */
export async function mcpRoundTrips(ready: Record<string, string>): Promise<Figure[]> {
  // A v5 session backend that answers every MCP request at once.
  const sock = createConnection(ready.backend_socket!);
  await new Promise((r) => sock.once("connect", r));
  sock.setEncoding("utf8");
  let buf = "";
  let registered: ((f: Record<string, string>) => void) | undefined;
  const reg = new Promise<Record<string, string>>((r) => (registered = r));
  sock.on("data", (d: string) => {
    buf += d;
    let i: number;
    let out = "";
    while ((i = buf.indexOf("\n")) !== -1) {
      const f = JSON.parse(buf.slice(0, i)) as Record<string, string>;
      buf = buf.slice(i + 1);
      if (f.type === "registered") registered?.(f);
      else if (f.type === "mcp_request") out += `{"type":"mcp_response","requestId":"${f.requestId}","message":{"jsonrpc":"2.0","id":"${f.requestId}","result":{"content":[]}}}\n`;
    }
    if (out) sock.write(out);
  });
  sock.write(
    JSON.stringify({
      type: "hello",
      protocolVersion: 5,
      instanceId: "mcp-bench",
      provider: "bench",
      sourceId: "mcp-bench",
      mcpServers: [{ id: "echo", name: "Echo", capabilities: { serverTools: true } }],
    }) + "\n",
  );
  const { session } = await reg;
  const headers = { authorization: `Bearer ${ready.token}` };
  const probe = await open({ url: ready.ahp!, headers, channel: "", prepare: () => Promise.resolve() });
  type InitResult = { result: { snapshots: Array<{ state: { customizations: Array<{ channel: string }> } }> } };
  const snap = await new Promise<InitResult>((resolve) => {
    probe.once("message", (d) => resolve(JSON.parse(wsText(d)) as InitResult));
    probe.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { channel: "ahp-root://", protocolVersions: ["1.0.0"], clientId: "mcp-probe", initialSubscriptions: [session] } }));
  });
  probe.close();
  const channel = snap.result.snapshots[0]!.state.customizations[0]!.channel;
  let n = 0;
  const host = await measure({
    url: ready.ahp!,
    headers,
    channel,
    prepare: (ws) =>
      new Promise((resolve) => {
        ws.once("message", () => resolve());
        ws.send(JSON.stringify({ jsonrpc: "2.0", id: "init", method: "initialize", params: { channel: "ahp-root://", protocolVersions: ["1.0.0"], clientId: `mcp-bench-${n++}` } }));
      }),
  });
  sock.destroy();
  const echo = await echoServer();
  const floor = await measure({ url: echo.url, headers: {}, channel: "mcp://floor", prepare: () => Promise.resolve() });
  echo.close();
  return [
    {
      name: "host.mcp_round_trips_per_s",
      value: Math.round(host.rps),
      unit: "req/s",
      floor_ws_echo_per_s: Math.round(floor.rps),
      in_flight: WINDOW * CONNS,
      target: ">= 5000",
      ok: host.rps >= 5000,
    },
    {
      name: "host.mcp_round_trip_p99_ms",
      value: Math.round(host.p99 * 100) / 100,
      unit: "ms",
      p50_ms: Math.round(host.p50 * 100) / 100,
      mean_ms: Math.round(host.meanMs * 100) / 100,
      floor_ws_echo_p50_ms: Math.round(floor.p50 * 100) / 100,
      floor_ws_echo_p99_ms: Math.round(floor.p99 * 100) / 100,
      target: "<= 5",
      ok: host.p99 <= 5,
    },
  ];
}
