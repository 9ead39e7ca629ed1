/**
 * Backend protocol v4 client tools (spec "Events": `client_tool_requested`; "Commands":
 * `client_tool_content`, `complete_client_tool`) and AHP active clients (`session/activeClientSet`,
 * `session/activeClientRemoved`, the client `ToolCallContributor`, the session
 * `toolClientExecution` request). A spec-derived fake v4 backend speaks over the real backend
 * socket; AHP clients speak over the real WebSocket. State rebuilt with the client reducers
 * (src/client/ahp/reducer.ts) from envelopes over an earlier snapshot must equal a fresh snapshot.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { reduceChat, reduceSession, type Chat, type SessionState } from "../../src/client/ahp/reducer.js";
import { CLIENT_LEFT, MAX_ACTIVE_CLIENT_BYTES, MAX_CLIENT_TOOLS, NOT_CONNECTED_CALL, REPLACED_CALL } from "../../src/protocols/host/client-tools.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const CLIP = { name: "read_clipboard", title: "Read clipboard", description: "Reads the user's clipboard", inputSchema: { type: "object", properties: {} } };

async function setup(h: HostHandle, hello: Json = {}): Promise<{ be: FakeBackend; reg: Json; ev: (e: Json) => void }> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "ct-src", toolCapabilities: { clientTools: true }, ...hello });
  assert.equal(reg.type, "registered", JSON.stringify(reg));
  const ev = (event: Json) => be.send({ type: "event", session: reg.session, event });
  return { be, reg, ev };
}

/** An AHP client subscribed to the session and its primary chat. */
async function client(h: HostHandle, reg: Json, clientId: string): Promise<AhpClient> {
  const { c } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat], clientId);
  return c;
}

async function echo(c: AhpClient, clientId: string, seq: number): Promise<Json> {
  return c.action((e) => e.origin?.clientId === clientId && e.origin.clientSeq === seq, `echo ${clientId}#${seq}`);
}

test("client tools: a v4 backend's request reaches the active client; its content and result reach the backend", async () => {
  await withHost(async (h) => {
    const { be, reg, ev } = await setup(h);
    const a = await client(h, reg, "ca");
    const b = await client(h, reg, "cb");
    const session0 = (await a.request("subscribe", { channel: reg.session })).result.snapshot as Json;
    const chat0 = (await a.request("subscribe", { channel: reg.chat })).result.snapshot as Json;
    assert.deepEqual(session0.state.activeClients, []);

    let seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "ca", displayName: "Laptop", tools: [CLIP] } });
    let e = await echo(a, "ca", seq);
    assert.equal(e.rejectionReason, undefined, e.rejectionReason);
    // Another connection may not take over that identity, nor set someone else's entry.
    const b1 = b.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: [] } });
    assert.match((await echo(b, "cb", b1)).rejectionReason, /only set its own active-client entry/);
    const b2 = b.dispatch(reg.session, { type: "session/activeClientRemoved", clientId: "ca" });
    assert.match((await echo(b, "cb", b2)).rejectionReason, /only remove itself/);
    const b3 = b.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "cb", tools: [{ name: "other" }] } });
    assert.equal((await echo(b, "cb", b3)).rejectionReason, undefined);

    ev({ type: "user_message", text: "what is on my clipboard?", turnId: "t1" });
    ev({ type: "client_tool_requested", toolCallId: "ct1", toolName: "read_clipboard", input: "{}" });
    const start = await a.action((x) => x.action.type === "chat/toolCallStart");
    assert.deepEqual(start.action.contributor, { kind: "client", clientId: "ca" });
    assert.equal(start.action.displayName, "Read clipboard");
    const need = await a.action((x) => x.action.type === "session/inputNeededSet");
    assert.deepEqual([need.action.request.kind, need.action.request.clientId, need.action.request.turnId, need.action.request.toolCall.status], ["toolClientExecution", "ca", "t1", "running"]);
    const sum = await a.request("listSessions");
    assert.equal(sum.result.items[0].status, 8, "a client-execution request leaves the session InProgress, not InputNeeded");

    // Only the owning connection reports content or a result.
    const b4 = b.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result: { success: true, pastTenseMessage: "done" } });
    assert.match((await echo(b, "cb", b4)).rejectionReason, /only the client executing this tool call/);
    const b5 = b.dispatch(reg.chat, { type: "chat/toolCallContentChanged", turnId: "t1", toolCallId: "ct1", content: [{ type: "text", text: "x" }] });
    assert.match((await echo(b, "cb", b5)).rejectionReason, /only the client executing this tool call/);
    // The same clientId on another connection is not the owner either.
    const impostor = await client(h, reg, "ca");
    const i1 = impostor.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result: { success: true, pastTenseMessage: "done" } });
    assert.match((await echo(impostor, "ca", i1)).rejectionReason, /on the connection it was requested on/);
    impostor.close();

    seq = a.dispatch(reg.chat, { type: "chat/toolCallContentChanged", turnId: "t1", toolCallId: "ct1", content: [{ type: "text", text: "reading…" }] });
    let cmd = await be.nextType("command");
    assert.deepEqual([cmd.session, cmd.chat, cmd.command], [reg.session, reg.chat, { type: "client_tool_content", turnId: "t1", toolCallId: "ct1", content: [{ type: "text", text: "reading…" }] }]);
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    e = await echo(a, "ca", seq);
    assert.equal(e.rejectionReason, undefined);

    // A refused result is echoed rejected; the call keeps running and may be completed again.
    const result = { success: true, pastTenseMessage: "Read the clipboard", content: [{ type: "text", text: "hello" }] };
    seq = a.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result });
    cmd = await be.nextType("command");
    assert.deepEqual(cmd.command, { type: "complete_client_tool", turnId: "t1", toolCallId: "ct1", result });
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: false, error: "not now" });
    assert.equal((await echo(a, "ca", seq)).rejectionReason, "backend refused: not now");
    seq = a.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result });
    cmd = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    e = await echo(a, "ca", seq);
    assert.equal(e.rejectionReason, undefined);
    assert.deepEqual(e.action.result, result);
    await a.action((x) => x.action.type === "session/inputNeededRemoved" && x.action.id === need.action.request.id);
    // Once completed, nothing more is accepted for it (it is not a client call any more).
    const late = a.dispatch(reg.chat, { type: "chat/toolCallContentChanged", turnId: "t1", toolCallId: "ct1", content: [] });
    assert.match((await echo(a, "ca", late)).rejectionReason, /accepted only for a tool call executed by that client/);

    ev({ type: "text_delta", text: "Your clipboard says hello." });
    ev({ type: "settled", cancelled: false });
    await a.action((x) => x.action.type === "chat/turnComplete");
    await be.roundTrip();
    assert.equal(be.frames.filter((f) => f.type === "error").length, 0, JSON.stringify(be.frames));

    // Reducer consistency: the client reducers over the first snapshots equal fresh snapshots.
    let session = session0.state as SessionState;
    for (const x of a.actions(reg.session)) if (x.rejectionReason === undefined && x.serverSeq > session0.fromSeq) session = reduceSession(session, x.action);
    const chat = { ...(chat0.state as Json), queuedMessages: [], rev: 0 } as unknown as Chat;
    for (const x of a.actions(reg.chat)) if (x.rejectionReason === undefined && x.serverSeq > chat0.fromSeq) reduceChat(chat, x.action);
    const fresh = (await a.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    const freshChat = (await a.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    assert.deepEqual({ ...session, status: fresh.status }, fresh, "the session rebuilt from envelopes equals a fresh snapshot");
    assert.deepEqual(chat.turns, freshChat.turns, "the chat's turns rebuilt from envelopes equal a fresh snapshot");
    assert.deepEqual(fresh.activeClients.map((x: Json) => x.clientId), ["ca", "cb"]);
    assert.deepEqual(session.inputNeeded, fresh.inputNeeded);
    const tool = (t: Json) => t.responseParts.find((p: Json) => p.kind === "toolCall").toolCall;
    assert.deepEqual(tool(chat.turns.at(-1) as Json), tool(freshChat.turns.at(-1)));
    const done = tool(freshChat.turns.at(-1));
    assert.deepEqual([done.status, done.success, done.contributor, done.content], ["completed", true, { kind: "client", clientId: "ca" }, [{ type: "text", text: "hello" }]]);
    assert.deepEqual([...a.invalid, ...b.invalid], []);
    a.close();
    b.close();
    be.close();
  });
});

test("client tools: no matching active client is a semantic rejection; nothing is published", async () => {
  await withHost(async (h) => {
    const { be, reg, ev } = await setup(h);
    const a = await client(h, reg, "ca");
    ev({ type: "user_message", text: "go", turnId: "t1" });
    ev({ type: "client_tool_requested", toolCallId: "ct1", toolName: "read_clipboard" });
    assert.equal((await be.nextType("error")).message, 'event refused: client_tool_requested: no active client of this session provides tool "read_clipboard"');
    const seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: [{ name: "other" }] } });
    await echo(a, "ca", seq);
    ev({ type: "client_tool_requested", toolCallId: "ct1", toolName: "read_clipboard" });
    assert.match((await be.nextType("error")).message, /no active client of this session provides tool "read_clipboard"/);
    ev({ type: "client_tool_requested", toolCallId: "ct1", toolName: "other", clientId: "cz" });
    assert.match((await be.nextType("error")).message, /client "cz" is not an active client of this session/);
    ev({ type: "client_tool_requested", toolCallId: "ct1", toolName: "read_clipboard", clientId: "ca" });
    assert.match((await be.nextType("error")).message, /active client "ca" does not provide tool "read_clipboard"/);
    // A sequenced rejection fences the route, as for any semantic rejection.
    be.send({ type: "sequenced_event", session: reg.session, sequence: 1, event: { type: "client_tool_requested", toolCallId: "ct2", toolName: "nope" } });
    const rej = await be.nextType("event_rejected");
    assert.match(rej.error, /no active client/);
    await be.waitClosed();
    await a.request("ping");
    assert.ok(!a.actions().some((x) => x.action.type === "chat/toolCallStart"), "nothing was published");
    assert.deepEqual(a.invalid, []);
    a.close();
  });
});

test("client tools: a client leaving mid-call fails its call and tells the backend", async () => {
  await withHost(async (h) => {
    const { be, reg, ev } = await setup(h);
    const a = await client(h, reg, "ca");
    const watcher = await client(h, reg, "cw");
    await echo(a, "ca", a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: [CLIP, { name: "second" }] } }));
    ev({ type: "user_message", text: "go", turnId: "t1" });
    ev({ type: "client_tool_requested", toolCallId: "ct1", toolName: "read_clipboard", clientId: "ca" });
    await watcher.action((x) => x.action.type === "session/inputNeededSet");
    a.close(); // disconnect mid-call
    const removed = await watcher.action((x) => x.action.type === "session/activeClientRemoved");
    assert.equal(removed.action.clientId, "ca");
    const failed = await watcher.action((x) => x.action.type === "chat/toolCallComplete");
    assert.deepEqual(failed.action.result, { success: false, pastTenseMessage: "Read clipboard failed", error: { message: CLIENT_LEFT } });
    const cmd = await be.nextType("command");
    assert.deepEqual(cmd.command, { type: "complete_client_tool", turnId: "t1", toolCallId: "ct1", result: failed.action.result });
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    await watcher.action((x) => x.action.type === "session/inputNeededRemoved");
    const s = (await watcher.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    assert.deepEqual([s.activeClients, s.inputNeeded], [[], undefined]);
    // A new request for that tool now finds no client.
    ev({ type: "client_tool_requested", toolCallId: "ct2", toolName: "read_clipboard" });
    assert.match((await be.nextType("error")).message, /no active client/);

    // An explicit activeClientRemoved does the same, with the client's origin on the removal.
    const b = await client(h, reg, "cb");
    await echo(b, "cb", b.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "cb", tools: [{ name: "second" }] } }));
    ev({ type: "client_tool_requested", toolCallId: "ct3", toolName: "second" });
    await watcher.action((x) => x.action.type === "chat/toolCallStart" && x.action.toolCallId === "ct3");
    const seq = b.dispatch(reg.session, { type: "session/activeClientRemoved", clientId: "cb" });
    assert.equal((await echo(b, "cb", seq)).rejectionReason, undefined);
    const f3 = await watcher.action((x) => x.action.type === "chat/toolCallComplete" && x.action.toolCallId === "ct3");
    assert.equal(f3.action.result.error.message, CLIENT_LEFT);
    assert.equal((await be.nextType("command")).command.type, "complete_client_tool");
    // Unsubscribing from the session also leaves it.
    await echo(b, "cb", b.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "cb", tools: [] } }));
    await b.request("unsubscribe", { channel: reg.session });
    await watcher.action((x) => x.action.type === "session/activeClientRemoved" && x.action.clientId === "cb" && x.origin === undefined);
    assert.deepEqual([...watcher.invalid, ...b.invalid], []);
    watcher.close();
    b.close();
    be.close();
  });
});

test("client tools: below v4, or without clientTools advertised, the capability and event are refused", async () => {
  await withHost(async (h) => {
    const v3 = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "ct-v3", toolCapabilities: { clientTools: true } });
    assert.deepEqual([v3.reg.type, v3.reg.message], ["error", "toolCapabilities requires protocol version 4 (declared 3)"]);
    const old = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "ct-v3b" });
    old.be.send({ type: "event", session: old.reg.session, event: { type: "user_message", text: "go" } });
    old.be.send({ type: "event", session: old.reg.session, event: { type: "client_tool_requested", toolCallId: "c", toolName: "t" } });
    assert.equal((await old.be.nextType("error")).message, "event refused: client_tool_requested requires protocol version 4");
    const plain = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "ct-v4", toolCapabilities: { confirmations: true } });
    plain.be.send({ type: "event", session: plain.reg.session, event: { type: "user_message", text: "go" } });
    plain.be.send({ type: "event", session: plain.reg.session, event: { type: "client_tool_requested", toolCallId: "c", toolName: "t" } });
    assert.equal((await plain.be.nextType("error")).message, "event refused: client_tool_requested requires advertised toolCapabilities.clientTools");
    old.be.close();
    plain.be.close();
  });
});

test("client tools: an active-client entry is bounded in tools and bytes (at, and one past)", async () => {
  await withHost(async (h) => {
    const { be, reg } = await setup(h);
    const a = await client(h, reg, "ca");
    const tools = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `t${i}` }));
    let seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: tools(MAX_CLIENT_TOOLS) } });
    assert.equal((await echo(a, "ca", seq)).rejectionReason, undefined);
    seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: tools(MAX_CLIENT_TOOLS + 1) } });
    assert.equal((await echo(a, "ca", seq)).rejectionReason, `activeClient.tools holds at most ${MAX_CLIENT_TOOLS} tools`);
    // Bytes: pad one tool's input schema so the encoded entry is exactly the bound, then one byte more.
    const entry = (pad: number) => ({ clientId: "ca", tools: [{ name: "big", inputSchema: { type: "object", properties: { doc: { description: "x".repeat(pad) } } } }] });
    const base = Buffer.byteLength(JSON.stringify(entry(0)));
    seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: entry(MAX_ACTIVE_CLIENT_BYTES - base) });
    assert.equal((await echo(a, "ca", seq)).rejectionReason, undefined);
    seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: entry(MAX_ACTIVE_CLIENT_BYTES - base + 1) });
    assert.equal((await echo(a, "ca", seq)).rejectionReason, `activeClient is ${MAX_ACTIVE_CLIENT_BYTES + 1} bytes encoded; at most ${MAX_ACTIVE_CLIENT_BYTES} are accepted`);
    // Duplicate tool names are refused.
    seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: [{ name: "d" }, { name: "d" }] } });
    assert.equal((await echo(a, "ca", seq)).rejectionReason, 'activeClient.tools names "d" twice');
    const s = (await a.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    assert.equal(s.activeClients[0].tools[0].inputSchema.properties.doc.description.length, MAX_ACTIVE_CLIENT_BYTES - base, "the last accepted entry stands");
    assert.deepEqual(a.invalid, []);
    a.close();
    be.close();
  });
});

test("client tools: an indeterminate result is not resent; the runtime's tool_completed settles the call", async () => {
  await withHost(async (h) => {
    const { be, reg, ev } = await setup(h, { protocolVersion: 9, sourceId: "ct-v9" });
    const a = await client(h, reg, "ca");
    await echo(a, "ca", a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: [CLIP] } }));
    ev({ type: "user_message", text: "go", turnId: "t1" });
    ev({ type: "client_tool_requested", toolCallId: "ct1", toolName: "read_clipboard" });
    const need = await a.action((x) => x.action.type === "session/inputNeededSet");
    const result = { success: true, pastTenseMessage: "Read the clipboard" };
    let seq = a.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result });
    const cmd = await be.nextType("command");
    // While it waits for the backend, a second result is refused without being sent.
    const again = a.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result });
    assert.equal((await echo(a, "ca", again)).rejectionReason, "a result for this tool call is already waiting for the backend");
    be.send({ type: "command_indeterminate", commandId: cmd.commandId, error: "lost" });
    assert.match((await echo(a, "ca", seq)).rejectionReason, /^backend outcome indeterminate \(nothing was resent/);
    await be.roundTrip();
    assert.equal(be.frames.filter((f) => f.type === "command").length, 0, "nothing was resent");
    let chat = (await a.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    assert.equal(chat.activeTurn.responseParts[0].toolCall.status, "running", "uncertainty is not an answer");
    // Invalid results are refused before anything is sent.
    seq = a.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result: { success: "yes" } });
    assert.match((await echo(a, "ca", seq)).rejectionReason, /^invalid chat\/toolCallComplete: result.success/);
    // The runtime settles the call authoritatively.
    ev({ type: "tool_completed", toolCallId: "ct1", toolName: "read_clipboard", output: "hello", isError: false });
    await a.action((x) => x.action.type === "session/inputNeededRemoved" && x.action.id === need.action.request.id);
    chat = (await a.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    assert.deepEqual([chat.activeTurn.responseParts[0].toolCall.status, chat.activeTurn.responseParts[0].toolCall.contributor], ["completed", { kind: "client", clientId: "ca" }]);
    // Leaving afterwards fails nothing (the call is settled) and sends nothing.
    const w = await client(h, reg, "cw");
    a.close();
    await w.action((x) => x.action.type === "session/activeClientRemoved" && x.action.clientId === "ca");
    const s = (await w.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    assert.deepEqual(s.activeClients, []);
    await be.roundTrip();
    assert.equal(be.frames.filter((f) => f.type === "command").length, 0);
    assert.deepEqual([...a.invalid, ...w.invalid], []);
    w.close();
    be.close();
  });
});

test("client tools: on a multiplexed (v8) route, commands carry the logical route and a refusal fences only that route", async () => {
  await withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 8, ["mux"]);
    const hello = (sourceId: string) => ({ protocolVersion: 8, instanceId: `i-${sourceId}`, sourceId, provider: "mux", title: sourceId, toolCapabilities: { clientTools: true } });
    be.send({ type: "register_session", requestId: "ra", hello: hello("a") });
    be.send({ type: "register_session", requestId: "rb", hello: hello("b") });
    const ra = (await be.next((f) => f.requestId === "ra")).registration as Json;
    const rb = (await be.next((f) => f.requestId === "rb")).registration as Json;
    const c = await client(h, ra, "ca");
    await echo(c, "ca", c.dispatch(ra.session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: [CLIP] } }));
    const seq = (reg: Json, n: number, event: Json) => be.send({ type: "sequenced_event", session: reg.session, sequence: n, backendConnectionId: reg.backendConnectionId, event });
    seq(ra, 1, { type: "user_message", text: "go", turnId: "t1" });
    seq(ra, 2, { type: "client_tool_requested", toolCallId: "ct1", toolName: "read_clipboard" });
    assert.equal((await be.next((f) => f.type === "event_ack" && f.sequence === 2)).backendConnectionId, ra.backendConnectionId);
    seq(rb, 1, { type: "user_message", text: "go", turnId: "t1" });
    seq(rb, 2, { type: "client_tool_requested", toolCallId: "ct1", toolName: "read_clipboard" });
    const rej = await be.nextType("event_rejected");
    assert.deepEqual([rej.backendConnectionId, rej.error], [rb.backendConnectionId, 'client_tool_requested: no active client of this session provides tool "read_clipboard"']);
    const result = { success: false, pastTenseMessage: "Could not read the clipboard", error: { message: "permission denied" } };
    const n = c.dispatch(ra.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result });
    const cmd = await be.nextType("command");
    assert.deepEqual([cmd.session, cmd.chat, cmd.backendConnectionId, cmd.command], [ra.session, ra.chat, ra.backendConnectionId, { type: "complete_client_tool", turnId: "t1", toolCallId: "ct1", result }]);
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await echo(c, "ca", n)).rejectionReason, undefined);
    assert.equal(be.closed, false, "the provider connection stays");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  });
});

/** Client "ca" executes call ct1 of turn t1 for the backend, whose connection then closes: the session has no route. */
async function callWhileBackendGone(h: HostHandle): Promise<{ reg: Json; a: AhpClient }> {
    const { be, reg, ev } = await setup(h);
    const a = await client(h, reg, "ca");
    await echo(a, "ca", a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: [CLIP] } }));
    ev({ type: "user_message", text: "go", turnId: "t1" });
    ev({ type: "client_tool_requested", toolCallId: "ct1", toolName: "read_clipboard" });
    await a.action((x) => x.action.type === "session/inputNeededSet");
    be.close();
    await until(() => h.state.sessions.get(reg.session)?.route === undefined, 3000, "the route gone");
  return { reg, a };
}

test("client tools: a result while the requesting backend is away is refused with why and the fix; once it is back, the retry goes through", async () => {
  await withHost(async (h) => {
    const { reg, a } = await callWhileBackendGone(h);
    const result = { success: true, pastTenseMessage: "Read the clipboard" };
    const s1 = a.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result });
    assert.equal((await echo(a, "ca", s1)).rejectionReason, NOT_CONNECTED_CALL);

    // The same instance registers again: the retry reaches it.
    const back = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "ct-src", toolCapabilities: { clientTools: true } });
    assert.equal(back.reg.session, reg.session);
    const s2 = a.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result });
    const cmd = await back.be.next((f) => f.type === "command" && f.command.type === "complete_client_tool");
    assert.deepEqual(cmd.command, { type: "complete_client_tool", turnId: "t1", toolCallId: "ct1", result });
    back.be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await echo(a, "ca", s2)).rejectionReason, undefined);
    a.close();
    back.be.close();
  });
});

test("client tools: a result for a call another instance of the backend requested is refused: nothing to retry", async () => {
  await withHost(async (h) => {
    const { reg, a } = await callWhileBackendGone(h);
    const next = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "ct-src", instanceId: "inst-2", toolCapabilities: { clientTools: true } });
    assert.equal(next.reg.session, reg.session);
    const seq = a.dispatch(reg.chat, { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "ct1", result: { success: true, pastTenseMessage: "Read the clipboard" } });
    assert.equal((await echo(a, "ca", seq)).rejectionReason, REPLACED_CALL);
    a.close();
    next.be.close();
  });
});
