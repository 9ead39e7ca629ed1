/**
 * MCP server status over `berth stdio` and the daemon's SCV socket (Berth extension `session.mcp`): a session's own servers start when the
 * session starts, in its cwd; the reply lists each with its state, tool count and, for a server that failed to
 * start, a one-line reason; a turn offers the ready server's tools and not the failed one's. `session.tools` lists
 * the built-ins and the ready server's tools (none of the failed one's; none at all for a `no_tools` session).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { MAX_SESSION_MCP_SERVERS } from "../../src/protocols/scv/wire.js";
import { openTransport, startRig, type Msg, type Rig, type ScvClient, type Transport } from "./client.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-server.js", import.meta.url));

/** Asks `session.mcp` until no server is `starting` (each answer is awaited: no fixed sleep). */
async function settledStatus(c: ScvClient, sid: string): Promise<Msg> {
  for (;;) {
    const id = c.request({ type: "session.mcp", session_id: sid });
    const r = await c.reply(id, ["session.mcp"]);
    assert.equal(r.type, "session.mcp", JSON.stringify(r));
    if ((r.servers as Msg[]).every((s) => s.state !== "starting")) return r;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

for (const name of ["stdio", "socket"] as const)
describe(`scv session.mcp and session.tools over ${name}`, () => {
  let rig: Rig;
  let t: Transport;
  before(async () => {
    rig = await startRig();
    t = await openTransport(name, rig);
  });
  after(async () => {
    await t.close();
    await rig.fake.close();
  });

  it("a session.mcp sent as soon as session.started arrives lists the session's servers; the model is described", async () => {
    // session.started is written only once the session's servers are registered (its model is resolved meanwhile).
    const c = await t.open();
    // A server may be named `__proto__` (an own key of the parsed JSON): before, it silently vanished from the session.
    const servers = JSON.parse(`{"one":{"command":"x"},"two":{"command":"x"},"__proto__":{"command":"x"}}`) as Record<string, Msg>;
    for (const k of Object.keys(servers)) servers[k] = { command: process.execPath, args: [FIXTURE] };
    const s = await c.open({ mcp_servers: servers });
    assert.equal(s.model, "fake-model");
    assert.equal(typeof s.context_max_tokens, "number");
    const r = await c.reply(c.request({ type: "session.mcp", session_id: s.session_id }), ["session.mcp"]);
    assert.deepEqual((r.servers as Msg[]).map((x) => x.name).sort(), ["__proto__", "one", "two"]);
    c.end();
    await c.closed;
  });

  it(`mcp_servers: ${MAX_SESSION_MCP_SERVERS} servers start; one more is invalid_request naming the bound, and the connection goes on`, async () => {
    const c = await t.open();
    await c.initialize();
    const servers = (n: number): Record<string, Msg> =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`s${i}`, { command: process.execPath, args: [FIXTURE, "--exit-at-start"] }]));
    const over = await c.reply(c.request({ type: "session.start", cwd: tmpdir(), mcp_servers: servers(MAX_SESSION_MCP_SERVERS + 1) }), ["session.started"]);
    assert.deepEqual(
      [over.type, over.code, over.message],
      ["error", "invalid_request", "`mcp_servers` holds at most 16 servers; leave out the ones this session does not need"],
    );
    const at = await c.reply(c.request({ type: "session.start", cwd: tmpdir(), mcp_servers: servers(MAX_SESSION_MCP_SERVERS) }), ["session.started"]);
    assert.equal(at.type, "session.started", JSON.stringify(at));
    const st = await settledStatus(c, at.session_id as string);
    assert.equal((st.servers as Msg[]).length, MAX_SESSION_MCP_SERVERS);
    c.end();
    await c.closed;
  });

  it("lists the session's MCP servers with their states; a failed one is reported with its reason", async () => {
    const c = await t.open();
    const s = await c.open({
      mcp_servers: { good: { command: process.execPath, args: [FIXTURE] }, broken: { command: process.execPath, args: [FIXTURE, "--exit-at-start"] } },
    });
    const sid = s.session_id as string;
    const st = await settledStatus(c, sid);
    assert.deepEqual(Object.keys(st).sort(), ["request_id", "seq", "servers", "session_id", "type"]);
    const servers = st.servers as Msg[];
    assert.deepEqual(
      servers.map((x) => [x.name, x.state]),
      [
        ["broken", "failed"],
        ["good", "ready"],
      ],
    );
    assert.match(servers[0]!.error as string, /^connect failed: /);
    assert.ok((servers[1]!.tools as number) > 0);
    assert.equal(servers[1]!.error, null);
    // `session.tools`: the built-ins, then the ready server's tools; nothing of the failed one.
    const tl = await c.reply(c.request({ type: "session.tools", session_id: sid }), ["session.tools"]);
    assert.deepEqual(Object.keys(tl).sort(), ["request_id", "seq", "session_id", "tools", "type"]);
    const tools = tl.tools as Msg[];
    const read = tools.find((x) => x.name === "read");
    assert.deepEqual(read && { risk: read.risk, server: read.server }, { risk: "read_only", server: null });
    const echo = tools.find((x) => x.name === "mcp__good__echo");
    assert.deepEqual(echo && { risk: echo.risk, server: echo.server }, { risk: "network", server: "good" });
    assert.equal(typeof echo?.description, "string");
    assert.equal(tools.filter((x) => x.server !== null).length, servers[1]!.tools);
    assert.ok(tools.every((x) => x.server !== "broken"));
    const n = rig.fake.requests.length;
    const r = await c.turn(sid, "hi");
    assert.equal(r.terminal.type, "turn.completed");
    const body = rig.fake.requests[n]!.body;
    assert.match(body, /mcp__good__echo/);
    assert.doesNotMatch(body, /mcp__broken__/);
    // A session without servers answers an empty list; another session's ID is refused.
    const c2 = await t.open();
    const s2 = await c2.open();
    const none = await c2.reply(c2.request({ type: "session.mcp", session_id: s2.session_id }), ["session.mcp"]);
    assert.deepEqual(none.servers, []);
    const noneTools = await c2.reply(c2.request({ type: "session.tools", session_id: s2.session_id }), ["session.tools"]);
    assert.ok((noneTools.tools as Msg[]).some((x) => x.name === "bash"));
    assert.ok((noneTools.tools as Msg[]).every((x) => x.server === null));
    // A tool-free session offers no tools.
    const c3 = await t.open();
    const s3 = await c3.open({ no_tools: true });
    const bare = await c3.reply(c3.request({ type: "session.tools", session_id: s3.session_id }), ["session.tools"]);
    assert.deepEqual(bare.tools, []);
    c3.end();
    await c3.closed;
    const otherTools = await c2.reply(c2.request({ type: "session.tools", session_id: sid }), ["session.tools"]);
    assert.equal(otherTools.code, "session_not_found");
    const other = await c2.reply(c2.request({ type: "session.mcp", session_id: sid }), ["session.mcp"]);
    assert.equal(other.type, "error");
    assert.equal(other.code, "session_not_found");
    assert.deepEqual(c.seqErrors, []);
    c.end();
    c2.end();
    await c.closed;
    await c2.closed;
  });
});
