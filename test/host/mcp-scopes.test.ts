/**
 * MCP side channels on multiplexed provider connections (v8 routes over a v5+ provider):
 * `provider_registered.scopedMcp`, logical-route reply ownership, and content-free refusals of
 * bare, foreign and retired scopes without disturbing healthy siblings.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { McpClient, TOOLS_SERVER } from "./mcp-helpers.js";
import { mcpHub } from "../../src/protocols/host/mcp-channels.js";

async function register(be: FakeBackend, requestId: string, sourceId: string, provider = "prov"): Promise<Json> {
  be.send({ type: "register_session", requestId, hello: { protocolVersion: 8, instanceId: "si", provider, sourceId, mcpServers: [TOOLS_SERVER] } });
  const r = await be.next((f) => f.requestId === requestId);
  assert.equal(r.type, "session_registered", JSON.stringify(r));
  return r;
}

async function channelOf(c: AhpClient, session: string): Promise<string> {
  const snap = await c.request("subscribe", { channel: session });
  return (snap.result.snapshot.state.customizations as Json[])[0]!.channel as string;
}

const listChanged = { jsonrpc: "2.0", method: "notifications/tools/list_changed" };

test("scopedMcp is advertised from v5 on; absent below", () =>
  withHost(async (h) => {
    const v8 = await FakeBackend.provider(h, 8, ["p8"]);
    assert.equal(v8.reg.scopedMcp, true);
    const v5 = await FakeBackend.provider(h, 5, ["p5"]);
    assert.equal(v5.reg.scopedMcp, true);
    const v4 = await FakeBackend.provider(h, 4, ["p4"]);
    assert.equal(v4.reg.scopedMcp, undefined, "absence means unsupported");
    for (const b of [v8, v5, v4]) b.be.close();
  }));

test("replies are accepted only from the route's current physical owner; copied UUIDs consume nothing", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 8, ["prov"]);
    const { be: other } = await FakeBackend.provider(h, 8, ["other"]);
    const a = await register(be, "r1", "sa");
    const b = await register(be, "r2", "sb"); // a sibling reusing the same serverId
    const { c } = await AhpClient.init(h, ["ahp-root://"], "watch");
    const chA = await channelOf(c, a.session);
    const chB = await channelOf(c, b.session);
    assert.notEqual(chA, chB, "sessions reusing a serverId get distinct channels");
    const m = await McpClient.open(h);
    m.request(chA, "x", "tools/list");
    m.request(chB, "y", "tools/list");
    const qa = await be.next((f) => f.type === "mcp_request" && f.session === a.session);
    const qb = await be.next((f) => f.type === "mcp_request" && f.session === b.session);
    assert.equal(qa.backendConnectionId, a.backendConnectionId, "the exact logical ID distinguishes the sessions");
    assert.equal(qb.backendConnectionId, b.backendConnectionId);
    // A different provider copies the UUID: refused, content-free; the waiter is untouched.
    other.send({ type: "mcp_response", requestId: qa.requestId, message: { jsonrpc: "2.0", id: qa.requestId, result: { stolen: true } } });
    const refusal = await other.nextType("error");
    assert.deepEqual(Object.keys(refusal).sort(), ["code", "message", "type"]);
    assert.equal(refusal.code, "mcp_scope_refused");
    assert.ok(!JSON.stringify(refusal).includes(qa.requestId), "content-free");
    // The owner names the sibling's logical ID for this request: refused too.
    be.send({ type: "mcp_response", requestId: qa.requestId, backendConnectionId: b.backendConnectionId, message: { jsonrpc: "2.0", id: qa.requestId, result: {} } });
    assert.equal((await be.nextType("error")).code, "mcp_scope_refused");
    assert.equal(mcpHub(h.state).pending.size, 2);
    be.send({ type: "mcp_response", requestId: qa.requestId, backendConnectionId: a.backendConnectionId, message: { jsonrpc: "2.0", id: qa.requestId, result: { tools: ["a"] } } });
    assert.deepEqual((await m.reply("x")).result, { tools: ["a"] });
    // Re-registering b retires its old route: b's delivered waiter becomes indeterminate, and a
    // reply from the retired route consumes nothing.
    const b2 = await register(be, "r3", "sb");
    assert.notEqual(b2.backendConnectionId, b.backendConnectionId);
    assert.equal((await m.reply("y")).error.data.outcome, "indeterminate");
    be.send({ type: "mcp_response", requestId: qb.requestId, backendConnectionId: b.backendConnectionId, message: { jsonrpc: "2.0", id: qb.requestId, result: {} } });
    assert.equal((await be.nextType("error")).code, "mcp_scope_refused");
    assert.equal(m.replies().filter((r) => r.id === "y").length, 1);
    assert.equal(be.closed, false);
    assert.equal(other.closed, false);
    m.close();
    c.close();
    be.close();
    other.close();
  }));

test("scoped notifications: relayed on the canonical channel; bare, foreign, retired and unadvertised refused", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 8, ["prov"]);
    const { be: other } = await FakeBackend.provider(h, 8, ["other"]);
    const a = await register(be, "r1", "sa");
    const sib = await register(be, "r2", "sib");
    const foreign = await register(other, "f1", "sf", "other");
    const m = await McpClient.open(h, [a.session, sib.session], "sub");
    const chA = await channelOf(m.c, a.session);
    const notes = () => m.mcp.filter((x) => x.method !== undefined);

    // Valid scope: relayed to session subscribers; a supplied channel cannot override routing.
    be.send({ type: "mcp_notification", serverId: TOOLS_SERVER.id, backendConnectionId: a.backendConnectionId, message: { ...listChanged, channel: "mcp://elsewhere" } });
    await until(() => notes().length === 1, 3000, "relayed notification");
    assert.deepEqual(notes()[0], { jsonrpc: "2.0", method: "notifications/tools/list_changed", channel: chA });

    const refusals: Array<[FakeBackend, Json]> = [
      [be, { serverId: TOOLS_SERVER.id, message: listChanged }], // bare provider scope
      [be, { serverId: TOOLS_SERVER.id, backendConnectionId: foreign.backendConnectionId, message: listChanged }], // foreign
      [be, { serverId: TOOLS_SERVER.id, backendConnectionId: "never-issued", message: listChanged }],
      [be, { serverId: "unknown-server", backendConnectionId: a.backendConnectionId, message: listChanged }],
      [be, { serverId: TOOLS_SERVER.id, backendConnectionId: a.backendConnectionId, session: sib.session, message: listChanged }], // session/route mismatch
    ];
    for (const [conn, frame] of refusals) {
      conn.send({ type: "mcp_notification", ...frame });
      const e = await conn.nextType("error");
      assert.equal(e.code, "mcp_scope_refused", JSON.stringify(frame));
      assert.deepEqual(Object.keys(e).sort(), ["code", "message", "type"]);
    }
    // Retired: unregister the sibling route; its old scope is refused, `a` keeps working.
    be.send({ type: "unregister_session", requestId: "u1", backendConnectionId: sib.backendConnectionId });
    await be.next((f) => f.requestId === "u1");
    be.send({ type: "mcp_notification", serverId: TOOLS_SERVER.id, backendConnectionId: sib.backendConnectionId, message: listChanged });
    assert.equal((await be.nextType("error")).code, "mcp_scope_refused");
    // Unadvertised method on a valid scope.
    be.send({ type: "mcp_notification", serverId: TOOLS_SERVER.id, backendConnectionId: a.backendConnectionId, message: { jsonrpc: "2.0", method: "notifications/resources/list_changed" } });
    assert.equal((await be.nextType("error")).code, "validation_error");
    be.send({ type: "mcp_notification", serverId: TOOLS_SERVER.id, backendConnectionId: a.backendConnectionId, message: listChanged });
    await until(() => notes().length === 2, 3000, "healthy route still relays");
    assert.equal(be.closed, false, "refusals never disconnect healthy siblings");
    assert.equal(other.closed, false);
    m.close();
    be.close();
    other.close();
  }));

test("a dedicated v5 session may omit the scope; a wrong logical ID is refused", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 5, sourceId: "d", mcpServers: [TOOLS_SERVER] });
    const m = await McpClient.open(h, [reg.session], "sub");
    be.send({ type: "mcp_notification", serverId: TOOLS_SERVER.id, message: listChanged });
    await until(() => m.mcp.some((x) => x.method === listChanged.method), 3000, "relayed");
    be.send({ type: "mcp_notification", serverId: TOOLS_SERVER.id, backendConnectionId: "not-mine", message: listChanged });
    assert.equal((await be.nextType("error")).code, "mcp_scope_refused");
    assert.equal(be.closed, false);
    m.close();
    be.close();
  }));
