/**
 * Backend protocol v6 MCP lifecycle requests (spec "MCP lifecycle request outcomes") and the
 * backend's `resource_action` `session/mcpServerStateChanged`, through real sockets.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { AhpClient, FakeBackend, tempHome, until, withHost, type Json } from "./helpers.js";
import { McpClient, TOOLS_SERVER } from "./mcp-helpers.js";
import { MARKER_KEY, MAX_UNRESOLVED_GLOBAL, MAX_UNRESOLVED_PER_CLIENT } from "../../src/protocols/host/mcp-lifecycle.js";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";
import { HostStore } from "../../src/store/host/store.js";

async function session(h: HostHandle, version: number, servers: Json[] = [TOOLS_SERVER], sourceId = "lc"): Promise<{ be: FakeBackend; reg: Json }> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: version, sourceId, mcpServers: servers });
  assert.equal(reg.type, "registered", JSON.stringify(reg));
  return { be, reg };
}
const session6 = (h: HostHandle) => session(h, 6, [TOOLS_SERVER], "durable-src");
const start = (id = TOOLS_SERVER.id) => ({ type: "session/mcpServerStartRequested", id });
const stop = (id = TOOLS_SERVER.id) => ({ type: "session/mcpServerStopRequested", id });
const stateOf = async (c: AhpClient, session: string) => {
  const r = await c.request("subscribe", { channel: session });
  return (r.result.snapshot.state.customizations as Json[])[0]!;
};

test("start accepted: forwarded verbatim, no optimistic state, state-neutral receipt, dispatchOutcome", () =>
  withHost(async (h) => {
    const { be, reg } = await session(h, 6);
    const { c } = await AhpClient.init(h, [reg.session], "lc-client");
    const seq = c.dispatch(reg.session, start());
    const cmd = await be.nextType("command");
    assert.deepEqual(cmd.command, { type: "apply_resource_action", channel: reg.session, action: start() });
    assert.equal(cmd.session, reg.session);
    assert.equal(cmd.chat, undefined);
    const pending = await c.request("paratenic/dispatchOutcome", { channel: reg.session, clientSeq: seq });
    assert.equal(pending.result.outcome, "pending");
    assert.equal(c.actions(reg.session).length, 0, "nothing is published before the backend answers");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    const ack = await c.action((e) => e.action.type === "paratenic/mcpLifecycleAccepted");
    assert.deepEqual(ack.action, { type: "paratenic/mcpLifecycleAccepted", id: TOOLS_SERVER.id, operation: "start" });
    assert.deepEqual(ack.origin, { clientId: "lc-client", clientSeq: seq });
    assert.equal((await stateOf(c, reg.session)).state.kind, "ready", "acceptance is not an observed transition");
    const done = await c.request("paratenic/dispatchOutcome", { channel: reg.session, clientSeq: seq });
    assert.deepEqual(done.result, { outcome: "accepted", action: start(), serverSeq: ack.serverSeq });
    // The same client sequence cannot be dispatched twice.
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "dispatchAction", params: { channel: reg.session, clientSeq: seq, action: start() } }));
    const dup = await c.action((e) => e.rejectionReason !== undefined);
    assert.match(dup.rejectionReason, /already dispatched/);
    const unknown = await c.request("paratenic/dispatchOutcome", { channel: reg.session, clientSeq: 999 });
    assert.equal(unknown.error.code, -32008);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("backend mcpServerStateChanged drives the lifecycle; the host owns the channel", () =>
  withHost(async (h) => {
    const { be, reg } = await session(h, 6);
    const { c } = await AhpClient.init(h, [reg.session], "watch");
    const ready = await stateOf(c, reg.session);
    const m = await McpClient.open(h);
    be.send({ type: "event", session: reg.session, event: { type: "resource_action", channel: reg.session, action: { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state: { kind: "starting" }, channel: "mcp://chosen-by-backend" } } });
    const starting = await c.action((e) => e.action.type === "session/mcpServerStateChanged");
    assert.deepEqual(starting.action, { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state: { kind: "starting" } });
    assert.equal((await stateOf(c, reg.session)).channel, undefined, "no channel while not ready");
    m.request(ready.channel, "nr", "tools/list");
    const nr = await m.reply("nr");
    assert.match(nr.error.message, /not ready/);
    const auth = { kind: "authRequired", reason: "required", resource: { resource: "https://mcp.example.invalid", authorization_servers: ["https://as.example.invalid"] }, requiredScopes: ["read"] };
    be.send({ type: "event", session: reg.session, event: { type: "resource_action", action: { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state: auth } } });
    await c.action((e) => e.action.type === "session/mcpServerStateChanged" && e.action.state.kind === "authRequired");
    be.send({ type: "event", session: reg.session, event: { type: "resource_action", action: { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state: { kind: "ready" } } } });
    const back = await c.action((e) => e.action.type === "session/mcpServerStateChanged" && e.action.state.kind === "ready");
    assert.equal(back.action.channel, ready.channel, "the same host channel returns with ready");
    assert.deepEqual(await stateOf(c, reg.session), ready);
    m.request(ready.channel, "ok", "tools/list");
    assert.equal((await be.nextType("mcp_request")).serverId, TOOLS_SERVER.id);
    assert.deepEqual(c.invalid, []);
    m.close();
    c.close();
    be.close();
  }));

test("refusals: v5 route, unknown server, backend refusal echoes the original action unchanged", () =>
  withHost(async (h) => {
    const v5 = await session(h, 5, [TOOLS_SERVER], "old");
    const { c } = await AhpClient.init(h, [v5.reg.session], "r");
    c.dispatch(v5.reg.session, start());
    assert.match((await c.action((e) => e.rejectionReason !== undefined)).rejectionReason, /needs backend protocol 6/);
    const { be, reg } = await session(h, 6, [TOOLS_SERVER], "new");
    await c.request("subscribe", { channel: reg.session });
    c.dispatch(reg.session, start("nope"));
    assert.match((await c.action((e) => e.channel === reg.session && e.rejectionReason !== undefined)).rejectionReason, /no MCP server/);
    const seq = c.dispatch(reg.session, stop());
    const cmd = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: false, error: "provider secret detail" });
    const rej = await c.action((e) => e.channel === reg.session && e.action.type === "session/mcpServerStopRequested");
    assert.equal(rej.rejectionReason, "backend refused the MCP lifecycle request", "fixed text, no backend content");
    assert.deepEqual(rej.origin, { clientId: "r", clientSeq: seq });
    assert.equal((await stateOf(c, reg.session)).state.kind, "ready");
    assert.equal((await c.request("paratenic/dispatchOutcome", { channel: reg.session, clientSeq: seq })).result.outcome, "rejected");
    c.close();
    be.close();
    v5.be.close();
  }));

test("indeterminate keeps uncertainty: nothing published, sequence and same-server guard stay blocked", () =>
  withHost(async (h) => {
    const { be, reg } = await session(h, 9);
    const { c } = await AhpClient.init(h, [reg.session], "i");
    const seq = c.dispatch(reg.session, start());
    const cmd = await be.nextType("command");
    c.dispatch(reg.session, stop());
    assert.match((await c.action((e) => e.rejectionReason !== undefined)).rejectionReason, /still unresolved/, "same-server guard while pending");
    be.send({ type: "command_indeterminate", commandId: cmd.commandId, error: "reconcile" });
    be.send({ type: "ping", id: "after" }); // frames are handled in order: the pong follows the outcome
    await be.next((f) => f.type === "pong" && f.id === "after");
    const outcome = await c.request("paratenic/dispatchOutcome", { channel: reg.session, clientSeq: seq });
    assert.equal(outcome.result.outcome, "indeterminate");
    assert.equal(c.actions(reg.session).filter((e) => e.action.type === "paratenic/mcpLifecycleAccepted").length, 0);
    c.dispatch(reg.session, start());
    const again = await c.action((e) => e.rejectionReason !== undefined && e.origin.clientSeq === seq + 2);
    assert.match(again.rejectionReason, /still unresolved/, "no safe retry is invented");
    assert.equal(be.frames.filter((f) => f.type === "command").length, 0, "nothing re-sent");
    c.close();
    be.close();
  }));

test(`unresolved lifecycle requests: ${MAX_UNRESOLVED_PER_CLIENT} per client and ${MAX_UNRESOLVED_GLOBAL} in all (at and one past)`, () =>
  withHost(async (h) => {
    const servers = Array.from({ length: 64 }, (_, i) => ({ id: `s${i}`, name: `S${i}`, capabilities: { serverTools: true } }));
    const a = await session(h, 6, servers, "a");
    const b = await session(h, 6, servers, "b");
    const free = await session(h, 6, [{ id: "free", name: "Free", capabilities: { serverTools: true } }], "free");
    const clients: AhpClient[] = [];
    for (let k = 0; k < MAX_UNRESOLVED_GLOBAL / MAX_UNRESOLVED_PER_CLIENT; k++) {
      const { c } = await AhpClient.init(h, [a.reg.session, b.reg.session, free.reg.session], `u${k}`);
      clients.push(c);
      const target = k < 2 ? a.reg.session : b.reg.session;
      for (let i = 0; i < MAX_UNRESOLVED_PER_CLIENT; i++) c.dispatch(target, start(`s${(k % 2) * 32 + i}`));
    }
    const commands = () => a.be.frames.filter((f) => f.type === "command").length + b.be.frames.filter((f) => f.type === "command").length;
    await until(() => commands() === MAX_UNRESOLVED_GLOBAL, 5000, "128 forwarded");
    // One past each bound, on a server nobody holds.
    clients[0]!.dispatch(free.reg.session, start("free"));
    const perClient = await clients[0]!.action((e) => e.rejectionReason !== undefined);
    assert.match(perClient.rejectionReason, /limit 32/);
    const { c: extra } = await AhpClient.init(h, [free.reg.session], "extra");
    extra.dispatch(free.reg.session, start("free"));
    const global = await extra.action((e) => e.rejectionReason !== undefined);
    assert.match(global.rejectionReason, /limit 128/);
    assert.equal(free.be.frames.filter((f) => f.type === "command").length, 0);
    assert.equal(commands(), MAX_UNRESOLVED_GLOBAL);
    // Settle one of u0's: u0 may dispatch again (at the bound again, not past it).
    const first = a.be.frames.find((f) => f.type === "command")!;
    a.be.send({ type: "command_result", commandId: first.commandId, accepted: true });
    await clients[0]!.action((e) => e.action.type === "paratenic/mcpLifecycleAccepted");
    clients[0]!.dispatch(a.reg.session, start(first.command.action.id as string));
    await until(() => commands() === MAX_UNRESOLVED_GLOBAL + 1, 3000, "slot reused");
    for (const c of [...clients, extra]) c.close();
    a.be.close();
    b.be.close();
    free.be.close();
  }));

test("resource_action is v6+, owned, and limited to what this host projects", () =>
  withHost(async (h) => {
    const v5 = await session(h, 5, [TOOLS_SERVER], "five");
    v5.be.send({ type: "event", session: v5.reg.session, event: { type: "resource_action", action: { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state: { kind: "stopped" } } } });
    assert.match((await v5.be.nextType("error")).message, /requires protocol version 6/);
    const { be, reg } = await session(h, 8, [TOOLS_SERVER], "eight");
    const bad: Array<[Json, RegExp]> = [
      [{ type: "resource_action", action: { type: "session/mcpServerStateChanged", id: "ghost", state: { kind: "stopped" } } }, /no advertised MCP server/],
      [{ type: "resource_action", action: { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state: { kind: "flying" } } }, /invalid session\/mcpServerStateChanged/],
      [{ type: "resource_action", channel: v5.reg.session, action: { type: "session/titleChanged", title: "x" } }, /not owned/],
      [{ type: "resource_action", action: { type: "session/titleChanged", title: "x" } }, /derived by the host: send the title_changed event instead/],
      [{ type: "resource_action", action: { type: "session/mcpServerBackgroundRequested", id: "x" } }, /not projected by this host/],
      [{ type: "resource_snapshot", resource: `${reg.session}/annotations`, kind: "annotations", state: {} }, /invalid annotations state/],
    ];
    for (const [event, re] of bad) {
      be.send({ type: "event", session: reg.session, event });
      const e = await be.nextType("error");
      assert.match(e.message, re);
    }
    assert.equal(be.closed, false);
    be.close();
    v5.be.close();
  }));

test("unresolved markers are durable: after a restart the sequence and server stay blocked until the backend reports", async () => {
  const home = tempHome();
  const h1 = await startHost({ home, log: () => {} });
  let session = "";
  try {
    const { be, reg } = await session6(h1);
    session = reg.session as string;
    const { c } = await AhpClient.init(h1, [reg.session], "durable");
    c.dispatch(reg.session, start());
    await be.nextType("command"); // delivered; the host stops before any answer
    c.close();
    be.close();
  } finally {
    await h1.close();
  }
  // An unreadable marker next to the real one is reported, not trusted.
  const store = new HostStore(join(home, "host", "host.db"));
  const kept = JSON.parse(store.getMeta(MARKER_KEY)!) as Json[];
  assert.equal(kept.length, 1);
  store.putMetaNow(MARKER_KEY, JSON.stringify([...kept, { nonsense: true }]));
  store.close();
  const logs: string[] = [];
  const h2 = await startHost({ home, log: (m) => logs.push(m) });
  try {
    const { be, reg } = await session6(h2);
    assert.equal(reg.session, session);
    const { c } = await AhpClient.init(h2, [reg.session], "durable");
    const seq = c.dispatch(reg.session, start()); // the same client sequence as before the restart
    assert.match((await c.action((e) => e.rejectionReason !== undefined)).rejectionReason, /already dispatched/);
    assert.equal((await c.request("paratenic/dispatchOutcome", { channel: reg.session, clientSeq: seq })).result.outcome, "indeterminate");
    assert.ok(logs.some((l) => /1 unreadable unresolved-sequence marker/.test(l)));
    c.dispatch(reg.session, stop());
    assert.match((await c.action((e) => e.rejectionReason !== undefined && e.origin.clientSeq === seq + 1)).rejectionReason, /still unresolved/);
    // The backend's authoritative state releases the server (not the old sequence).
    be.send({ type: "event", session: reg.session, event: { type: "resource_action", action: { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state: { kind: "ready" } } } });
    await c.action((e) => e.action.type === "session/mcpServerStateChanged");
    c.dispatch(reg.session, stop());
    const cmd = await be.nextType("command");
    assert.equal(cmd.command.action.type, "session/mcpServerStopRequested");
    c.close();
    be.close();
  } finally {
    await h2.close();
  }
});
