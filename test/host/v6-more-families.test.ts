/**
 * More backend protocol v6 `resource_action` families (spec "Events": "an official AHP action for
 * the owning session, chat, changeset, or annotations channel"): a tool call whose input the
 * backend streams (`chat/toolCallStart`, `chat/toolCallDelta`), made ready by the neutral
 * `tool_started` or `tool_confirmation_requested`; and the families still refused with their
 * fixed message. Fake v6 backend over the real socket, AHP client over the real WebSocket; after
 * every step the chat rebuilt from envelopes by the client reducer (src/client/ahp/reducer.ts)
 * over the first snapshot must equal a fresh snapshot.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, type Json } from "./helpers.js";
import { TOOLS_SERVER } from "./mcp-helpers.js";
import { startHost } from "../../src/protocols/host/host.js";
import { reduceChat, type Chat } from "../../src/client/ahp/reducer.js";
import { MAX_DELTA, MAX_PARTIAL_INPUT } from "../../src/protocols/host/resource-actions.js";

const ra = (channel: string, action: Json): Json => ({ type: "resource_action", channel, action });

test("chat/toolCallStart and chat/toolCallDelta: streamed tool input, validated, reduced, published, then made ready", async () => {
  const h = await startHost({ home: tempHome(), log: () => {} });
  try {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "deltas", mcpServers: [TOOLS_SERVER], toolCapabilities: { confirmations: true } });
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    const ev = (event: Json) => be.send({ type: "event", session: reg.session, event });
    const { c, result } = await AhpClient.init(h, [reg.session, reg.chat], "deltas-client");
    const chat0 = (result.snapshots as Json[]).find((s) => s.resource === reg.chat)!;

    /** The client reducer over the first snapshot, fed every accepted envelope since, equals a fresh snapshot. */
    const consistent = async (what: string): Promise<Json> => {
      const chat = { ...structuredClone(chat0.state as Json), queuedMessages: [], rev: 0 } as unknown as Chat;
      for (const x of c.actions(reg.chat)) if (x.rejectionReason === undefined && x.serverSeq > (chat0.fromSeq as number)) reduceChat(chat, x.action);
      const fresh = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
      assert.deepEqual(chat.activeTurn, fresh.activeTurn, `${what}: the active turn rebuilt from envelopes equals a fresh snapshot`);
      assert.deepEqual(chat.turns, fresh.turns, `${what}: the turns rebuilt from envelopes equal a fresh snapshot`);
      return fresh;
    };
    const tool = (state: Json, id: string): Json => ((state.activeTurn ?? (state.turns as Json[]).at(-1)) as Json).responseParts.find((p: Json) => p.toolCall?.toolCallId === id).toolCall;
    const seen = (pred: (a: Json) => boolean, what: string) => c.action((e) => e.channel === reg.chat && pred(e.action), what);

    c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "t1", startedAt: new Date().toISOString(), message: { text: "search", origin: { kind: "user" } } });
    const cmd = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    ev({ type: "agent_started" });
    ev({ type: "tool_started", toolCallId: "plain", toolName: "read" });

    // Open a streaming, MCP-contributed call.
    ev(ra(reg.chat, { type: "chat/toolCallStart", turnId: "t1", toolCallId: "s1", toolName: "search", displayName: "Search", intention: "Find the config", contributor: { kind: "mcp", customizationId: TOOLS_SERVER.id } }));
    await seen((a) => a.type === "chat/toolCallStart" && a.toolCallId === "s1", "start s1");
    let fresh = await consistent("after chat/toolCallStart");
    assert.deepEqual(tool(fresh, "s1"), { toolCallId: "s1", toolName: "search", displayName: "Search", intention: "Find the config", contributor: { kind: "mcp", customizationId: TOOLS_SERVER.id }, status: "streaming" });

    // Refused, each with its fixed message, and nothing published.
    const refusals: Array<[Json, RegExp]> = [
      [{ type: "chat/toolCallDelta", turnId: "t1", toolCallId: "s1", content: 7 }, /invalid "chat\/toolCallDelta": content /],
      [{ type: "chat/toolCallDelta", turnId: "t1", toolCallId: "s1", content: "x", extra: true }, /invalid "chat\/toolCallDelta"/],
      [{ type: "chat/toolCallDelta", turnId: "t1", toolCallId: "s1", content: "x".repeat(MAX_DELTA + 1) }, /invalid "chat\/toolCallDelta": content /],
      [{ type: "chat/toolCallDelta", turnId: "t0", toolCallId: "s1", content: "x" }, /chat\/toolCallDelta names no active turn of this chat$/],
      [{ type: "chat/toolCallDelta", turnId: "t1", toolCallId: "nope", content: "x" }, /chat\/toolCallDelta: unknown toolCallId "nope"$/],
      [{ type: "chat/toolCallDelta", turnId: "t1", toolCallId: "plain", content: "x" }, /chat\/toolCallDelta needs a streaming tool call/],
      [{ type: "chat/toolCallStart", turnId: "t1", toolCallId: "s1", toolName: "search", displayName: "Search" }, /chat\/toolCallStart: duplicate toolCallId "s1"$/],
      [{ type: "chat/toolCallStart", turnId: "t1", toolCallId: "s9", toolName: "search", displayName: "Search", contributor: { kind: "mcp", customizationId: "ghost" } }, /contributor "ghost" names no MCP server of this session/],
      [{ type: "chat/toolCallStart", turnId: "t1", toolCallId: "s9", toolName: "search", displayName: "Search", contributor: { kind: "client", clientId: "x" } }, /invalid "chat\/toolCallStart": contributor/],
      // Projected now (chat-09.ts, test/host/chat-09.test.ts), and refused while the turn still runs.
      [{ type: "chat/turnResume", turnId: "t1" }, /chat\/turnResume: a turn is already running in this chat$/],
    ];
    for (const [action, re] of refusals) {
      ev(ra(reg.chat, action));
      assert.match((await be.nextType("error")).message, re, JSON.stringify(action).slice(0, 200));
    }
    for (const [action, re] of [
      [{ type: "session/customizationUpdated", customization: { id: "x" } }, /^event refused: invalid session\/customizationUpdated: type /],
      [{ type: "session/noSuchAction" }, /resource_action "session\/noSuchAction" is not projected by this host$/],
    ] as Array<[Json, RegExp]>) {
      ev(ra(reg.session, action));
      assert.match((await be.nextType("error")).message, re);
    }
    assert.equal(be.closed, false, "refusals keep the connection");

    // Deltas append; the message is replaced.
    ev(ra(reg.chat, { type: "chat/toolCallDelta", turnId: "t1", toolCallId: "s1", content: '{"q":', invocationMessage: "Searching" }));
    await seen((a) => a.type === "chat/toolCallDelta" && a.content === '{"q":', "delta 1");
    fresh = await consistent("after the first delta");
    assert.deepEqual([tool(fresh, "s1").partialInput, tool(fresh, "s1").invocationMessage], ['{"q":', "Searching"]);
    ev(ra(reg.chat, { type: "chat/toolCallDelta", turnId: "t1", toolCallId: "s1", content: '"config"}', invocationMessage: { markdown: "Searching for `config`" } }));
    await seen((a) => a.type === "chat/toolCallDelta" && a.content === '"config"}', "delta 2");
    fresh = await consistent("after the second delta");
    assert.deepEqual([tool(fresh, "s1").partialInput, tool(fresh, "s1").invocationMessage], ['{"q":"config"}', { markdown: "Searching for `config`" }]);

    // tool_started for the streaming call makes it ready and running (no second start).
    ev({ type: "tool_started", toolCallId: "s1", toolName: "search", input: '{"q":"config"}' });
    await seen((a) => a.type === "chat/toolCallReady" && a.toolCallId === "s1", "ready s1");
    fresh = await consistent("after tool_started");
    const ready = tool(fresh, "s1");
    assert.deepEqual([ready.status, ready.toolInput, ready.partialInput, ready.contributor.customizationId], ["running", '{"q":"config"}', undefined, TOOLS_SERVER.id]);
    assert.equal(c.actions(reg.chat).filter((e) => e.action.type === "chat/toolCallStart" && e.action.toolCallId === "s1").length, 1);
    ev(ra(reg.chat, { type: "chat/toolCallDelta", turnId: "t1", toolCallId: "s1", content: "late" }));
    assert.match((await be.nextType("error")).message, /chat\/toolCallDelta needs a streaming tool call/);
    ev({ type: "tool_started", toolCallId: "s1", toolName: "search" });
    assert.match((await be.nextType("error")).message, /duplicate toolCallId s1$/);
    ev({ type: "tool_completed", toolCallId: "s1", toolName: "search", output: "1 hit", isError: false });

    // A second streaming call goes through confirmation; tool_started naming another server is refused.
    ev(ra(reg.chat, { type: "chat/toolCallStart", turnId: "t1", toolCallId: "s2", toolName: "write", displayName: "Write" }));
    ev({ type: "tool_started", toolCallId: "s2", toolName: "write", mcpServerId: TOOLS_SERVER.id });
    assert.match((await be.nextType("error")).message, /tool_started.mcpServerId differs from the contributor of streaming call s2$/);
    ev({ type: "tool_confirmation_requested", toolCallId: "s2", title: "Write the file?" });
    await seen((a) => a.type === "chat/toolCallReady" && a.toolCallId === "s2", "ready s2");
    fresh = await consistent("after tool_confirmation_requested");
    assert.equal(tool(fresh, "s2").status, "pending-confirmation");

    // Limits: a delta of exactly MAX_DELTA is accepted; the streamed input holds exactly MAX_PARTIAL_INPUT.
    ev(ra(reg.chat, { type: "chat/toolCallStart", turnId: "t1", toolCallId: "big", toolName: "write", displayName: "Write" }));
    const chunk = "y".repeat(MAX_DELTA);
    for (let i = 0; i < MAX_PARTIAL_INPUT / MAX_DELTA; i++) ev(ra(reg.chat, { type: "chat/toolCallDelta", turnId: "t1", toolCallId: "big", content: chunk }));
    ev(ra(reg.chat, { type: "chat/toolCallDelta", turnId: "t1", toolCallId: "big", content: "z" }));
    assert.match((await be.nextType("error")).message, /chat\/toolCallDelta: the streamed input would exceed 1,048,576 characters$/);
    fresh = await consistent("at the streamed-input limit");
    assert.equal(tool(fresh, "big").partialInput.length, MAX_PARTIAL_INPUT);

    // The turn's end cancels the calls still streaming or waiting.
    ev({ type: "settled", cancelled: false });
    await seen((a) => a.type === "chat/turnComplete", "turn complete");
    fresh = await consistent("after the turn ended");
    assert.deepEqual([tool(fresh, "s1").status, tool(fresh, "s2").status, tool(fresh, "big").status, tool(fresh, "big").partialInput], ["completed", "cancelled", "cancelled", undefined]);
    await be.roundTrip();
    assert.deepEqual(be.frames.filter((f) => f.type === "error"), [], "no error beyond the refusals asserted above");
    assert.deepEqual(c.invalid, [], "every published action matches the official schema");
    c.close();
    be.close();
  } finally {
    await h.close();
  }
});
