/**
 * Berth's stdio MCP transport: the line reader on its own (splits, UTF-8 across reads, CRLF, a bad line, the bound at
 * every split), then the transport with real child processes: a 12 MiB answer, the server's environment, stderr,
 * start twice, a missing command, `onclose` once (on close, before the process is gone; on an exit by itself), and a
 * write to a server that closed its stdin.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { BoundedStdioTransport, JsonLineReader } from "../../src/runtime/tools/mcp-transport.js";
import { isAlive, tempDir, waitFor } from "./helpers.js";

const MiB = 1024 * 1024;

/** A reader bounded at `max` whose messages, errors and overflows are recorded. */
function recorder(max = 1024) {
  const got = { messages: [] as JSONRPCMessage[], errors: [] as Error[], overflows: 0 };
  const reader = new JsonLineReader(max, { message: (m) => got.messages.push(m), error: (e) => got.errors.push(e), overflow: () => got.overflows++ });
  return { reader, got };
}

const note = (text: string): JSONRPCMessage => ({ jsonrpc: "2.0", method: "notifications/message", params: { text } });

void test("MCP line reader: one line split at every byte, multi-byte UTF-8 included, arrives whole", () => {
  const msg = note("héllo € 😀 日本語 — end");
  const bytes = Buffer.from(JSON.stringify(msg) + "\n");
  for (let k = 0; k <= bytes.length; k++) {
    const { reader, got } = recorder();
    reader.push(bytes.subarray(0, k));
    reader.push(bytes.subarray(k));
    assert.deepEqual(got, { messages: [msg], errors: [], overflows: 0 }, `split at ${k}`);
  }
  const { reader, got } = recorder();
  for (let k = 0; k < bytes.length; k++) reader.push(bytes.subarray(k, k + 1));
  assert.deepEqual(got, { messages: [msg], errors: [], overflows: 0 }, "one byte per read");
});

void test("MCP line reader: several lines in one read, in order; CRLF; a bad line is reported and reading goes on", () => {
  let { reader, got } = recorder();
  reader.push(Buffer.from(["a", "b", "c"].map((t) => JSON.stringify(note(t))).join("\n") + "\n" + JSON.stringify(note("d")).slice(0, 10)));
  assert.deepEqual(got.messages, [note("a"), note("b"), note("c")]);
  reader.push(Buffer.from(JSON.stringify(note("d")).slice(10) + "\n"));
  assert.deepEqual(got.messages.at(-1), note("d"), "the open line completed by the next read");

  ({ reader, got } = recorder());
  reader.push(Buffer.from(JSON.stringify(note("crlf")) + "\r\n" + JSON.stringify(note("split")) + "\r"));
  reader.push(Buffer.from("\n"));
  assert.deepEqual(got, { messages: [note("crlf"), note("split")], errors: [], overflows: 0 });

  ({ reader, got } = recorder());
  reader.push(Buffer.from(`{not json\n{"jsonrpc":"2.0","nothing":1}\n${JSON.stringify(note("after"))}\n`));
  assert.equal(got.errors.length, 2, "invalid JSON, then JSON that is no JSON-RPC message");
  assert.deepEqual(got.messages, [note("after")]);
});

void test("MCP line reader: the bound at exactly max and max + 1, at every split of the line", () => {
  const line = Buffer.from(JSON.stringify(note("x".repeat(40))));
  const n = line.length;
  for (let k = 0; k <= n; k++) {
    const chunks = [line.subarray(0, k), Buffer.concat([line.subarray(k), Buffer.from("\n")])];
    let { reader, got } = recorder(n);
    assert.deepEqual(chunks.map((c) => reader.push(c)), [true, true], `max, split at ${k}`);
    assert.deepEqual(got, { messages: [JSON.parse(line.toString())], errors: [], overflows: 0 });

    ({ reader, got } = recorder(n - 1));
    // Byte n (max + 1) is in the first read when k = n: the overflow is reported there, without waiting for a newline.
    const read = chunks.map((c) => reader.push(c));
    assert.deepEqual(read, k === n ? [false, false] : [true, false], `max + 1, split at ${k}`);
    assert.deepEqual(got, { messages: [], errors: [], overflows: 1 });
    assert.equal(reader.push(Buffer.from(JSON.stringify(note("later")) + "\n")), false, "nothing is read after it");
    assert.equal(got.messages.length, 0);
  }
});

/**
 * A stdio MCP server by hand: `initialize`, `tools/list` (one tool `long`), and `tools/call` answered with the text
 * `text(chars)` on one line written in 64 KiB writes. `env` as argument: first a notification with its environment
 * and cwd. `exit` as argument: exits on its first `tools/call`. `deaf`: closes its stdin at once, says so, stays up.
 * `flood`: writes an endless line, as fast as the pipe drains, and says on stderr why a write failed.
 */
const SERVER = String.raw`
const { closeSync } = require("node:fs");
const mode = process.argv[2];
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
const text = (chars) => "é€😀 0123456789 ".repeat(Math.ceil(chars / 16)).slice(0, chars);
if (mode === "env") send({ method: "notifications/env", params: { env: process.env, cwd: process.cwd() } });
if (mode === "flood") {
  process.stdout.on("error", (e) => process.stderr.write("stdout: " + e.code + "\n"));
  const b = "x".repeat(1 << 16);
  const pump = () => {
    while (process.stdout.write(b));
    process.stdout.once("drain", pump);
  };
  pump();
} else if (mode === "deaf") {
  closeSync(0);
  send({ method: "notifications/deaf" });
  setInterval(() => undefined, 1 << 30);
} else {
  process.stderr.write("server: up\n");
  require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
    const m = JSON.parse(line);
    if (m.method === "initialize") {
      send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "t", version: "1" } } });
    } else if (m.method === "tools/list") {
      send({ id: m.id, result: { tools: [{ name: "long", inputSchema: { type: "object" } }] } });
    } else if (m.method === "tools/call") {
      if (mode === "exit") process.exit(0);
      const out = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text: text(m.params.arguments.chars) }] } }) + "\n");
      for (let i = 0; i < out.length; i += 65536) process.stdout.write(out.subarray(i, i + 65536));
    }
  });
}
`;
const text = (chars: number) => "é€😀 0123456789 ".repeat(Math.ceil(chars / 16)).slice(0, chars);

/**
 * A transport to the server in `mode`; once the test ends (passed or not), its process is killed if it still runs
 * and the transport closed, so a failed assertion leaves no server holding the test file open.
 */
function transport(t: TestContext, mode = "", bound = 16 * MiB, onOverflow: () => void = () => undefined): BoundedStdioTransport {
  const script = join(tempDir(t), "server.cjs");
  writeFileSync(script, SERVER);
  const tr = new BoundedStdioTransport({ command: process.execPath, args: [script, mode], env: { BERTH_TEST_VAR: "set" } }, bound, onOverflow);
  t.after(async () => {
    const pid = tr.pid;
    if (pid !== null && isAlive(pid)) process.kill(pid, "SIGKILL");
    await tr.close();
  });
  return tr;
}

void test("MCP transport: a tool call answered with one line of ~12 MiB, in 64 KiB writes, arrives whole", async (t) => {
  const tr = transport(t);
  const client = new Client({ name: "t", version: "1" });
  try {
    await client.connect(tr);
    // 16 characters of 21 bytes repeated: the line is ~12.5 MiB, above the SDK's former 10 MB bound, under ours.
    const chars = 9.5 * MiB;
    const res = await client.callTool({ name: "long", arguments: { chars } });
    const content = res.content as Array<{ type: string; text: string }>;
    assert.equal(content.length, 1);
    const got = content[0]?.text ?? "";
    assert.ok(Buffer.byteLength(got) > 12 * MiB && Buffer.byteLength(got) < 16 * MiB, String(Buffer.byteLength(got)));
    assert.ok(got === text(chars), "the text is the server's, character for character");
  } finally {
    await client.close();
  }
});

void test("MCP transport: the server's environment is the SDK default plus env; stderr is readable before start", async (t) => {
  const tr = transport(t, "env");
  const stderr: Buffer[] = [];
  tr.stderr.on("data", (c: Buffer) => stderr.push(c));
  const messages: JSONRPCMessage[] = [];
  tr.onmessage = (m) => messages.push(m);
  assert.equal(tr.pid, null, "no pid before start");
  await tr.start();
  const pid = tr.pid;
  assert.ok(pid !== null && isAlive(pid));
  await assert.rejects(tr.start(), /already started/);
  assert.ok(await waitFor(() => messages.length > 0 && Buffer.concat(stderr).toString() === "server: up\n"));
  const params = (messages[0] as unknown as { params: { env: Record<string, string>; cwd: string } }).params;
  assert.deepEqual(params.env, { ...getDefaultEnvironment(), BERTH_TEST_VAR: "set" });
  assert.equal(params.cwd, process.cwd());
  await tr.close();
  assert.ok(await waitFor(() => !isAlive(pid)));
  assert.equal(tr.pid, null, "no pid once it exited");
  await assert.rejects(tr.send(note("late")), /Not connected/);
});

void test("MCP transport: past the bound stdout is no longer read: overflow reported once, the server's writes fail", async (t) => {
  let overflows = 0;
  const tr = transport(t, "flood", MiB, () => overflows++);
  let stderr = "";
  tr.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  await tr.start();
  assert.ok(await waitFor(() => stderr.includes("stdout: EPIPE")), stderr);
  assert.equal(overflows, 1);
  await tr.close();
});

void test("MCP transport: a missing command fails the start with the spawn error", async () => {
  const tr = new BoundedStdioTransport({ command: "/nonexistent/berth-mcp" }, MiB, () => undefined);
  await assert.rejects(tr.send(note("early")), /Not connected/, "not started");
  await assert.rejects(tr.start(), { message: "spawn /nonexistent/berth-mcp ENOENT" });
  await tr.close();
  assert.equal(tr.pid, null);
});

void test("MCP transport: close fires onclose once, at once, before the process is gone", async (t) => {
  const tr = transport(t);
  let closes = 0;
  tr.onclose = () => closes++;
  await tr.start();
  const pid = tr.pid;
  assert.ok(pid !== null);
  const closing = tr.close();
  // The end of its stdin has not even reached the server yet.
  assert.equal(closes, 1, "onclose fired within close()");
  assert.ok(isAlive(pid));
  assert.equal(tr.close(), closing, "the same promise");
  await closing;
  assert.ok(await waitFor(() => !isAlive(pid)));
  assert.equal(closes, 1);
});

void test("MCP transport: a server that exits by itself closes once; later requests fail", async (t) => {
  const tr = transport(t, "exit");
  let closes = 0;
  tr.onclose = () => closes++;
  const client = new Client({ name: "t", version: "1" });
  await client.connect(tr);
  const pid = tr.pid;
  assert.ok(pid !== null);
  await assert.rejects(client.callTool({ name: "long", arguments: { chars: 1 } }), /Connection closed/);
  assert.ok(await waitFor(() => closes > 0));
  assert.equal(tr.pid, null);
  await assert.rejects(client.callTool({ name: "long", arguments: { chars: 1 } }), /Not connected/);
  await client.close();
  await tr.close();
  assert.equal(closes, 1, "onclose fired once, for the exit");
});

void test("MCP transport: a write to a server that closed its stdin is an onerror (EPIPE), not a crash", async (t) => {
  const tr = transport(t, "deaf");
  const errors: Array<Error & { code?: string }> = [];
  const messages: JSONRPCMessage[] = [];
  tr.onerror = (e) => errors.push(e);
  tr.onmessage = (m) => messages.push(m);
  await tr.start();
  const pid = tr.pid;
  assert.ok(pid !== null);
  assert.ok(await waitFor(() => messages.length > 0), "the server closed its stdin");
  await tr.send(note("nobody reads this"));
  assert.ok(await waitFor(() => errors.some((e) => e.code === "EPIPE")), errors.map(String).join("; "));
  process.kill(pid, "SIGKILL");
  await tr.close();
  assert.ok(await waitFor(() => !isAlive(pid)));
});
