/**
 * Backend protocol v5 MCP side channels, end to end: a fake backend speaking the real backend
 * frames and AHP clients speaking MCP JSON-RPC on `mcp://` channels (spec "MCP side channels").
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { wsText } from "../../src/transport/ws-text.js";
import { ManualClock, McpClient, TOOLS_SERVER } from "./mcp-helpers.js";
import { MCP_BUSY_CODE, MCP_DEADLINE_MS, MCP_INFLIGHT_PER_CLIENT, MCP_PENDING_GLOBAL, mcpHub } from "../../src/protocols/host/mcp-channels.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const LOGGING_SERVER = { id: "logs", name: "Logs", capabilities: { logging: true } };
const BARE_SERVER = { id: "bare", name: "No side channel" };

async function v5Session(h: HostHandle, servers: Json[] = [TOOLS_SERVER], sourceId = "mcp-src"): Promise<{ be: FakeBackend; reg: Json }> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 5, sourceId, mcpServers: servers });
  assert.equal(reg.type, "registered", JSON.stringify(reg));
  return { be, reg };
}

async function channelOf(h: HostHandle, session: string, serverId = TOOLS_SERVER.id): Promise<string> {
  const { c } = await AhpClient.init(h, [session], `probe-${serverId}`);
  const snap = await c.request("subscribe", { channel: session });
  c.close();
  const cz = (snap.result.snapshot.state.customizations as Json[]).find((x) => x.id === serverId);
  return cz!.channel as string;
}

test("hello.mcpServers → ready McpServerCustomizations with stable opaque mcp:// channels", () =>
  withHost(async (h) => {
    const { be, reg } = await v5Session(h, [TOOLS_SERVER, LOGGING_SERVER, BARE_SERVER]);
    const { c, result } = await AhpClient.init(h, [reg.session]);
    const state = result.snapshots[0].state as Json;
    const cz = state.customizations as Json[];
    assert.deepEqual(
      cz.map((x) => [x.type, x.id, x.name, x.state.kind]),
      [
        ["mcpServer", "workspace-tools", "Workspace Tools", "ready"],
        ["mcpServer", "logs", "Logs", "ready"],
        ["mcpServer", "bare", "No side channel", "ready"],
      ],
    );
    const tools = cz[0]!;
    assert.equal(tools.uri, TOOLS_SERVER.uri);
    assert.match(tools.channel, /^mcp:\/\/[0-9a-f]{32}$/);
    assert.ok(!tools.channel.includes("workspace") && !tools.channel.includes("mcp-src"), "channel is opaque");
    assert.deepEqual(tools.mcpApp, { capabilities: { serverTools: { listChanged: true } } });
    assert.deepEqual(cz[1]!.mcpApp, { capabilities: { logging: {} } });
    assert.equal(cz[2]!.channel, undefined, "a server advertising no capability has no side channel");
    assert.notEqual(cz[1]!.channel, tools.channel);

    // The backend goes away: the servers leave the session (announced), and come back with the
    // same channel when the same source registers again.
    be.close();
    const gone = await c.action((e) => e.action.type === "session/customizationsChanged");
    assert.deepEqual(gone.action.customizations, []);
    const again = await v5Session(h, [TOOLS_SERVER]);
    assert.equal(again.reg.session, reg.session);
    const back = await c.action((e) => e.action.type === "session/customizationsChanged" && e.action.customizations.length === 1);
    assert.equal(back.action.customizations[0].channel, tools.channel, "stable across re-registration");
    const snap = await c.request("subscribe", { channel: reg.session });
    assert.deepEqual(snap.result.snapshot.state.customizations, back.action.customizations, "snapshot equals the announced list");
    assert.deepEqual(c.invalid, []);
    c.close();
    again.be.close();
  }));

test("mcpServers is refused before v5, and when malformed or duplicated", () =>
  withHost(async (h) => {
    const cases: Array<[Json, RegExp]> = [
      [{ protocolVersion: 4, sourceId: "a", mcpServers: [TOOLS_SERVER] }, /mcpServers requires protocol version 5/],
      [{ protocolVersion: 5, sourceId: "b", mcpServers: [TOOLS_SERVER, TOOLS_SERVER] }, /unique/],
      [{ protocolVersion: 5, sourceId: "c", mcpServers: [{ id: "x" }] }, /mcpServers\.0\.name/],
      [{ protocolVersion: 5, sourceId: "d", mcpServers: [{ id: "x", name: "X", capabilities: { serverTools: "yes" } }] }, /serverTools/],
    ];
    for (const [hello, re] of cases) {
      const { be, reg } = await FakeBackend.session(h, hello);
      assert.equal(reg.type, "error");
      assert.equal(reg.code, "validation_error");
      assert.match(reg.message, re);
      await be.waitClosed();
    }
  }));

test("a request round-trips verbatim with a host UUID; caller ID and channel restored", () =>
  withHost(async (h) => {
    const { be, reg } = await v5Session(h);
    const channel = await channelOf(h, reg.session);
    const m = await McpClient.open(h);
    m.request(channel, "caller-7", "tools/call", { name: "grep", arguments: { pattern: "x" }, _meta: { k: 1 } });
    const req = await be.nextType("mcp_request");
    assert.match(req.requestId, /^[0-9a-f-]{36}$/);
    assert.equal(req.session, reg.session);
    assert.equal(req.serverId, TOOLS_SERVER.id);
    assert.equal(req.backendConnectionId, reg.backendConnectionId);
    assert.deepEqual(req.message, { jsonrpc: "2.0", id: req.requestId, method: "tools/call", params: { name: "grep", arguments: { pattern: "x" }, _meta: { k: 1 } } });
    assert.equal((req.message as Json).channel, undefined, "the AHP routing field is removed");
    be.send({ type: "mcp_response", requestId: req.requestId, message: { jsonrpc: "2.0", id: req.requestId, result: { content: [{ type: "text", text: "hit" }] }, channel: "mcp://forged" } });
    const r = await m.reply("caller-7");
    assert.deepEqual(r, { jsonrpc: "2.0", id: "caller-7", result: { content: [{ type: "text", text: "hit" }] }, channel });
    // An MCP error reply is relayed as the caller's error; a numeric caller ID survives.
    m.request(channel, 42, "tools/list");
    const req2 = await be.nextType("mcp_request");
    be.send({ type: "mcp_response", requestId: req2.requestId, message: { jsonrpc: "2.0", id: req2.requestId, error: { code: -32602, message: "bad cursor" } } });
    assert.deepEqual(await m.reply(42), { jsonrpc: "2.0", id: 42, error: { code: -32602, message: "bad cursor" }, channel });
    // A second reply to a consumed UUID consumes nothing (content-free refusal, connection kept).
    be.send({ type: "mcp_response", requestId: req2.requestId, message: { jsonrpc: "2.0", id: req2.requestId, result: {} } });
    assert.equal((await be.nextType("error")).code, "mcp_scope_refused");
    assert.equal(m.replies().length, 2);
    assert.equal(be.closed, false);
    m.close();
    be.close();
  }));

test("the capability union is the allowlist; initialize always refused; unknown channel; notifications", () =>
  withHost(async (h) => {
    const { be, reg } = await v5Session(h, [TOOLS_SERVER, LOGGING_SERVER]);
    const tools = await channelOf(h, reg.session);
    const logs = await channelOf(h, reg.session, "logs");
    const m = await McpClient.open(h);
    const refused: Array<[string, string]> = [
      [tools, "initialize"],
      [logs, "initialize"],
      [tools, "resources/read"],
      [tools, "logging/setLevel"],
      [tools, "sampling/createMessage"],
      [tools, "ping"],
      [logs, "tools/call"],
    ];
    for (const [i, [ch, method]] of refused.entries()) {
      m.request(ch, `r${i}`, method);
      const r = await m.reply(`r${i}`);
      assert.equal(r.error.code, -32601, `${method} on ${ch === tools ? "tools" : "logs"}`);
      assert.equal(r.channel, ch);
    }
    m.request("mcp://00000000000000000000000000000000", "nochan", "tools/list");
    assert.equal((await m.reply("nochan")).error.code, -32008);
    // Served: logging/setLevel on the logging server; its client notification is forwarded.
    m.request(logs, "lvl", "logging/setLevel", { level: "debug" });
    const lv = await be.nextType("mcp_request");
    assert.equal(lv.serverId, "logs");
    m.notify(logs, "notifications/message", { level: "info", data: "from the app" });
    const n = await be.nextType("mcp_notification");
    assert.deepEqual(n, { type: "mcp_notification", session: reg.session, serverId: "logs", backendConnectionId: reg.backendConnectionId, message: { jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: "from the app" } } });
    m.notify(tools, "notifications/message", { level: "info", data: "not advertised here" });
    m.notify(logs, "notifications/initialized");
    m.request(tools, "after", "tools/list");
    await be.nextType("mcp_request"); // ordered after the two refused notifications
    assert.equal(be.frames.filter((f) => f.type === "mcp_notification").length, 0, "unadvertised notifications are not forwarded");
    assert.equal(be.frames.filter((f) => f.type === "mcp_request").length, 0, "refused methods never reach the backend");
    m.close();
    be.close();
  }));

test(`at most ${MCP_INFLIGHT_PER_CLIENT} in flight per frontend connection (at and one past)`, () =>
  withHost(async (h) => {
    const { be, reg } = await v5Session(h);
    const channel = await channelOf(h, reg.session);
    const m = await McpClient.open(h);
    const other = await McpClient.open(h, undefined, "other");
    for (let i = 0; i < MCP_INFLIGHT_PER_CLIENT; i++) m.request(channel, `a${i}`, "tools/list");
    await until(() => be.frames.filter((f) => f.type === "mcp_request").length === MCP_INFLIGHT_PER_CLIENT, 3000, "16 requests");
    m.request(channel, "over", "tools/list");
    const over = await m.reply("over");
    assert.equal(over.error.code, MCP_BUSY_CODE);
    assert.equal(over.error.data.outcome, "rejected");
    assert.match(over.error.message, /limit 16/);
    // The bound is per connection: another client is still served.
    const delivered = () => be.frames.filter((f) => f.type === "mcp_request").length;
    other.request(channel, "o1", "tools/list");
    await until(() => delivered() === MCP_INFLIGHT_PER_CLIENT + 1, 3000, "other client served");
    // One reply frees one slot.
    const first = be.frames.find((f) => f.type === "mcp_request")!;
    be.send({ type: "mcp_response", requestId: first.requestId, message: { jsonrpc: "2.0", id: first.requestId, result: { tools: [] } } });
    await m.reply("a0");
    m.request(channel, "again", "tools/list");
    await until(() => delivered() === MCP_INFLIGHT_PER_CLIENT + 2, 3000, "slot reused");
    assert.equal(m.replies().filter((r) => r.id === "again").length, 0, "accepted, not refused");
    m.close();
    other.close();
    be.close();
  }));

test(`at most ${MCP_PENDING_GLOBAL} pending globally (at and one past)`, () =>
  withHost(async (h) => {
    const { be, reg } = await v5Session(h);
    const channel = await channelOf(h, reg.session);
    const clients: McpClient[] = [];
    for (let i = 0; i < MCP_PENDING_GLOBAL / MCP_INFLIGHT_PER_CLIENT; i++) {
      const m = await McpClient.open(h, undefined, `g${i}`);
      clients.push(m);
      for (let j = 0; j < MCP_INFLIGHT_PER_CLIENT; j++) m.request(channel, `g${i}-${j}`, "tools/list");
    }
    await until(() => mcpHub(h.state).pending.size === MCP_PENDING_GLOBAL, 5000, "128 pending");
    const extra = await McpClient.open(h, undefined, "extra");
    extra.request(channel, "129", "tools/list");
    const r = await extra.reply("129");
    assert.equal(r.error.code, MCP_BUSY_CODE);
    assert.match(r.error.message, /limit 128/);
    await until(() => be.frames.filter((f) => f.type === "mcp_request").length === MCP_PENDING_GLOBAL, 3000, "exactly 128 delivered");
    // Nothing else was refused.
    for (const m of clients) assert.equal(m.replies().length, 0);
    for (const m of clients) m.close();
    extra.close();
    be.close();
  }));

test("the 60 s deadline (injected clock): indeterminate at the deadline, never before; late reply consumes nothing", () =>
  withHost(async (h) => {
    const clock = new ManualClock();
    mcpHub(h.state).clock = clock;
    const { be, reg } = await v5Session(h);
    const channel = await channelOf(h, reg.session);
    const m = await McpClient.open(h);
    m.request(channel, "slow", "tools/call", { name: "sleep" });
    const req = await be.nextType("mcp_request");
    clock.advance(MCP_DEADLINE_MS - 1);
    m.request(channel, "probe", "initialize"); // a round trip, so an early answer would be seen first
    await m.reply("probe");
    assert.equal(m.replies().filter((r) => r.id === "slow").length, 0, "not before the deadline");
    clock.advance(1);
    const r = await m.reply("slow");
    assert.equal(r.error.data.outcome, "indeterminate");
    assert.equal(r.channel, channel);
    assert.equal(mcpHub(h.state).pending.size, 0);
    be.send({ type: "mcp_response", requestId: req.requestId, message: { jsonrpc: "2.0", id: req.requestId, result: {} } });
    assert.equal((await be.nextType("error")).code, "mcp_scope_refused");
    assert.equal(m.replies().filter((x) => x.id === "slow").length, 1, "answered exactly once");
    m.close();
    be.close();
  }));

test("a closing frontend reaps its waiters and correlations; others keep theirs", () =>
  withHost(async (h) => {
    const clock = new ManualClock();
    mcpHub(h.state).clock = clock;
    const { be, reg } = await v5Session(h);
    const channel = await channelOf(h, reg.session);
    const a = await McpClient.open(h, undefined, "a");
    const b = await McpClient.open(h, undefined, "b");
    for (let i = 0; i < 3; i++) a.request(channel, `a${i}`, "tools/list");
    b.request(channel, "b0", "tools/list");
    // Pending on the host is not yet received by the backend: wait for the four frames themselves.
    await until(() => mcpHub(h.state).pending.size === 4 && be.frames.filter((f) => f.type === "mcp_request").length === 4, 3000, "4 pending and delivered");
    const reqs = be.frames.filter((f) => f.type === "mcp_request");
    a.close();
    await until(() => mcpHub(h.state).pending.size === 1, 3000, "a's waiters reaped");
    assert.equal(clock.size, 1, "a's deadline timers are gone");
    assert.equal(be.frames.filter((f) => f.type !== "mcp_request").length, 0, "no cancellation is claimed to the backend");
    for (const q of reqs) be.send({ type: "mcp_response", requestId: q.requestId, message: { jsonrpc: "2.0", id: q.requestId, result: { tools: [] } } });
    assert.deepEqual((await b.reply("b0")).result, { tools: [] });
    await until(() => be.frames.filter((f) => f.code === "mcp_scope_refused").length === 3, 3000, "3 refusals");
    b.close();
    be.close();
  }));

test("a lost backend route answers its delivered waiters indeterminate, later requests not sent", () =>
  withHost(async (h) => {
    const { be, reg } = await v5Session(h);
    const channel = await channelOf(h, reg.session);
    const m = await McpClient.open(h);
    m.request(channel, "w", "tools/list");
    await be.nextType("mcp_request");
    be.close();
    const r = await m.reply("w");
    assert.equal(r.error.data.outcome, "indeterminate");
    m.request(channel, "x", "tools/list");
    const x = await m.reply("x");
    assert.equal(x.error.data.outcome, "rejected");
    assert.match(x.error.message, /nothing was sent/);
    m.close();
  }));

test("MCP frames from a backend below v5 are refused; MCP needs an initialized AHP connection", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "old" });
    be.send({ type: "mcp_response", requestId: "x", message: { jsonrpc: "2.0", id: "x", result: {} } });
    assert.equal((await be.nextType("error")).code, "unsupported_version");
    be.send({ type: "mcp_notification", serverId: "s", message: { jsonrpc: "2.0", method: "notifications/tools/list_changed" } });
    assert.equal((await be.nextType("error")).code, "unsupported_version");
    const { be: be5, reg } = await v5Session(h);
    const channel = await channelOf(h, reg.session);
    const raw = await AhpClient.open(h);
    const got: Json[] = [];
    raw.ws.on("message", (d) => got.push(JSON.parse(wsText(d)) as Json));
    raw.ws.send(JSON.stringify({ jsonrpc: "2.0", id: "early", method: "tools/list", channel }));
    await until(() => got.some((g) => g.id === "early"));
    assert.equal(got.find((g) => g.id === "early")!.error.code, -32600);
    assert.equal(be5.frames.filter((f) => f.type === "mcp_request").length, 0);
    raw.close();
    be.close();
    be5.close();
  }));

test("disposing the session answers its delivered MCP waiters indeterminate at once", () =>
  withHost(async (h) => {
    const clock = new ManualClock();
    mcpHub(h.state).clock = clock;
    const { be, reg } = await v5Session(h);
    const channel = await channelOf(h, reg.session);
    const m = await McpClient.open(h);
    m.request(channel, "d", "tools/list");
    await be.nextType("mcp_request");
    assert.equal((await m.c.request("disposeSession", { channel: reg.session })).result, null);
    const r = await m.reply("d");
    assert.equal(r.error.data.outcome, "indeterminate");
    assert.equal(clock.size, 0, "no deadline left behind");
    m.request(channel, "after", "tools/list");
    assert.equal((await m.reply("after")).error.code, -32008, "the channel is gone with its session");
    m.close();
    be.close();
  }));

test("a reply must be an MCP response: exactly one of an object result or an error; anything else is relayed to no one", () =>
  withHost(async (h) => {
    const { be, reg } = await v5Session(h);
    const channel = await channelOf(h, reg.session);
    const m = await McpClient.open(h);
    m.request(channel, "c1", "tools/list");
    const req = await be.nextType("mcp_request");
    const rid = req.requestId as string;
    const bad: Array<[Json, RegExp]> = [
      ...[5, "text", null, true, [{ name: "t" }]].map((result): [Json, RegExp] => [{ result }, /result must be an object/]),
      [{ result: {}, error: { code: -32000, message: "x" } }, /exactly one of result or error/],
      [{ result: {}, error: "boom" }, /exactly one of result or error/],
      [{ error: "boom" }, /error needs an integer code and a string message/],
      [{}, /exactly one of result or error/],
    ];
    for (const [body, why] of bad) {
      be.send({ type: "mcp_response", requestId: rid, message: { jsonrpc: "2.0", id: rid, ...body } });
      await be.roundTrip(); // handled: its answer, if any, is here
      const e = be.frames.find((f) => f.type === "error");
      assert.ok(e, `${JSON.stringify(body)} was relayed to the caller`);
      be.frames.splice(be.frames.indexOf(e), 1);
      assert.equal(e.code, "validation_error", JSON.stringify(body));
      assert.match(e.message, why, JSON.stringify(body));
      assert.equal(e.requestId, rid, "the refusal names the request it was for");
    }
    await be.roundTrip();
    assert.deepEqual(m.replies(), [], "no malformed reply reached the caller");
    // The request still waits, and a well-formed reply answers it once.
    be.send({ type: "mcp_response", requestId: rid, message: { jsonrpc: "2.0", id: rid, result: { tools: [] } } });
    assert.deepEqual(await m.reply("c1"), { jsonrpc: "2.0", id: "c1", result: { tools: [] }, channel });
    assert.equal(m.replies().length, 1);
    assert.deepEqual(m.c.invalid, []);
    assert.equal(be.closed, false);
    m.close();
    be.close();
  }));

test("an MCP request before the AHP connection is initialized is refused naming AHP initialize, not MCP's", () =>
  withHost(async (h) => {
    const { reg } = await v5Session(h);
    const channel = await channelOf(h, reg.session);
    const raw = McpClient.of(await AhpClient.open(h));
    raw.request(channel, 7, "tools/list");
    const r = await raw.reply(7);
    assert.equal(r.error.code, -32600);
    assert.equal(r.error.message, "MCP messages need an initialized AHP connection: send the AHP initialize request (on ahp-root://) first, then MCP on the mcp:// channel a session snapshot names");
    assert.equal(r.channel, channel);
    raw.close();
  }));
