/**
 * Issue 15 "done when": a fake backend at every protocol version 1–14 registers (the hello is
 * acknowledged with exactly its version) and exercises a feature of its version end to end
 * against an AHP client (v5: an MCP side-channel round trip; v6: a changeset resource and an
 * operation on it). Everything the host emits is validated against the AHP schemas the host tests
 * use, and `mcp://` messages as MCP JSON-RPC (helpers.ts `AhpClient`); the chat and session state a
 * client rebuilds from envelopes with the client reducers (src/client/ahp, and the changeset
 * reducer) must equal fresh snapshots afterwards.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { McpClient, TOOLS_SERVER } from "./mcp-helpers.js";
import { changesetPrefix, reduceChangeset } from "../../src/protocols/host/resources.js";
import { reduceChat, reduceSession, type Chat, type SessionState } from "../../src/client/ahp/reducer.js";

type Host = Parameters<Parameters<typeof withHost>[0]>[0];
const user = (text: string) => ({ text, origin: { kind: "user" } });

interface Rig {
  h: Host;
  c: AhpClient;
  be: FakeBackend;
  reg: Json;
  v: number;
  /** Send an event for the session (sequenced, with the route's logical ID when multiplexed). */
  ev(event: Json): void;
}
let seqs = new Map<string, number>();
function rig(h: Host, c: AhpClient, be: FakeBackend, reg: Json, v: number, multiplexed = false): Rig {
  return {
    h,
    c,
    be,
    reg,
    v,
    ev(event: Json) {
      const n = (seqs.get(reg.backendConnectionId as string) ?? 0) + 1;
      seqs.set(reg.backendConnectionId as string, n);
      be.send({ type: "sequenced_event", session: reg.session, sequence: n, ...(multiplexed ? { backendConnectionId: reg.backendConnectionId } : {}), event });
    },
  };
}
async function accepted(be: FakeBackend, type: string): Promise<Json> {
  const cmd = await be.next((f) => (f.type === "command" || f.type === "provider_command") && f.command.type === type, type);
  be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
  return cmd;
}
async function turn(r: Rig, turnId: string): Promise<Json> {
  r.c.dispatch(r.reg.chat, { type: "chat/turnStarted", turnId, message: user(`prompt v${r.v}`) });
  return accepted(r.be, r.v >= 10 && r.reg.managed ? "managed_prompt" : "prompt");
}
const endOf = (r: Rig, turnId: string, type = "chat/turnComplete") => r.c.action((e) => e.action.type === type && e.action.turnId === turnId, `${type} ${turnId}`);

/** The feature each version adds, driven end to end. */
const FEATURES: Record<number, (r: Rig) => Promise<void>> = {
  1: async (r) => {
    await turn(r, "t");
    r.ev({ type: "user_message", text: "prompt v1", turnId: "t" });
    r.ev({ type: "text_delta", text: "hello " });
    r.ev({ type: "text_delta", text: "world" });
    r.ev({ type: "usage", inputTokens: 3, outputTokens: 2 });
    r.ev({ type: "settled", cancelled: false });
    await endOf(r, "t");
  },
  2: async (r) => {
    r.ev({ type: "input_requested", request: { id: "r", message: "Name?", questions: [{ id: "n", kind: "text", message: "Name" }] } });
    await r.c.action((e) => e.action.type === "session/inputNeededSet");
    r.c.dispatch(r.reg.chat, { type: "chat/inputCompleted", requestId: "r", response: "accept", answers: { n: { value: "Ada" } } });
    const cmd = await accepted(r.be, "complete_input");
    r.ev({ type: "input_resolved", requestId: "r", response: "accept", answers: { n: { value: "Ada" } }, commandId: cmd.commandId });
    await r.c.action((e) => e.action.type === "session/inputNeededRemoved");
  },
  3: async (r) => {
    const pending = r.c.request("createChat", { channel: r.reg.session, chat: "ahp-chat:/v3-side", title: "Side" });
    await accepted(r.be, "create_chat");
    assert.equal((await pending).result, null);
    const fetch = r.c.request("fetchTurns", { channel: r.reg.chat });
    const cmd = await r.be.next((f) => f.type === "command" && f.command.type === "fetch_turns");
    r.ev({ type: "turns_loaded", turns: [{ id: "old", userText: "older", responseText: "page" }] });
    r.be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.deepEqual((await fetch).result, {});
  },
  4: async (r) => {
    await turn(r, "t");
    r.ev({ type: "tool_confirmation_requested", toolCallId: "tc", toolName: "bash", input: "{\"cmd\":\"ls\"}", options: [{ id: "ok", label: "Allow", kind: "approve" }, { id: "no", label: "Deny", kind: "deny" }] });
    await r.c.action((e) => e.action.type === "chat/toolCallReady");
    r.c.dispatch(r.reg.chat, { type: "chat/toolCallConfirmed", turnId: "t", toolCallId: "tc", approved: true, selectedOptionId: "ok" });
    await accepted(r.be, "confirm_tool");
    await r.c.action((e) => e.action.type === "chat/toolCallConfirmed" && e.rejectionReason === undefined);
    r.ev({ type: "tool_completed", toolCallId: "tc", toolName: "bash", output: "file", isError: false });
    r.ev({ type: "settled", cancelled: false });
    await endOf(r, "t");
  },
  5: async (r) => {
    // An MCP side-channel round trip: AHP client → host → backend `mcp_request` → `mcp_response` → client.
    const snap = (await r.c.request("subscribe", { channel: r.reg.session })).result.snapshot.state;
    const server = (snap.customizations as Json[]).find((x) => x.id === TOOLS_SERVER.id)!;
    assert.equal(server.state.kind, "ready");
    const channel = server.channel as string;
    const m = McpClient.of(r.c);
    m.request(channel, "v5-call", "tools/call", { name: "grep", arguments: { pattern: "x" } });
    const req = await r.be.nextType("mcp_request");
    assert.equal(req.session, r.reg.session);
    assert.equal(req.serverId, TOOLS_SERVER.id);
    assert.deepEqual(req.message, { jsonrpc: "2.0", id: req.requestId, method: "tools/call", params: { name: "grep", arguments: { pattern: "x" } } });
    r.be.send({ type: "mcp_response", requestId: req.requestId, message: { jsonrpc: "2.0", id: req.requestId, result: { content: [{ type: "text", text: "hit" }] } } });
    assert.deepEqual(await m.reply("v5-call"), { jsonrpc: "2.0", id: "v5-call", result: { content: [{ type: "text", text: "hit" }] }, channel });
    // MCP `initialize` never reaches the backend; an advertised notification is relayed to the client.
    m.request(channel, "v5-init", "initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } });
    assert.equal((await m.reply("v5-init")).error.code, -32601);
    r.be.send({ type: "mcp_notification", serverId: TOOLS_SERVER.id, message: { jsonrpc: "2.0", method: "notifications/tools/list_changed" } });
    await until(() => m.mcp.some((x) => x.method === "notifications/tools/list_changed"), 3000, "relayed MCP notification");
    assert.deepEqual(m.mcp.at(-1), { jsonrpc: "2.0", method: "notifications/tools/list_changed", channel });
    assert.equal(r.be.frames.filter((f) => f.type === "mcp_request").length, 0, "only the allowed call reached the backend");
  },
  6: async (r) => {
    // A changeset resource: announced on the session, its snapshot and actions reach the client,
    // and an operation the client invokes is sent to the backend as a command.
    const uri = `${changesetPrefix(r.reg.session as string)}session`;
    r.ev({ type: "resource_action", action: { type: "session/changesetsChanged", changesets: [{ label: "Session changes", uriTemplate: uri, changeKind: "session" }] } });
    await r.c.action((e) => e.action.type === "session/changesetsChanged");
    r.ev({ type: "resource_snapshot", resource: uri, kind: "changeset", state: { status: "computing", files: [] } });
    await r.be.roundTrip();
    let model = (await r.c.request("subscribe", { channel: uri })).result.snapshot.state as Json;
    const ops = [{ id: "stage", label: "Stage", scopes: ["changeset", "resource"], status: "idle" }];
    const file = { id: "file:///a.ts", edit: { after: { uri: "file:///a.ts", content: { uri: "file:///a.ts#after" } } } };
    for (const action of [
      { type: "changeset/fileSet", file },
      { type: "changeset/operationsChanged", operations: ops },
      { type: "changeset/statusChanged", status: "ready" },
    ])
      r.ev({ type: "resource_action", channel: uri, action });
    await r.c.action((e) => e.channel === uri && e.action.type === "changeset/statusChanged");
    for (const e of r.c.actions(uri)) model = reduceChangeset(model as never, e.action as never);
    const fresh = (await r.c.request("subscribe", { channel: uri })).result.snapshot.state as Json;
    assert.deepEqual<unknown>(fresh, model, "changeset envelopes rebuild the snapshot");
    assert.deepEqual(fresh, { status: "ready", files: [file], operations: ops });
    const call = r.c.request("invokeChangesetOperation", { channel: uri, operationId: "stage", target: { kind: "resource", resource: "file:///a.ts" } });
    const cmd = await accepted(r.be, "invoke_changeset_operation");
    assert.deepEqual(cmd.command, { type: "invoke_changeset_operation", operationId: "stage", resource: uri, target: { kind: "resource", resource: "file:///a.ts" } });
    assert.deepEqual((await call).result, {});
  },
  7: async (r) => {
    // The hello adopted the session of its alias (registered earlier) and declared read-only.
    assert.equal(r.reg.session, r.reg.adopted, "the alias adopts the prior source's session");
    const snap = (await r.c.request("subscribe", { channel: r.reg.session })).result.snapshot.state;
    assert.equal(snap.chats[0].interactivity, "read-only");
    const seq = r.c.dispatch(r.reg.chat, { type: "chat/turnStarted", turnId: "t", message: user("x") });
    assert.equal((await r.c.action((e) => e.origin?.clientSeq === seq)).rejectionReason, "chat is read-only");
  },
  8: async (r) => FEATURES[1]!(r),
  9: async (r) => {
    r.c.dispatch(r.reg.chat, { type: "chat/turnStarted", turnId: "t", message: user("x") });
    const cmd = await r.be.next((f) => f.type === "command" && f.command.type === "prompt");
    r.be.send({ type: "command_indeterminate", commandId: cmd.commandId, error: "reconcile the original request" });
    const err = await endOf(r, "t", "chat/error");
    assert.equal(err.action.error.errorType, "backend_indeterminate");
  },
  10: async (r) => {
    const cmd = await turn(r, "t");
    r.ev({ type: "invocation_outcome", commandId: cmd.commandId, target: { turnId: "t" }, outcome: "succeeded", delivery: { state: "delivered" } });
    r.ev({ type: "invocation_boundary", commandId: cmd.commandId, phase: "retired" });
    await endOf(r, "t");
  },
  11: async (r) => {
    r.ev({ type: "source_turn", sourceId: "v11", active: false, historyOnly: true, turn: { id: "s1", userText: "q", responseText: "a" } });
    await endOf(r, "s1");
  },
  12: async (r) => {
    r.be.send({ type: "source_snapshot_batch", session: r.reg.session, batchId: "b", snapshots: [1, 2].map((i) => ({ sourceId: "v12", active: false, historyOnly: true, turn: { id: `b${i}`, userText: "q", responseText: "a" } })) });
    const ack = await r.be.nextType("source_snapshot_batch_ack");
    assert.equal(ack.accepted, 2);
    await endOf(r, "b2");
  },
  13: async (r) => {
    const text = JSON.stringify({ sourceId: "v13", active: false, historyOnly: true, turn: { id: "rs", userText: "q", responseText: "resource text" } });
    const halves = [text.slice(0, 20), text.slice(20)];
    const resources = halves.map((t, index) => ({ session: r.reg.session, index, mimeType: "text/plain", digest: `sha256:${createHash("sha256").update(t).digest("hex")}`, text: t }));
    r.ev({ type: "source_turn_resources", sourceId: "v13", active: false, historyOnly: true, resources });
    await endOf(r, "rs");
  },
  14: async (r) => {
    const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1]), Buffer.alloc(16)]);
    r.ev({ type: "profile_image_changed", image: { mimeType: "image/png", data: png.toString("base64"), width: 1, height: 1 } });
    const meta = await r.c.action((e) => e.action.type === "session/metaChanged");
    assert.equal(meta.action._meta["paratenic.identity"].image.width, 1);
  },
};

/** A session's status as a client derives it: one activity value (failed, input needed, else the default chat's). */
function sessionStatusOf(s: SessionState): number {
  if (s.lifecycle === "failed") return 2;
  if ((s.inputNeeded ?? []).length > 0 || s.chats.some((c) => c.status === 24)) return 24;
  return s.chats.find((c) => c.resource === s.defaultChat)?.status ?? 1;
}

function norm(turns: Json[]): unknown {
  return turns.map((t) => ({
    id: t.id,
    state: t.state,
    parts: (t.responseParts as Json[]).map((p) => `${String(p.kind)}:${String(p.content ?? p.toolCall?.status ?? p.response ?? p.error?.errorType ?? "")}`),
  }));
}

test("every backend version 1-14 registers with its exact version and its feature works end to end for an AHP client", () =>
  withHost(async (h) => {
    seqs = new Map();
    for (let v = 1; v <= 14; v++) {
      const hello: Json = { protocolVersion: v, sourceId: `v${v}`, instanceId: `i${v}`, title: `Version ${v}` };
      if (v >= 2) hello.inputCapabilities = { freeform: true };
      if (v >= 3) hello.chatCapabilities = { create: true, dispose: true };
      if (v >= 4) hello.toolCapabilities = { confirmations: true, resultConfirmations: true };
      if (v >= 5) hello.mcpServers = [TOOLS_SERVER];
      if (v >= 10) hello.chatCapabilities = { ...(hello.chatCapabilities as Json), managedInvocations: true };
      if (v === 3) Object.assign(hello, { history: [{ id: "h", userText: "first", responseText: "kept" }], historyNextCursor: "older-page" });
      let adopted: string | undefined;
      if (v === 7) {
        const prior = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "v7-before", instanceId: "old" });
        adopted = prior.reg.session as string;
        prior.be.close();
        await prior.be.waitClosed();
        Object.assign(hello, { sourceAliases: ["v7-before"], interactivity: "read-only" });
      }
      let be: FakeBackend;
      let reg: Json;
      if (v === 8) {
        // v8: a multiplexed route on a provider connection.
        const p = await FakeBackend.provider(h, 8, ["mux"]);
        assert.equal(p.reg.protocolVersion, 8);
        p.be.send({ type: "register_session", requestId: "r8", hello: { ...hello, provider: "mux" } });
        reg = await p.be.nextType("session_registered");
        be = p.be;
      } else ({ be, reg } = await FakeBackend.session(h, hello));
      assert.equal(reg.type === "registered" || reg.type === "session_registered", true, `v${v}: ${JSON.stringify(reg)}`);
      assert.equal(reg.protocolVersion, v, `v${v} is acknowledged exactly`);
      reg.managed = v >= 10;
      reg.adopted = adopted;
      const { c, result } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat], `client-v${v}`);
      const chatSnap = (result.snapshots as Json[]).find((s) => s.resource === reg.chat)!;
      const r = rig(h, c, be, reg, v, v === 8);
      await FEATURES[v]!(r);
      // Quiesce: every frame so far has been handled.
      be.send({ type: "ping", id: `done-${v}` });
      await be.next((f) => f.type === "pong" && f.id === `done-${v}`);
      assert.equal(be.frames.some((f) => f.type === "error" || f.type === "event_rejected"), false, `v${v}: ${JSON.stringify(be.frames.filter((f) => f.type === "error" || f.type === "event_rejected"))}`);
      assert.deepEqual(c.invalid, [], `v${v}: everything the host emitted validates`);
      // Reducer consistency: envelopes over the initial snapshot equal a fresh snapshot.
      const mirror = structuredClone(chatSnap.state) as Chat;
      mirror.queuedMessages ??= [];
      for (const e of c.actions(reg.chat)) if (e.rejectionReason === undefined) reduceChat(mirror, e.action);
      const fresh = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state as Json;
      const withLoaded = (x: Json) => norm(x.turns as Json[]);
      assert.deepEqual(withLoaded(mirror as unknown as Json), withLoaded(fresh), `v${v}: rebuilt turns equal the snapshot`);
      assert.equal(mirror.activeTurn?.id, (fresh.activeTurn as Json | undefined)?.id);
      // The session's `_meta` (input availability, identity image) rebuilt the same way.
      let session = structuredClone((result.snapshots as Json[]).find((s) => s.resource === reg.session)!.state) as SessionState;
      for (const e of c.actions(reg.session)) if (e.rejectionReason === undefined) session = reduceSession(session, e.action);
      const freshSession = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
      assert.deepEqual(session._meta, freshSession._meta, `v${v}: rebuilt session _meta equals the snapshot`);
      // The session's own status is derived from its chats (no session action carries it).
      assert.deepEqual({ ...session, status: sessionStatusOf(session) }, freshSession, `v${v}: the rebuilt session equals the snapshot`);
      c.close();
      if (v !== 8) be.close();
    }
  }));
