/**
 * A stdio MCP server's long answer through Berth's MCP client, beside a floor measured in the same run:
 * - mcp.long_line_ms.median: a tool call (Berth's `Tool.run`, through the SDK client and Berth's stdio transport)
 *   whose result is one JSON-RPC line of 8 MiB, call → result. Median of SAMPLES calls, each after one of the floor's.
 * The floor is a minimal Node reader of the same server's same bytes: another process of the same server script, the
 *   same request written to its stdin, its stdout chunks kept until the newline, joined once, decoded and
 *   `JSON.parse`d. The server builds the answer once at start, so each call costs it one write. Target: ≤ 2× floor.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { Readable, Writable } from "node:stream";
import { connectMcpServers } from "../src/runtime/tools/mcp.js";
import type { Figure } from "./run.js";

const SAMPLES = Number(process.env["MCP_LONG_SAMPLES"] ?? 9);
const LINE_BYTES = 8 * 1024 * 1024;

/**
 * A hand-written stdio MCP server with one tool, `long`: its answer is one line of exactly LINE_BYTES bytes (newline
 * excluded) for a one-digit request id, text of short lines, prepared once.
 */
const SERVER = String.raw`
const size = Number(process.argv[2]);
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
const head = '{"jsonrpc":"2.0","id":';
const mid = ',"result":{"content":[{"type":"text","text":"';
const tail = '"}]}}';
const fill = size - head.length - 1 - mid.length - tail.length;
const unit = "line of a long answer: 0123456789 abcdefghij\\n";
const text = Buffer.from(unit.repeat(Math.ceil(fill / unit.length)).slice(0, fill).replace(/\\$/, "x"));
require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const m = JSON.parse(line);
  if (m.method === "initialize") {
    send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "long", version: "1" } } });
  } else if (m.method === "tools/list") {
    send({ id: m.id, result: { tools: [{ name: "long", inputSchema: { type: "object" } }] } });
  } else if (m.method === "tools/call") {
    process.stdout.write(Buffer.concat([Buffer.from(head + JSON.stringify(m.id) + mid), text, Buffer.from(tail + "\n")]));
  }
});
`;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

const round = (x: number) => Math.round(x * 10) / 10;

/** The floor: one request written, the answer line read as chunks, joined once and parsed; its time in ms. */
function floorCall(child: { stdin: Writable; stdout: Readable }, id: number): Promise<{ ms: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const t = performance.now();
    const onData = (chunk: Buffer): void => {
      const nl = chunk.indexOf(0x0a);
      chunks.push(nl === -1 ? chunk : chunk.subarray(0, nl));
      if (nl === -1) return;
      child.stdout.off("data", onData);
      const line = Buffer.concat(chunks);
      const msg = JSON.parse(line.toString("utf8")) as { id: number };
      if (msg.id !== id) reject(new Error(`floor: answer to ${msg.id}, not ${id}`));
      resolve({ ms: performance.now() - t, bytes: line.length });
    };
    child.stdout.on("data", onData);
    child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "long", arguments: {} } }) + "\n");
  });
}

export default async function mcpBench(): Promise<Figure[]> {
  const dir = mkdtempSync(join(tmpdir(), "berth-bench-mcp-"));
  const script = join(dir, "long-server.cjs");
  writeFileSync(script, SERVER);
  const floorServer = spawn(process.execPath, [script, String(LINE_BYTES)], { stdio: ["pipe", "pipe", "inherit"] });
  const conn = await connectMcpServers({ long: { command: process.execPath, args: [script, String(LINE_BYTES)], env: {} } }, { cwd: dir });
  try {
    const tool = conn.tools[0];
    if (tool === undefined) throw new Error(`the server did not start: ${conn.servers[0]?.error ?? "no tools"}`);
    const ctx = { cwd: dir, signal: new AbortController().signal, onProgress: () => undefined };
    const berth: number[] = [];
    const floor: number[] = [];
    let lineBytes = 0;
    // One warm-up call each (the server's first answer, the JIT), then the samples, alternating.
    for (let k = 0; k <= SAMPLES; k++) {
      const f = await floorCall(floorServer, k % 10);
      lineBytes = f.bytes;
      const t = performance.now();
      const r = await tool.run({}, ctx);
      const ms = performance.now() - t;
      if (r.isError) throw new Error(`the call failed: ${r.content}`);
      if (k === 0) continue;
      floor.push(f.ms);
      berth.push(ms);
    }
    const v = median(berth);
    const fl = median(floor);
    return [
      {
        name: "mcp.long_line_ms.median",
        value: round(v),
        unit: "ms",
        floor: round(fl),
        ratio: Math.round((v / fl) * 100) / 100,
        target: "<= 2x floor",
        ok: v <= 2 * fl,
        line_bytes: lineBytes,
        samples: SAMPLES,
      },
    ];
  } finally {
    await conn.close();
    floorServer.stdin.end();
    rmSync(dir, { recursive: true, force: true });
  }
}
