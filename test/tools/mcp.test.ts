import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { connectMcpServers, MCP_MAX_SERVER_SPEC_BYTES, mcpToolName } from "../../src/runtime/tools/mcp.js";
import { createToolRegistry } from "../../src/runtime/tools/registry.js";
import { MAX_RESULT_BYTES } from "../../src/runtime/tools/result.js";
import { call, isAlive, makeCtx, waitFor } from "./helpers.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));
const fixture = (...extra: string[]) => ({ command: process.execPath, args: [FIXTURE, ...extra], env: {} });

void test("MCP: at most 512 tools per server are offered, whatever one tools/list page holds", async () => {
  for (const [listed, offered] of [
    [512, 512],
    [513, 512],
    // One page of 200,000: it was spread into one push call, a stack overflow that failed the server.
    [200_000, 512],
  ]) {
    const reg = await createToolRegistry({ cwd: process.cwd(), mcpServers: { many: fixture(`--tools=${listed}`) } });
    try {
      const s = reg.mcpServers.find((x) => x.name === "many");
      assert.equal(s?.state, "ready", `${listed}: ${s?.error ?? ""}`);
      assert.equal(s?.toolCount, offered);
      assert.equal(reg.tools.filter((t) => t.serverName === "many").length, offered);
      assert.ok(reg.get("mcp__many__t511") !== undefined && reg.get("mcp__many__t512") === undefined);
    } finally {
      await reg.close();
    }
  }
});

void test("MCP: a tool whose input schema nests past 64 levels or passes 64 KiB is left out, named on the server", async () => {
  for (const [arg, offered] of [
    ["--t0-schema-depth=64", true],
    ["--t0-schema-depth=65", false],
    // Deep enough that JSON.stringify of the tool specs overflowed the stack: every turn's request failed.
    ["--t0-schema-depth=5000", false],
    ["--t0-schema-bytes=65536", true],
    ["--t0-schema-bytes=65537", false],
  ] as const) {
    const reg = await createToolRegistry({ cwd: process.cwd(), mcpServers: { odd: fixture("--tools=2", arg) } });
    try {
      const s = reg.mcpServers.find((x) => x.name === "odd");
      assert.equal(s?.state, "ready", `${arg}: ${s?.error ?? ""}`);
      assert.equal(reg.get("mcp__odd__t0") !== undefined, offered, arg);
      assert.ok(reg.get("mcp__odd__t1") !== undefined, `${arg}: the other tool stays`);
      assert.equal(s?.toolCount, offered ? 2 : 1, arg);
      if (offered) assert.equal(s?.error, undefined, arg);
      else assert.match(s?.error ?? "", /left out 1 tool \(t0\): its input schema nests deeper than 64 levels or is larger than 64 KiB \(65536 bytes\)/, arg);
      // Every spec still serializes: the turn's request can be built.
      assert.ok(JSON.stringify(reg.specs()).length < 200_000, arg);
    } finally {
      await reg.close();
    }
  }
});

void test("MCP: one server's tool specs are offered up to 1 MiB of JSON in all; tools past it are left out, named", async () => {
  const N = 17;
  const S = 62_000;
  /** Each of the server's specs as sent (name, description, input schema), in compact JSON bytes. */
  const sizes = (reg: Awaited<ReturnType<typeof createToolRegistry>>): number[] =>
    reg.specs().filter((x) => x.name.startsWith("mcp__big__")).map((x) => Buffer.byteLength(JSON.stringify(x)));
  // A probe with small schemas: each spec's bytes besides its schema (name, description, the JSON around them).
  const probe = await createToolRegistry({ cwd: process.cwd(), mcpServers: { big: fixture(`--tools=${N}`, "--schema-bytes=100") } });
  const overhead = sizes(probe).map((n) => n - 100);
  await probe.close();
  assert.equal(overhead.length, N);
  // t1 … t16 get S-byte schemas; t0's makes the total exactly the bound.
  const rest = overhead.slice(1).reduce((a, n) => a + S + n, 0);
  const atBound = MCP_MAX_SERVER_SPEC_BYTES - rest - overhead[0]!;
  assert.ok(atBound >= 34 && atBound <= 64 * 1024, String(atBound));
  for (const [t0Bytes, offered] of [
    [atBound, N],
    [atBound + 1, N - 1],
  ] as const) {
    const reg = await createToolRegistry({ cwd: process.cwd(), mcpServers: { big: fixture(`--tools=${N}`, `--schema-bytes=${S}`, `--t0-schema-bytes=${t0Bytes}`) } });
    try {
      const s = reg.mcpServers.find((x) => x.name === "big");
      assert.equal(s?.state, "ready", s?.error);
      assert.equal(s?.toolCount, offered);
      assert.ok(sizes(reg).reduce((a, n) => a + n, 0) <= MCP_MAX_SERVER_SPEC_BYTES);
      if (offered === N) {
        assert.equal(sizes(reg).reduce((a, n) => a + n, 0), MCP_MAX_SERVER_SPEC_BYTES, "exactly at the bound: all offered");
        assert.equal(s?.error, undefined);
      } else {
        // Kept in list order while they fit: the last one would pass the bound.
        assert.ok(reg.get("mcp__big__t0") !== undefined && reg.get("mcp__big__t15") !== undefined && reg.get("mcp__big__t16") === undefined);
        assert.match(s?.error ?? "", /^left out 1 tool \(t16\): the server's tool specs would pass 1 MiB \(1048576 bytes\) of JSON in all, sent with every request; /);
      }
    } finally {
      await reg.close();
    }
  }
});

void test("MCP end to end: list, call, errors, validation, bounded output, close leaves no process", async () => {
  const reg = await createToolRegistry({ cwd: process.cwd(), mcpServers: { fx: fixture(), broken: fixture("--exit-at-start") } });
  const ctx = makeCtx(process.cwd());
  try {
    const fx = reg.mcpServers.find((s) => s.name === "fx");
    const broken = reg.mcpServers.find((s) => s.name === "broken");
    assert.equal(fx?.state, "ready");
    assert.equal(broken?.state, "failed", "a failing server is reported");
    assert.match(broken?.error ?? "", /connect/);
    assert.equal(broken?.toolCount, 0);
    assert.match(broken?.stderrTail() ?? "", /exiting at start/);
    const names = reg.tools.map((t) => t.spec.name);
    assert.deepEqual(names.slice(0, 8), ["read", "write", "edit", "bash", "grep", "glob", "ls", "todo_write"]);
    assert.deepEqual(names.slice(8).sort(), ["mcp__fx__add", "mcp__fx__big", "mcp__fx__crash", "mcp__fx__echo", "mcp__fx__fails", "mcp__fx__lone", "mcp__fx__slow"]);
    const echo = reg.get("mcp__fx__echo");
    assert.ok(echo !== undefined);
    assert.equal(echo.transport, "mcp");
    assert.equal(echo.serverName, "fx");
    const spec = reg.specs().find((s) => s.name === "mcp__fx__echo");
    assert.equal(spec?.inputSchema.type, "object");
    assert.deepEqual(spec?.inputSchema.required, ["text"]);

    let r = await call(echo, { text: "hi" }, ctx);
    assert.deepEqual(r, { content: "echo: hi", isError: false, timedOut: false });
    assert.deepEqual(ctx.progress, ["calling", "done"]);

    const add = reg.get("mcp__fx__add");
    assert.ok(add !== undefined);
    assert.equal((await call(add, { a: 2, b: 3 }, ctx)).content, "5");
    for (const bad of [{ a: 2 }, { a: "2", b: 3 }, { a: 1.5, b: 1 }, { a: 1, b: 1, mode: "product" }, [1, 2]]) {
      assert.equal(add.validate(bad).ok, false, JSON.stringify(bad));
    }
    r = await add.run({ a: "x", b: 1 }, ctx);
    assert.equal(r.errorKind, "invalid_arguments", "run re-validates");

    r = await call(reg.get("mcp__fx__fails") as NonNullable<typeof echo>, {}, ctx);
    assert.equal(r.isError, true);
    assert.equal(r.errorKind, "failed");
    assert.equal(r.content, "fixture failure");

    r = await call(reg.get("mcp__fx__big") as NonNullable<typeof echo>, { bytes: 200_000 }, ctx);
    assert.equal(r.isError, false);
    assert.ok(Buffer.byteLength(r.content) <= MAX_RESULT_BYTES);
    assert.ok(r.content.startsWith("START") && r.content.endsWith("END"));
    assert.match(r.content, /bytes omitted/);

    const ac = new AbortController();
    const slow = call(reg.get("mcp__fx__slow") as NonNullable<typeof echo>, { ms: 60_000 }, makeCtx(process.cwd(), ac.signal));
    ac.abort();
    r = await slow;
    assert.equal(r.errorKind, "cancelled");
    // The server is still usable after a cancelled call.
    assert.equal((await call(echo, { text: "again" }, ctx)).content, "echo: again");
  } finally {
    const pid = reg.mcpServers.find((s) => s.name === "fx")?.pid ?? null;
    assert.ok(pid !== null);
    await reg.close();
    await reg.close(); // idempotent
    assert.ok(await waitFor(() => !isAlive(pid)), "server process is gone after close");
    assert.equal(reg.mcpServers.find((s) => s.name === "fx")?.state, "closed");
  }
});

void test("MCP: a crashed server makes its tools unavailable; calls time out as `limit`", async () => {
  const conn = await connectMcpServers({ fx: fixture() }, { cwd: process.cwd(), callTimeoutMs: 300 });
  const ctx = makeCtx(process.cwd());
  const tool = (n: string) => conn.tools.find((t) => t.spec.name === `mcp__fx__${n}`) as (typeof conn.tools)[number];
  try {
    const pid = conn.servers[0]?.pid ?? null;
    assert.ok(pid !== null);
    let r = await call(tool("slow"), { ms: 5_000 }, ctx);
    assert.equal(r.errorKind, "limit");
    assert.equal(r.timedOut, true);
    r = await call(tool("crash"), {}, ctx);
    assert.equal(r.errorKind, "unavailable");
    assert.ok(await waitFor(() => !isAlive(pid)));
    r = await call(tool("echo"), { text: "x" }, ctx);
    assert.equal(r.errorKind, "unavailable");
    assert.equal(conn.servers[0]?.state, "failed");
  } finally {
    await conn.close();
  }
});

void test("MCP: a server that is not runnable yields no tools and does not throw", async () => {
  const conn = await connectMcpServers({ ghost: { command: "/nonexistent/berth-mcp", args: [], env: {} } }, { cwd: process.cwd() });
  assert.deepEqual(conn.tools, []);
  assert.equal(conn.servers[0]?.state, "failed");
  await conn.close();
});

void test("MCP tool names: namespaced, sanitized, at most 64 chars, unique", () => {
  const taken = new Set<string>();
  assert.equal(mcpToolName("my server", "do.it", taken), "mcp__my_server__do_it");
  const again = mcpToolName("my.server", "do it", taken);
  assert.notEqual(again, "mcp__my_server__do_it");
  assert.match(again, /^mcp__my_server__do_it_[0-9a-f]{8}$/);
  const long = mcpToolName("s".repeat(40), "t".repeat(40), taken);
  assert.ok(long.length <= 64);
  assert.match(long, /^[A-Za-z0-9_-]+$/);
});
