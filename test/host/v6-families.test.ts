/**
 * Backend protocol v6 `resource_action` families on session and chat channels (spec "Events"),
 * MCP-contributed tool calls paused for authentication (`chat/toolCallAuthRequired`), their
 * `tool_call` review and root `authenticate` (spec "Protected-resource authentication review"),
 * and the client's cancellation of such a call through `apply_resource_action`. Fake backends
 * speak the spec's frames over the real socket; the AHP client is the spec-derived one.
 *
 * The mirror below is written from the public AHP reducer semantics (tool-call state machine,
 * session input-needed queue, activity and server tools), not from the host's code: state rebuilt
 * from envelopes over the first snapshot must equal a fresh snapshot.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { TOOLS_SERVER } from "./mcp-helpers.js";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";

const RESOURCE = "https://mcp.example.invalid/";
const AUTH = { reason: "insufficientScope", resource: { resource: RESOURCE, authorization_servers: ["https://as.example.invalid"] }, requiredScopes: ["search:read"] };
const OPEN = new Set(["streaming", "pending-confirmation", "running", "pending-result-confirmation", "auth-required"]);

/** Chat and session state reduced from envelopes (AHP reducer semantics for the actions used here). */
function reduceChat(c: Json, a: Json): void {
  const t = c.activeTurn as Json | undefined;
  const tool = (): Json | undefined => (t && t.id === a.turnId ? t.responseParts.find((p: Json) => p.kind === "toolCall" && p.toolCall.toolCallId === a.toolCallId)?.toolCall : undefined);
  const tc = tool();
  switch (a.type) {
    case "chat/turnStarted":
      c.activeTurn = { id: a.turnId, startedAt: a.startedAt, message: a.message, responseParts: [] };
      c.modifiedAt = a.startedAt;
      return;
    case "chat/responsePart":
      if (t && t.id === a.turnId) t.responseParts.push(a.part);
      return;
    case "chat/delta": {
      const p = t && t.id === a.turnId ? t.responseParts.find((x: Json) => x.id === a.partId) : undefined;
      if (p) p.content += a.content;
      return;
    }
    case "chat/activityChanged":
      if (a.activity === undefined) delete c.activity;
      else c.activity = a.activity;
      return;
    case "chat/toolCallStart":
      if (t && t.id === a.turnId)
        t.responseParts.push({ kind: "toolCall", toolCall: { toolCallId: a.toolCallId, toolName: a.toolName, displayName: a.displayName, ...(a.contributor ? { contributor: a.contributor } : {}), status: "streaming" } });
      return;
    case "chat/toolCallReady":
      if (tc?.status === "streaming" && a.confirmed) Object.assign(tc, { status: "running", invocationMessage: a.invocationMessage, confirmed: a.confirmed, ...(a.toolInput !== undefined ? { toolInput: a.toolInput } : {}) });
      return;
    case "chat/toolCallContentChanged":
      if (tc?.status === "running") tc.content = a.content;
      return;
    case "chat/toolCallAuthRequired":
      if (tc?.status === "running" && tc.contributor?.kind === "mcp") Object.assign(tc, { status: "auth-required", auth: a.auth });
      return;
    case "chat/toolCallAuthResolved":
      if (tc?.status === "auth-required") {
        tc.status = "running";
        delete tc.auth;
      }
      return;
    case "chat/toolCallComplete":
      if (!tc || (tc.status !== "running" && tc.status !== "auth-required")) return;
      if (tc.status === "auth-required" && a.result.success) return; // only a failed result cancels a paused call
      delete tc.auth;
      Object.assign(tc, a.result, { status: "completed" });
      return;
    case "chat/turnComplete":
      if (!t || t.id !== a.turnId) return;
      for (const p of t.responseParts)
        if (p.kind === "toolCall" && OPEN.has(p.toolCall.status)) {
          const x = p.toolCall;
          p.toolCall = { toolCallId: x.toolCallId, toolName: x.toolName, displayName: x.displayName, ...(x.contributor ? { contributor: x.contributor } : {}), invocationMessage: x.invocationMessage ?? x.displayName, status: "cancelled", reason: "skipped" };
        }
      c.turns.push({ id: t.id, startedAt: t.startedAt, duration: a.duration, message: t.message, responseParts: t.responseParts, state: "complete" });
      c.modifiedAt = new Date(Date.parse(t.startedAt) + a.duration).toISOString();
      delete c.activeTurn;
      return;
  }
}
function reduceSession(s: Json, a: Json): void {
  switch (a.type) {
    case "session/chatUpdated":
      Object.assign(s.chats.find((x: Json) => x.resource === a.chat) ?? {}, a.changes);
      return;
    case "session/inputNeededSet":
      s.inputNeeded = [...(s.inputNeeded ?? []).filter((r: Json) => r.id !== a.request.id), a.request];
      return;
    case "session/inputNeededRemoved":
      s.inputNeeded = (s.inputNeeded ?? []).filter((r: Json) => r.id !== a.id);
      if (s.inputNeeded.length === 0) delete s.inputNeeded;
      return;
    case "session/activityChanged":
      if (a.activity === undefined) delete s.activity;
      else s.activity = a.activity;
      return;
    case "session/serverToolsChanged":
      s.serverTools = a.tools;
      return;
  }
}
/** The session's status is derived (no action carries it): InputNeeded while anything waits. */
const withStatus = (s: Json): Json => ({ ...s, status: s.inputNeeded?.length || s.chats.some((c: Json) => c.status === 24) ? 24 : s.chats[0].status });

async function v6(h: HostHandle, sourceId: string): Promise<{ be: FakeBackend; reg: Json; ev: (event: Json, chat?: boolean) => void }> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId, mcpServers: [TOOLS_SERVER] });
  assert.equal(reg.type, "registered", JSON.stringify(reg));
  const ev = (event: Json, chat = false) => be.send(chat ? { type: "chat_event", session: reg.session, chat: reg.chat, event } : { type: "event", session: reg.session, event });
  return { be, reg, ev };
}
const ra = (channel: string, action: Json): Json => ({ type: "resource_action", channel, action });

async function startTurn(c: AhpClient, be: FakeBackend, reg: Json, turnId: string): Promise<void> {
  c.dispatch(reg.chat, { type: "chat/turnStarted", turnId, startedAt: new Date().toISOString(), message: { text: "search", origin: { kind: "user" } } });
  const cmd = await be.nextType("command");
  assert.equal(cmd.command.type, "prompt");
  be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
}

test("chat and session families: validated, reduced, published; a paused MCP tool call is authenticated and resumed", async () => {
  const home = tempHome();
  const logs: string[] = [];
  const h = await startHost({ home, log: (l) => logs.push(l) });
  const secret = "synthetic-tool-token-7f3a";
  try {
    const { be, reg, ev } = await v6(h, "families");
    const { c, result } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat], "families-client");
    const chat = structuredClone((result.snapshots as Json[]).find((s) => s.resource === reg.chat)!.state) as Json;
    const session = structuredClone((result.snapshots as Json[]).find((s) => s.resource === reg.session)!.state) as Json;
    await startTurn(c, be, reg, "t1");
    ev({ type: "agent_started" });
    ev({ type: "tool_started", toolCallId: "local", toolName: "read" });
    ev({ type: "tool_started", toolCallId: "ghost-call", toolName: "search", mcpServerId: "ghost" });
    assert.match((await be.nextType("error")).message, /mcpServerId "ghost" names no MCP server of this session/);
    ev({ type: "tool_started", toolCallId: "call-1", toolName: "search", mcpServerId: TOOLS_SERVER.id, input: '{"q":"x"}' });
    await be.roundTrip();

    // Refused before anything is published: a non-MCP call, a wrong turn, a malformed challenge.
    const refusals: Array<[Json, RegExp]> = [
      [ra(reg.chat, { type: "chat/toolCallAuthRequired", turnId: "t1", toolCallId: "local", auth: AUTH }), /contributed by an MCP server/],
      [ra(reg.chat, { type: "chat/toolCallAuthRequired", turnId: "t0", toolCallId: "call-1", auth: AUTH }), /names no active turn/],
      [ra(reg.chat, { type: "chat/toolCallAuthRequired", turnId: "t1", toolCallId: "call-1", auth: { ...AUTH, reason: "whatever" } }), /invalid "chat\/toolCallAuthRequired": auth.reason/],
      [ra(reg.chat, { type: "chat/toolCallAuthResolved", turnId: "t1", toolCallId: "call-1" }), /needs a tool call waiting for authentication/],
      // A confidential client secret has no place in published (or stored) state.
      [ra(reg.chat, { type: "chat/toolCallAuthRequired", turnId: "t1", toolCallId: "call-1", auth: { ...AUTH, oauthClient: { clientId: "app", clientSecret: "s3cret" } } }), /invalid "chat\/toolCallAuthRequired": auth.oauthClient/],
      [ra(reg.chat, { type: "chat/turnStarted", turnId: "t9" }), /derived by the host: send the user_message event instead/],
      [ra(reg.chat, { type: "chat/draftChanged", draft: "x" }), /"chat\/draftChanged" is not projected by this host/],
      [ra(reg.session, { type: "session/activityChanged", activity: 5 }), /invalid "session\/activityChanged"/],
      [ra(reg.session, { type: "session/inputNeededSet", request: {} }), /send the input_requested event instead/],
    ];
    for (const [event, re] of refusals) {
      ev(event);
      assert.match((await be.nextType("error")).message, re, JSON.stringify(event));
    }
    assert.equal(be.closed, false, "unsequenced refusals keep the connection");

    // Accepted families.
    ev(ra(reg.session, { type: "session/activityChanged", activity: "Searching the workspace" }));
    ev(ra(reg.session, { type: "session/serverToolsChanged", tools: [{ name: "search", description: "Search the workspace" }] }));
    ev(ra(reg.chat, { type: "chat/activityChanged", activity: "Waiting for the search server" }));
    ev(ra(reg.chat, { type: "chat/toolCallContentChanged", turnId: "t1", toolCallId: "call-1", content: [{ type: "text", text: "partial" }] }));
    ev(ra(reg.chat, { type: "chat/toolCallAuthRequired", turnId: "t1", toolCallId: "call-1", auth: AUTH }));
    await c.action((e) => e.action.type === "session/inputNeededSet" && e.action.request.kind === "toolAuthentication");
    let snap = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    assert.equal(snap.status, 24, "a paused call makes the chat InputNeeded");
    const paused = snap.activeTurn.responseParts.find((p: Json) => p.toolCall?.toolCallId === "call-1").toolCall;
    assert.deepEqual([paused.status, paused.contributor, paused.auth, paused.content], ["auth-required", { kind: "mcp", customizationId: TOOLS_SERVER.id }, AUTH, [{ type: "text", text: "partial" }]]);
    ev({ type: "tool_completed", toolCallId: "call-1", toolName: "search", output: "done", isError: false });
    assert.match((await be.nextType("error")).message, /waiting for authentication: send chat\/toolCallAuthResolved/);

    // The tool_call target: reviewed, then authenticated; the token reaches only the owner.
    const target = { type: "tool_call", session: reg.session, chat: reg.chat, turnId: "t1", toolCallId: "call-1" };
    const ctx = await c.request("paratenic/authContext", { channel: "ahp-root://", resource: RESOURCE, target });
    assert.equal(ctx.error, undefined, JSON.stringify(ctx.error));
    assert.deepEqual(ctx.result.required_scopes, ["search:read"]);
    assert.equal((await c.request("paratenic/authContext", { channel: "ahp-root://", resource: RESOURCE, target: { ...target, toolCallId: "local" } })).error.code, -32008);
    const call = c.request("authenticate", { channel: "ahp-root://", resource: RESOURCE, token: secret, scopes: ["search:read"], _meta: { paratenicAuth: { review: ctx.result.review, target } } });
    const cmd = await be.nextType("command");
    assert.deepEqual([cmd.session, cmd.chat, cmd.command], [reg.session, reg.chat, { type: "authenticate", resource: RESOURCE, token: secret, target, scopes: ["search:read"] }]);
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.deepEqual((await call).result, {});
    snap = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    assert.equal(snap.activeTurn.responseParts.find((p: Json) => p.toolCall?.toolCallId === "call-1").toolCall.status, "auth-required", "acceptance resolves nothing by itself");
    // Legacy (unreviewed) authenticate finds the one waiting call.
    const legacy = c.request("authenticate", { resource: RESOURCE, token: `${secret}-2` });
    const cmd2 = await be.nextType("command");
    assert.deepEqual(cmd2.command.target, target);
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: true });
    assert.deepEqual((await legacy).result, {});

    // The backend resumes the call and completes it.
    ev(ra(reg.chat, { type: "chat/toolCallAuthResolved", turnId: "t1", toolCallId: "call-1" }));
    ev({ type: "tool_completed", toolCallId: "call-1", toolName: "search", output: "3 hits", isError: false });
    ev(ra(reg.chat, { type: "chat/activityChanged" }));
    ev(ra(reg.session, { type: "session/activityChanged" }));
    // A stale review no longer applies: the call is no longer waiting.
    const stale = await c.request("authenticate", { resource: RESOURCE, token: `${secret}-3`, _meta: { paratenicAuth: { review: ctx.result.review, target } } });
    assert.equal(stale.error.data.reason, "review_changed");
    ev({ type: "text_delta", text: "found it" });
    ev({ type: "settled", cancelled: false });
    await c.action((e) => e.action.type === "chat/turnComplete");
    await be.roundTrip();
    assert.equal(be.frames.filter((f) => f.type === "error").length, 0, JSON.stringify(be.frames));

    for (const e of c.actions(reg.chat)) if (e.rejectionReason === undefined) reduceChat(chat, e.action);
    for (const e of c.actions(reg.session)) if (e.rejectionReason === undefined) reduceSession(session, e.action);
    const freshSnap = (await c.request("subscribe", { channel: reg.chat })).result.snapshot as Json;
    const fresh = freshSnap.state as Json;
    assert.deepEqual(chat, fresh, "the chat rebuilt from envelopes equals a fresh snapshot");
    const freshSession = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    assert.deepEqual(withStatus(session), freshSession, "the session rebuilt from envelopes equals a fresh snapshot");
    assert.deepEqual(freshSession.serverTools, [{ name: "search", description: "Search the workspace" }]);
    assert.equal(freshSession.inputNeeded, undefined);
    const done = (fresh.turns as Json[])[0]!.responseParts.find((p: Json) => p.toolCall?.toolCallId === "call-1").toolCall;
    assert.deepEqual([done.status, done.success, done.contributor.kind], ["completed", true, "mcp"]);
    assert.deepEqual(c.invalid, []);
    assert.ok(!c.notes.some((n) => JSON.stringify(n).includes(secret)), "the token is never published");
    // What the backend said about itself leaves with its route.
    ev(ra(reg.chat, { type: "chat/activityChanged", activity: "idle thoughts" }));
    await c.action((e) => e.action.type === "chat/activityChanged" && e.action.activity === "idle thoughts");
    be.close();
    await c.action((e) => e.action.type === "session/serverToolsChanged" && e.action.tools.length === 0);
    await c.action((e) => e.action.type === "chat/activityChanged" && e.action.activity === undefined && e.serverSeq > freshSnap.fromSeq);
    const gone = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    assert.deepEqual(gone.serverTools, []);
    assert.equal(((await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json).activity, undefined);
    c.close();
  } finally {
    await h.close();
  }
  for (const f of readdirSync(join(home, "host"))) {
    if (f.endsWith(".sock") || f.endsWith(".lock")) continue;
    let bytes: Buffer;
    try {
      bytes = readFileSync(join(home, "host", f));
    } catch {
      continue; // a directory
    }
    assert.ok(!bytes.includes(secret), `token found in host/${f}`);
  }
  assert.ok(!logs.some((l) => l.includes(secret)), "token found in the log");
});

test("a client cancels a call waiting for authentication: apply_resource_action, echoed after acceptance", async () => {
  const h = await startHost({ home: tempHome(), log: () => {} });
  try {
    const { be, reg, ev } = await v6(h, "cancel");
    const { c } = await AhpClient.init(h, [reg.session, reg.chat], "canceller");
    await startTurn(c, be, reg, "t1");
    ev({ type: "tool_started", toolCallId: "call-1", toolName: "search", mcpServerId: TOOLS_SERVER.id });
    ev({ type: "tool_started", toolCallId: "plain", toolName: "read" });
    ev(ra(reg.chat, { type: "chat/toolCallAuthRequired", turnId: "t1", toolCallId: "call-1", auth: AUTH }));
    await c.action((e) => e.action.type === "chat/toolCallAuthRequired");
    const failed = { success: false, pastTenseMessage: "Search was cancelled", error: { message: "the user declined to sign in" } };
    const echo = (seq: number) => c.action((e) => e.channel === reg.chat && e.origin?.clientSeq === seq, `echo ${seq}`);
    const refusals: Array<[Json, RegExp]> = [
      [{ type: "chat/toolCallComplete", turnId: "t1", toolCallId: "call-1", result: { ...failed, success: true } }, /only be completed with a failed result/],
      [{ type: "chat/toolCallComplete", turnId: "t1", toolCallId: "plain", result: failed }, /only to cancel a tool call waiting for authentication/],
      [{ type: "chat/toolCallComplete", turnId: "t0", toolCallId: "call-1", result: failed }, /no such tool call/],
    ];
    for (const [action, re] of refusals) assert.match((await echo(c.dispatch(reg.chat, action))).rejectionReason, re);
    await be.roundTrip();
    assert.equal(be.frames.filter((f) => f.type === "command").length, 0, "nothing invalid reaches the backend");

    const action = { type: "chat/toolCallComplete", turnId: "t1", toolCallId: "call-1", result: failed };
    const refusedSeq = c.dispatch(reg.chat, action);
    const no = await be.nextType("command");
    assert.deepEqual([no.chat, no.command], [reg.chat, { type: "apply_resource_action", channel: reg.chat, action }]);
    be.send({ type: "command_result", commandId: no.commandId, accepted: false, error: "backend detail" });
    assert.equal((await echo(refusedSeq)).rejectionReason, "backend refused the action");
    const seq = c.dispatch(reg.chat, action);
    const yes = await be.nextType("command");
    assert.equal(c.actions(reg.chat).some((e) => e.origin?.clientSeq === seq), false, "no echo before the backend accepts");
    be.send({ type: "command_result", commandId: yes.commandId, accepted: true });
    const accepted = await echo(seq);
    assert.equal(accepted.rejectionReason, undefined);
    await c.action((e) => e.action.type === "session/inputNeededRemoved" && e.action.id === "auth:call-1");
    const snap = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
    const tc = snap.activeTurn.responseParts.find((p: Json) => p.toolCall?.toolCallId === "call-1").toolCall;
    assert.deepEqual([tc.status, tc.success, tc.auth, snap.status], ["completed", false, undefined, 8]);
    // A second pause ends with its turn: the session's input request leaves too.
    ev({ type: "tool_started", toolCallId: "call-2", toolName: "search", mcpServerId: TOOLS_SERVER.id });
    ev(ra(reg.chat, { type: "chat/toolCallAuthRequired", turnId: "t1", toolCallId: "call-2", auth: AUTH }));
    ev({ type: "settled", cancelled: false });
    await c.action((e) => e.action.type === "session/inputNeededRemoved" && e.action.id === "auth:call-2");
    const after = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    assert.equal(after.inputNeeded, undefined);
    const ended = ((await c.request("subscribe", { channel: reg.chat })).result.snapshot.state.turns as Json[])[0]!;
    assert.equal(ended.responseParts.find((p: Json) => p.toolCall?.toolCallId === "call-2").toolCall.status, "cancelled");
    // A turn the host ended first drains: its trailing tool actions are accepted and ignored.
    await startTurn(c, be, reg, "t2");
    ev({ type: "tool_started", toolCallId: "call-3", toolName: "search", mcpServerId: TOOLS_SERVER.id });
    await c.action((e) => e.action.type === "chat/toolCallStart" && e.action.toolCallId === "call-3");
    c.dispatch(reg.chat, { type: "chat/turnCancelled", turnId: "t2" });
    assert.equal((await be.nextType("command")).command.type, "abort");
    ev(ra(reg.chat, { type: "chat/toolCallAuthRequired", turnId: "t2", toolCallId: "call-3", auth: AUTH }));
    ev({ type: "settled", cancelled: true });
    await be.roundTrip();
    assert.equal(be.frames.some((f) => f.type === "error"), false, JSON.stringify(be.frames.filter((f) => f.type === "error")));
    assert.equal(c.actions(reg.chat).some((e) => e.action.type === "chat/toolCallAuthRequired" && e.action.turnId === "t2"), false);
    // Below v6 there is no MCP contributor to pause.
    const { be: old, reg: oreg } = await FakeBackend.session(h, { protocolVersion: 5, sourceId: "five", mcpServers: [TOOLS_SERVER] });
    const { c: c5 } = await AhpClient.init(h, [oreg.chat], "five-client");
    await startTurn(c5, old, oreg, "t5");
    old.send({ type: "event", session: oreg.session, event: { type: "tool_started", toolCallId: "x", toolName: "search", mcpServerId: TOOLS_SERVER.id } });
    assert.match((await old.nextType("error")).message, /mcpServerId requires protocol version 6/);
    assert.deepEqual(c.invalid, []);
    assert.deepEqual(c5.invalid, []);
    for (const x of [c, c5]) x.close();
    for (const x of [be, old]) x.close();
  } finally {
    await h.close();
  }
});

test("session/defaultChatChanged: a chat of the session, announced to root, kept across a restart, reset before that chat leaves", async () => {
  const home = tempHome();
  const side = "ahp-chat:/side-default";
  let sessionUri = "";
  await withHost(async (h1) => {
    const { be, reg } = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "default", chatCapabilities: { create: true, dispose: true } });
    sessionUri = reg.session as string;
    const { c, result } = await AhpClient.init(h1, ["ahp-root://", reg.session], "default-client");
    const created = c.request("createChat", { channel: reg.session, chat: side, title: "Side" });
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "create_chat");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await created).result, null);
    const ev = (action: Json) => be.send({ type: "event", session: reg.session, event: ra(reg.session, action) });
    ev({ type: "session/defaultChatChanged" });
    assert.match((await be.nextType("error")).message, /always names a default chat/);
    ev({ type: "session/defaultChatChanged", defaultChat: "ahp-chat:/elsewhere" });
    assert.match((await be.nextType("error")).message, /names no chat of this session/);
    ev({ type: "session/defaultChatChanged", defaultChat: side });
    assert.equal((await c.note("root/sessionSummaryChanged", (p) => p.changes.defaultChat !== undefined)).changes.defaultChat, side);
    const session = structuredClone((result.snapshots as Json[]).find((s) => s.resource === reg.session)!.state) as Json;
    for (const e of c.actions(reg.session)) if (e.action.type === "session/defaultChatChanged") session.defaultChat = e.action.defaultChat;
    const fresh = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    assert.equal(fresh.defaultChat, side);
    assert.equal(session.defaultChat, fresh.defaultChat, "rebuilt from envelopes");
    assert.equal(((await c.request("listSessions", {})).result.items as Json[]).find((x) => x.resource === reg.session)!.defaultChat, side);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }, { home });
  await withHost(async (h2) => {
    const { c } = await AhpClient.init(h2, [sessionUri], "after-restart");
    assert.equal(((await c.request("subscribe", { channel: sessionUri })).result.snapshot.state as Json).defaultChat, side, "kept across a restart");
    const { be, reg } = await FakeBackend.session(h2, { protocolVersion: 6, sourceId: "default", chatCapabilities: { create: true, dispose: true } });
    assert.equal(reg.session, sessionUri);
    const disposed = c.request("disposeChat", { channel: side });
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "dispose_chat");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await disposed).result, null);
    const types = c.actions(sessionUri).map((e) => e.action.type);
    assert.deepEqual(types.filter((t) => t === "session/defaultChatChanged" || t === "session/chatRemoved"), ["session/defaultChatChanged", "session/chatRemoved"], "the default moves back before the chat leaves");
    assert.equal(c.actions(sessionUri).find((e) => e.action.type === "session/defaultChatChanged")!.action.defaultChat, reg.chat);
    assert.equal(((await c.request("subscribe", { channel: sessionUri })).result.snapshot.state as Json).defaultChat, reg.chat);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }, { home });
});

test("sequenced families on a multiplexed route: accepted ones are ACKed; a refused one retires only its route", async () => {
  const h = await startHost({ home: tempHome(), log: () => {} });
  try {
    const { be } = await FakeBackend.provider(h, 10, ["mux"]);
    const hello = (sourceId: string) => ({ protocolVersion: 10, instanceId: `i-${sourceId}`, sourceId, provider: "mux", displayName: "Mux", title: sourceId, cwd: "/w" });
    be.send({ type: "register_session", requestId: "ra", hello: hello("a") });
    be.send({ type: "register_session", requestId: "rb", hello: hello("b") });
    const a = await be.next((f) => f.requestId === "ra");
    const b = await be.next((f) => f.requestId === "rb");
    const { c } = await AhpClient.init(h, [a.session, b.session], "mux-client");
    const seq = (reg: Json, n: number, action: Json) =>
      be.send({ type: "sequenced_event", session: reg.session, sequence: n, backendConnectionId: reg.backendConnectionId, event: ra(reg.session, action) });
    seq(a, 1, { type: "session/activityChanged", activity: "indexing" });
    assert.equal((await be.nextType("event_ack")).sequence, 1);
    seq(b, 1, { type: "session/titleChanged", title: "sneaky" });
    const rej = await be.nextType("event_rejected");
    assert.deepEqual([rej.sequence, rej.backendConnectionId], [1, b.backendConnectionId]);
    assert.match(rej.error, /derived by the host: send the title_changed event instead/);
    seq(a, 2, { type: "session/serverToolsChanged", tools: [{ name: "grep" }] });
    assert.equal((await be.nextType("event_ack")).sequence, 2, "the sibling route is untouched");
    await c.action((e) => e.channel === a.session && e.action.type === "session/serverToolsChanged");
    assert.equal(c.actions(b.session).some((e) => e.action.type === "session/titleChanged"), false, "nothing of the refused event is published");
    const sa = (await c.request("subscribe", { channel: a.session })).result.snapshot.state as Json;
    assert.deepEqual([sa.activity, sa.serverTools], ["indexing", [{ name: "grep" }]]);
    assert.equal(be.closed, false);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  } finally {
    await h.close();
  }
});
