/**
 * The bound on one MCP message line from a server's stdout: exactly the bound passes, one byte more stops that server
 * (`failed`, the error naming the bound, its process gone, its calls `unavailable`) while the others keep working; an
 * endless line during start-up is a start failure. The servers are real child processes (scripts in a temp dir).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { MCP_MAX_LINE_BYTES, connectMcpServers } from "../../src/runtime/tools/mcp.js";
import { JsonLineReader } from "../../src/runtime/tools/mcp-transport.js";
import { createToolRegistry } from "../../src/runtime/tools/registry.js";
import type { Tool } from "../../src/runtime/types.js";
import { call, isAlive, makeCtx, tempDir, waitFor } from "./helpers.js";
import { pidExists } from "../helpers/run-child.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));

/**
 * A hand-written stdio MCP server with one tool, `line {bytes, newline?, piece?}`: its answer is one JSON-RPC line of
 * exactly `bytes` bytes, ended by a newline unless `newline` is false, written in writes of `piece` bytes when given.
 * `flood` as first argument: before speaking MCP, writes its pid to the second argument, then an endless line without
 * a newline, as fast as the pipe drains (a plain `for (;;) write` would stall itself: its writes queue in its own
 * memory, the loop never lets them out). `stubborn` as first argument: a server that stays up once its stdin ends and
 * ignores SIGTERM (only SIGKILL stops it), saying each on stderr.
 */
const SERVER = String.raw`
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
if (process.argv[2] === "flood") {
  writeFileSync(process.argv[3], String(process.pid));
  const b = "x".repeat(1 << 20);
  const pump = () => {
    while (process.stdout.write(b));
    process.stdout.once("drain", pump);
  };
  pump();
} else {
  if (process.argv[2] === "stubborn") process.on("SIGTERM", () => process.stderr.write("stubborn: ignoring SIGTERM\n"));
  const reply = (id, result) => JSON.stringify({ jsonrpc: "2.0", id, result });
  const props = { bytes: { type: "integer" }, newline: { type: "boolean" }, piece: { type: "integer" } };
  const tool = { name: "line", inputSchema: { type: "object", properties: props, required: ["bytes"] } };
  for await (const line of createInterface({ input: process.stdin })) {
    const m = JSON.parse(line);
    if (m.id === undefined) continue;
    if (m.method === "initialize") {
      process.stdout.write(reply(m.id, { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "lines", version: "1.0.0" } }) + "\n");
    } else if (m.method === "tools/list") {
      process.stdout.write(reply(m.id, { tools: [tool] }) + "\n");
    } else {
      const { bytes, newline = true, piece } = m.params.arguments;
      const bare = Buffer.byteLength(reply(m.id, { content: [{ type: "text", text: "" }] }));
      const out = Buffer.from(reply(m.id, { content: [{ type: "text", text: "x".repeat(bytes - bare) }] }) + (newline ? "\n" : ""));
      const step = piece ?? out.length;
      for (let i = 0; i < out.length; i += step) process.stdout.write(out.subarray(i, i + step));
    }
  }
  if (process.argv[2] === "stubborn") {
    process.stderr.write("stubborn: stdin ended, staying up\n");
    setInterval(() => undefined, 1 << 30);
  }
}
`;

function writeServer(dir: string): string {
  const path = join(dir, "line-server.mjs");
  writeFileSync(path, SERVER);
  return path;
}

const message = (name: string, size: string) =>
  `MCP server "${name}" sent a message line longer than ${size} without a newline; it was stopped. ` +
  "Check the server's output, or ask its author to keep each JSON-RPC message on one line of at most that size.";

/**
 * Feeds every one of `chunks` to a reader bounded at `max`: the index of the chunk the overflow was reported at, -1
 * if none, -2 if it was reported more than once.
 */
function overflowAt(max: number, chunks: string[]): number {
  const at: number[] = [];
  let i = 0;
  const reader = new JsonLineReader(max, { message: () => undefined, error: () => undefined, overflow: () => at.push(i) });
  for (; i < chunks.length; i++) reader.push(Buffer.from(chunks[i] as string));
  return at.length > 1 ? -2 : (at[0] ?? -1);
}

void test("MCP line bound: counted across chunks, newline excluded; exactly the bound passes, one byte more does not", () => {
  assert.equal(overflowAt(4, ["abcd\n"]), -1, "a line of exactly the bound, ended");
  assert.equal(overflowAt(4, ["abcd"]), -1, "exactly the bound, not ended yet");
  assert.equal(overflowAt(4, ["abcde"]), 0, "one past, not ended");
  assert.equal(overflowAt(4, ["abcde\nab"]), 0, "one past, ended in the same chunk");
  assert.equal(overflowAt(4, ["ab\nabcde\n"]), 0, "one past, in the middle of a chunk");
  assert.equal(overflowAt(4, ["ab", "cd\nxy"]), -1, "a line split over chunks, at the bound");
  assert.equal(overflowAt(4, ["ab", "cde\n"]), 1, "a line split over chunks, one past");
  assert.equal(overflowAt(4, ["abcd", "\n"]), -1);
  assert.equal(overflowAt(4, ["abcd", "x"]), 1);
  assert.equal(overflowAt(4, ["abc\r\n"]), -1, "a \\r counts as a byte of its line");
  assert.equal(overflowAt(4, ["abcd\r\n"]), 0);
  assert.equal(overflowAt(0, ["\n\n\n"]), -1, "empty lines pass a bound of 0");
  assert.equal(overflowAt(4, ["abcde", "f", "\n"]), 0, "reported once; nothing is read after it");
});

void test("MCP line bound: a line of exactly the bound works; one byte more stops that server only", async (t) => {
  const bound = 4096;
  const script = writeServer(tempDir(t));
  let changes = 0;
  const reg = await createToolRegistry({
    cwd: process.cwd(),
    mcpServers: { long: { command: process.execPath, args: [script], env: {} }, fx: { command: process.execPath, args: [FIXTURE], env: {} } },
    mcp: { maxLineBytes: bound },
  });
  const off = reg.onMcpChange(() => changes++);
  const ctx = makeCtx(process.cwd());
  const tool = (name: string) => reg.get(name) as Tool;
  try {
    const long = reg.mcpServers.find((s) => s.name === "long");
    assert.equal(long?.state, "ready", long?.error);
    const pid = long.pid;
    assert.ok(pid !== null);

    let r = await call(tool("mcp__long__line"), { bytes: bound }, ctx);
    assert.equal(r.isError, false, r.content);
    assert.match(r.content, /^x+$/, "a line of exactly the bound is read whole");

    const before = changes;
    r = await call(tool("mcp__long__line"), { bytes: bound + 1, newline: false }, ctx);
    assert.equal(r.errorKind, "unavailable", "the pending call ends as unavailable");
    assert.equal(long.state, "failed");
    assert.equal(long.error, message("long", "4 KiB (4096 bytes)"));
    assert.ok(changes > before, "onChange reported the failure");
    assert.ok(await waitFor(() => !isAlive(pid)), "the server process is gone");
    // And reaped: the call now fails before the process exits, so it may still be a zombie a moment longer.
    assert.ok(await waitFor(() => !pidExists(pid)), "the server process is reaped");

    r = await call(tool("mcp__long__line"), { bytes: 10 }, ctx);
    assert.equal(r.errorKind, "unavailable", "a later call is unavailable");
    assert.match(r.content, /MCP server long is not available/);
    assert.equal(reg.mcpServers.find((s) => s.name === "fx")?.state, "ready");
    assert.equal((await call(tool("mcp__fx__echo"), { text: "still here" }, ctx)).content, "echo: still here");
  } finally {
    off();
    await reg.close();
  }
});

void test("MCP line bound: an endless line during start-up is a start failure; the other server loads", async (t) => {
  const dir = tempDir(t);
  const script = writeServer(dir);
  const pidFile = join(dir, "flood.pid");
  const conn = await connectMcpServers(
    { flood: { command: process.execPath, args: [script, "flood", pidFile], env: {} }, fx: { command: process.execPath, args: [FIXTURE], env: {} } },
    { cwd: process.cwd(), maxLineBytes: 1024 * 1024 },
  );
  try {
    const [flood, fx] = conn.servers;
    assert.equal(flood?.state, "failed");
    assert.equal(flood.error, message("flood", "1 MiB (1048576 bytes)"));
    assert.equal(flood.toolCount, 0);
    assert.equal(flood.pid, null);
    const pid = Number(readFileSync(pidFile, "utf8"));
    assert.ok(await waitFor(() => !isAlive(pid)), "the flooding process is gone");
    assert.equal(fx?.state, "ready");
    const echo = conn.tools.find((x) => x.spec.name === "mcp__fx__echo") as Tool;
    assert.equal((await call(echo, { text: "ok" }, makeCtx(process.cwd()))).content, "echo: ok");
  } finally {
    await conn.close();
  }
});

// The SDK's own read buffer refuses 10 MB by default: this proves the bound in force is ours, at the limit and past it.
void test("MCP line bound: by default a line of exactly 16 MiB is read; 16 MiB and one byte stops the server", async (t) => {
  const script = writeServer(tempDir(t));
  const conn = await connectMcpServers({ long: { command: process.execPath, args: [script], env: {} } }, { cwd: process.cwd() });
  const ctx = makeCtx(process.cwd());
  try {
    assert.equal(MCP_MAX_LINE_BYTES, 16 * 1024 * 1024);
    const [long] = conn.servers;
    assert.equal(long?.state, "ready", long?.error);
    const line = conn.tools[0] as Tool;
    let r = await call(line, { bytes: MCP_MAX_LINE_BYTES }, ctx);
    assert.equal(r.isError, false, r.content);
    assert.match(r.content, /bytes omitted/, "the 16 MiB answer arrived whole and was bounded as any result");
    r = await call(line, { bytes: MCP_MAX_LINE_BYTES + 1, newline: false }, ctx);
    assert.equal(r.errorKind, "unavailable");
    assert.equal(long.state, "failed");
    assert.equal(long.error, message("long", "16 MiB (16777216 bytes)"));
  } finally {
    await conn.close();
  }
});

// Stopping a server fails its pending calls at once, not once its process is gone: this one ignores the end of its
// stdin and SIGTERM, so only the SIGKILL 4 s later ends it.
void test("MCP line bound: a stopped server's pending call fails at once, while its process still runs", async (t) => {
  const script = writeServer(tempDir(t));
  const conn = await connectMcpServers({ stub: { command: process.execPath, args: [script, "stubborn"], env: {} } }, { cwd: process.cwd(), maxLineBytes: 4096 });
  const [stub] = conn.servers;
  try {
    assert.equal(stub?.state, "ready", stub?.error);
    const pid = stub.pid;
    assert.ok(pid !== null);
    // Checked in the same turn as the result arrives (isAlive is `process.kill(pid, 0)` plus "not a zombie").
    let aliveAtRejection = false;
    const r = await call(conn.tools[0] as Tool, { bytes: 4097, newline: false }, makeCtx(process.cwd())).finally(() => {
      aliveAtRejection = isAlive(pid);
    });
    assert.equal(r.errorKind, "unavailable");
    assert.equal(r.content, "mcp__stub__line: MCP server stub closed the connection");
    assert.ok(aliveAtRejection, "the call failed before the server process was gone");
    assert.equal(stub.state, "failed");
    assert.equal(stub.error, message("stub", "4 KiB (4096 bytes)"));
    await conn.close();
    assert.ok(await waitFor(() => !isAlive(pid)), "the server process is gone once close resolved");
    assert.ok(await waitFor(() => /stdin ended, staying up\n[^]*ignoring SIGTERM/.test(stub.stderrTail())), stub.stderrTail());
  } finally {
    await conn.close();
  }
});
