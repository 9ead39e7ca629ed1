/**
 * AHP 0.9 `session/mcpServerBackgroundRequested` (mcp-background.ts): a client sends a blocking MCP
 * server start to the background. Fake v6 and v5 backends over the real socket, AHP clients over
 * the real WebSocket; the session rebuilt from envelopes by the project's client reducer over the
 * first snapshot equals a fresh snapshot after every step.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, withHost, type Json } from "./helpers.js";
import { TOOLS_SERVER } from "./mcp-helpers.js";
import { reduceSession, type SessionState } from "../../src/client/ahp/reducer.js";

const bg = (id = TOOLS_SERVER.id): Json => ({ type: "session/mcpServerBackgroundRequested", id });

test("session/mcpServerBackgroundRequested: only a blocking start, forwarded, reduced and echoed on accept", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "mcp-bg", mcpServers: [TOOLS_SERVER] });
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    const { c, result } = await AhpClient.init(h, [reg.session], "bg");
    const { c: other } = await AhpClient.init(h, [reg.session], "other");
    const first = (result.snapshots as Json[]).find((x) => x.resource === reg.session)!;
    let mirror = structuredClone(first.state) as SessionState;
    let seen = 0;
    const check = async (step: string): Promise<Json> => {
      const fresh = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
      for (const e of c.actions().slice(seen)) if (e.channel === reg.session && e.rejectionReason === undefined) mirror = reduceSession(mirror, structuredClone(e.action));
      seen = c.actions().length;
      assert.deepEqual((mirror as unknown as Json).customizations, fresh.customizations, `${step}: customizations rebuilt from envelopes`);
      assert.deepEqual(c.invalid, [], `${step}: every message validates`);
      return (fresh.customizations as Json[]).find((x) => x.id === TOOLS_SERVER.id)!;
    };
    const reject = async (action: Json, reason: string) => {
      const seq = c.dispatch(reg.session, action);
      assert.equal((await c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, reason, JSON.stringify(action));
    };
    const report = async (state: Json) => {
      be.send({ type: "event", session: reg.session, event: { type: "resource_action", action: { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state } } });
      await c.action((e) => e.action.type === "session/mcpServerStateChanged" && JSON.stringify(e.action.state) === JSON.stringify(state));
    };

    // Ready, or starting without blocking: nothing to send to the background.
    await reject(bg(), "the MCP server is not starting in the foreground (McpServerStartingState.blocking)");
    await report({ kind: "starting" });
    await reject(bg(), "the MCP server is not starting in the foreground (McpServerStartingState.blocking)");
    await report({ kind: "starting", blocking: true });
    assert.deepEqual((await check("blocking start")).state, { kind: "starting", blocking: true });
    await reject(bg("ghost"), "no MCP server customization with that id in this session");
    await reject({ type: "session/mcpServerBackgroundRequested" }, "session/mcpServerBackgroundRequested needs id: an MCP server of the session");
    await reject({ ...bg(), extra: 1 }, "session/mcpServerBackgroundRequested needs id: an MCP server of the session");
    await be.roundTrip();
    assert.equal(be.frames.some((f) => f.type === "command"), false, "nothing forwarded for a refused request");

    // The backend refuses: state unchanged.
    const s1 = c.dispatch(reg.session, bg());
    let cmd = await be.nextType("command");
    assert.deepEqual(cmd.command, { type: "apply_resource_action", channel: reg.session, action: bg() });
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: false, error: "no" });
    assert.equal((await c.action((e) => e.origin?.clientSeq === s1)).rejectionReason, "backend refused the action");
    assert.deepEqual((await check("refused")).state, { kind: "starting", blocking: true });

    // Accepted: `blocking` is cleared, echoed with the client's origin, seen by other clients.
    const s2 = c.dispatch(reg.session, bg());
    cmd = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    const echo = await c.action((e) => e.origin?.clientSeq === s2);
    assert.equal(echo.rejectionReason, undefined);
    assert.deepEqual(echo.action, bg());
    await other.action((e) => e.action.type === "session/mcpServerBackgroundRequested" && e.origin?.clientId === "bg");
    assert.deepEqual((await check("backgrounded")).state, { kind: "starting" });
    await reject(bg(), "the MCP server is not starting in the foreground (McpServerStartingState.blocking)");

    // The start finished before the backend answered: the request no longer applies.
    await report({ kind: "starting", blocking: true });
    const s3 = c.dispatch(reg.session, bg());
    cmd = await be.nextType("command");
    await report({ kind: "ready" });
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.match((await c.action((e) => e.origin?.clientSeq === s3)).rejectionReason, /^the MCP server's start changed meanwhile: /);
    assert.equal((await check("finished meanwhile")).state.kind, "ready");
    other.close();
    c.close();
    be.close();

    // Below protocol 6 the backend cannot be asked.
    const v5 = await FakeBackend.session(h, { protocolVersion: 5, sourceId: "mcp-bg-5", mcpServers: [TOOLS_SERVER] });
    const { c: c5 } = await AhpClient.init(h, [v5.reg.session], "bg5");
    const seq = c5.dispatch(v5.reg.session, bg());
    assert.equal((await c5.action((e) => e.origin?.clientSeq === seq)).rejectionReason, "the session's backend does not accept resource actions (needs backend protocol 6)");
    c5.close();
    v5.be.close();
  }));
