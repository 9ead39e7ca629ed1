/**
 * Issue 15, "what the upstream AHP client sees": state rebuilt from the envelopes a client
 * receives must equal a fresh snapshot after every step. The mirror below is written from the
 * public AHP reducer semantics (chat, session and root channels), not from the host's code.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";

const ACTIVITY = [1, 2, 8, 24, 32, 64];
const isoPlus = (iso: string, ms: number) => new Date(Date.parse(iso) + Math.max(0, ms)).toISOString();

/** A client-side mirror of root, session and chat state, reduced from envelopes. */
class Mirror {
  root: Json = {};
  sessions = new Map<string, Json>();
  chats = new Map<string, Json>();
  load(snap: Json): void {
    const st = structuredClone(snap.state);
    if (snap.resource === "ahp-root://") this.root = st;
    else if (String(snap.resource).startsWith("ahp-session:")) this.sessions.set(snap.resource, st);
    else this.chats.set(snap.resource, st);
  }
  apply(env: Json): void {
    if (env.rejectionReason !== undefined) return;
    const a = structuredClone(env.action) as Json;
    const ch = env.channel as string;
    if (ch === "ahp-root://") {
      if (a.type === "root/activeSessionsChanged") this.root.activeSessions = a.activeSessions;
      return;
    }
    const s = this.sessions.get(ch);
    if (s) return this.session(s, a);
    const c = this.chats.get(ch);
    if (c) this.chat(c, a);
  }
  private session(s: Json, a: Json): void {
    switch (a.type) {
      case "session/titleChanged":
        s.title = a.title;
        break;
      case "session/chatAdded":
        s.chats.push(a.summary);
        break;
      case "session/chatUpdated": {
        const sum = s.chats.find((x: Json) => x.resource === a.chat);
        if (sum) Object.assign(sum, a.changes);
        break;
      }
      case "session/chatRemoved":
        s.chats = s.chats.filter((x: Json) => x.resource !== a.chat);
        break;
      case "session/inputNeededSet":
        s.inputNeeded = [...(s.inputNeeded ?? []).filter((r: Json) => r.id !== a.request.id), a.request];
        break;
      case "session/inputNeededRemoved":
        s.inputNeeded = (s.inputNeeded ?? []).filter((r: Json) => r.id !== a.id);
        if (s.inputNeeded.length === 0) delete s.inputNeeded;
        break;
    }
  }
  private chat(c: Json, a: Json): void {
    const t = c.activeTurn as Json | undefined;
    const tool = (id: string) => t?.responseParts.find((p: Json) => p.kind === "toolCall" && p.toolCall.toolCallId === id)?.toolCall as Json | undefined;
    switch (a.type) {
      case "chat/turnStarted":
        c.activeTurn = { id: a.turnId, startedAt: a.startedAt, message: a.message, responseParts: [] };
        c.modifiedAt = a.startedAt;
        break;
      case "chat/responsePart":
        if (t && t.id === a.turnId) t.responseParts.push(a.part);
        break;
      case "chat/delta":
      case "chat/reasoning": {
        const p = t && t.id === a.turnId ? t.responseParts.find((x: Json) => x.id === a.partId) : undefined;
        if (p) p.content += a.content;
        break;
      }
      case "chat/toolCallStart":
        if (t && t.id === a.turnId) t.responseParts.push({ kind: "toolCall", toolCall: { toolCallId: a.toolCallId, toolName: a.toolName, displayName: a.displayName, status: "streaming" } });
        break;
      case "chat/toolCallReady": {
        const tc = tool(a.toolCallId);
        if (!tc) break;
        if (a.confirmed) Object.assign(tc, { status: "running", confirmed: a.confirmed });
        else Object.assign(tc, { status: "pending-confirmation", ...(a.options ? { options: a.options } : {}) });
        break;
      }
      case "chat/toolCallConfirmed": {
        const tc = tool(a.toolCallId);
        if (!tc || tc.status !== "pending-confirmation") break;
        const selected = (tc.options as Json[] | undefined)?.find((o) => o.id === a.selectedOptionId);
        delete tc.options;
        tc.status = a.approved ? "running" : "cancelled";
        if (selected) tc.selectedOption = selected;
        break;
      }
      case "chat/toolCallComplete": {
        const tc = tool(a.toolCallId);
        if (tc) tc.status = a.requiresResultConfirmation ? "pending-result-confirmation" : "completed";
        break;
      }
      case "chat/inputRequested": {
        if (!t) break;
        const open = t.responseParts.find((p: Json) => p.kind === "inputRequest" && p.response === undefined && p.request.id === a.request.id);
        if (open) open.request = a.request;
        else t.responseParts.push({ kind: "inputRequest", request: a.request });
        break;
      }
      case "chat/inputCompleted": {
        const p = t?.responseParts.find((x: Json) => x.kind === "inputRequest" && x.request.id === a.requestId);
        if (p) p.response = a.response;
        break;
      }
      case "chat/turnComplete":
      case "chat/turnCancelled":
      case "chat/error": {
        if (!t || t.id !== a.turnId) break;
        const parts = t.responseParts.map((p: Json) =>
          p.kind === "toolCall" && !["completed", "cancelled"].includes(p.toolCall.status)
            ? { kind: "toolCall", toolCall: { toolCallId: p.toolCall.toolCallId, toolName: p.toolCall.toolName, displayName: p.toolCall.displayName, status: "cancelled" } }
            : p,
        );
        if (a.type === "chat/error") parts.push(a.part ?? { kind: "error", error: a.error });
        c.turns.push({ id: t.id, responseParts: parts, state: a.type === "chat/turnComplete" ? "complete" : a.type === "chat/turnCancelled" ? "cancelled" : "error" });
        delete c.activeTurn;
        c.modifiedAt = isoPlus(t.startedAt, a.duration);
        c.failed = a.type === "chat/error";
        break;
      }
    }
    c.status = Mirror.chatStatus(c);
  }
  /** The public reducer's summary status: one activity value. */
  static chatStatus(c: Json): number {
    const t = c.activeTurn as Json | undefined;
    if (t) {
      const waiting = t.responseParts.some(
        (p: Json) => (p.kind === "inputRequest" && p.response === undefined) || (p.kind === "toolCall" && ["pending-confirmation", "pending-result-confirmation"].includes(p.toolCall.status)),
      );
      return waiting ? 24 : 8;
    }
    return c.failed ? 2 : c.status === 2 && !("failed" in c) ? 2 : 1;
  }
}

const partView = (p: Json): Json =>
  p.kind === "toolCall" ? { kind: p.kind, status: p.toolCall.status, selectedOption: p.toolCall.selectedOption } : p.kind === "inputRequest" ? { kind: p.kind, id: p.request.id, response: p.response } : { kind: p.kind, content: p.content, error: p.error };
const chatView = (c: Json): Json => ({
  status: c.status,
  modifiedAt: c.modifiedAt,
  turns: c.turns.map((t: Json) => ({ id: t.id, state: t.state, parts: t.responseParts.map(partView) })),
  active: c.activeTurn ? { id: c.activeTurn.id, parts: c.activeTurn.responseParts.map(partView) } : null,
});
const sessionView = (s: Json): Json => ({
  title: s.title,
  chats: s.chats.map((x: Json) => ({ resource: x.resource, title: x.title, status: x.status, modifiedAt: x.modifiedAt })),
  inputNeeded: (s.inputNeeded ?? []).map((r: Json) => r.id).sort(),
});

test("reducer consistency: state rebuilt from envelopes equals a fresh snapshot after every step", () =>
  withHost(async (h) => {
    const m = new Mirror();
    const seen = { n: 0 };
    const { c, result } = await AhpClient.init(h, ["ahp-root://"]);
    for (const snap of result.snapshots) m.load(snap);
    const check = async (step: string) => {
      await until(() => (c.actions().at(-1)?.serverSeq ?? 0) >= h.state.serverSeq, 3000, `${step}: client caught up`);
      const envs = c.actions();
      for (const e of envs.slice(seen.n)) m.apply(e);
      seen.n = envs.length;
      assert.equal(m.root.activeSessions, (h.state.snapshot("ahp-root://")!.state as Json).activeSessions, `${step}: root activeSessions`);
      for (const [uri, s] of m.sessions) {
        const fresh = h.state.snapshot(uri)!.state as Json;
        assert.ok(ACTIVITY.includes(fresh.status as number), `${step}: session status ${String(fresh.status)} is one activity value`);
        assert.deepEqual(sessionView(s), sessionView(fresh), `${step}: session ${uri}`);
      }
      for (const [uri, ch] of m.chats) {
        const fresh = h.state.snapshot(uri)!.state as Json;
        assert.ok(ACTIVITY.includes(fresh.status as number), `${step}: chat status ${String(fresh.status)}`);
        assert.deepEqual(chatView(ch), chatView(fresh), `${step}: chat ${uri}`);
      }
      assert.deepEqual(c.invalid, [], `${step}: every message validates`);
    };

    // A backend session registering by hello is counted by root reducers.
    const { be, reg } = await FakeBackend.session(h, {
      protocolVersion: 4,
      sourceId: "mirror",
      inputCapabilities: { freeform: true },
      toolCapabilities: { confirmations: true },
      chatCapabilities: { create: true },
    });
    await check("hello registration");
    for (const uri of [reg.session, reg.chat]) m.load((await c.request("subscribe", { channel: uri })).result.snapshot);
    const ev = (event: Json) => be.send({ type: "event", session: reg.session, event });

    ev({ type: "user_message", text: "hi", turnId: "T1" });
    for (let i = 0; i < 5; i++) ev({ type: "text_delta", text: `w${i} ` });
    await until(() => (h.state.chatIndex.get(reg.chat)!.activeTurn?.responseParts[0]?.content as string | undefined)?.endsWith("w4 ") === true, 3000, "deltas");
    await check("streaming");

    ev({ type: "tool_started", toolCallId: "tc", toolName: "write" });
    ev({ type: "tool_confirmation_requested", toolCallId: "tc", title: "Write", options: [{ id: "allow", label: "Allow", kind: "approve" }, { id: "deny", label: "Deny", kind: "deny" }] });
    await c.action((e) => e.action.type === "chat/toolCallReady" && e.action.confirmed === undefined);
    await check("confirmation pending");
    c.dispatch(reg.chat, { type: "chat/toolCallConfirmed", turnId: "T1", toolCallId: "tc", approved: true, confirmed: "user-action", selectedOptionId: "allow" });
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "confirm_tool");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    await c.action((e) => e.action.type === "chat/toolCallConfirmed");
    await check("confirmation echoed");
    const tc = h.state.chatIndex.get(reg.chat)!.activeTurn!.responseParts.find((p) => p.kind === "toolCall")!.toolCall as Json;
    assert.deepEqual(tc.selectedOption, { id: "allow", label: "Allow", kind: "approve" }, "the resolved option is kept");

    ev({ type: "tool_completed", toolCallId: "tc", toolName: "write", output: "ok", isError: false });
    await c.action((e) => e.action.type === "chat/toolCallComplete");
    await check("tool completed");
    ev({ type: "settled", cancelled: false, error: "model overloaded" });
    const err = await c.action((e) => e.action.type === "chat/error");
    assert.deepEqual(err.action.error, { errorType: "backend_error", message: "model overloaded" }, "older readers' field");
    assert.deepEqual(err.action.part, { kind: "error", error: { errorType: "backend_error", message: "model overloaded" } }, "newer readers' part");
    await check("turn error");

    ev({ type: "agent_started", turnId: "T2" });
    ev({ type: "input_requested", request: { id: "q1", message: "Pick", questions: [{ id: "a", kind: "text", message: "A?" }] } });
    await c.action((e) => e.action.type === "chat/inputRequested");
    await check("input in a turn");
    ev({ type: "input_resolved", requestId: "q1", response: "accept" });
    ev({ type: "settled", cancelled: false });
    await c.action((e) => e.action.type === "chat/turnComplete");
    await check("turn complete");

    // A runtime-owned request while the chat is idle: announced at session level, chat stays idle.
    ev({ type: "input_requested", request: { id: "q2", message: "Runtime asks" } });
    await c.action((e) => e.action.type === "session/inputNeededSet" && e.action.request.request?.id === "q2");
    await check("idle input request");
    assert.equal((h.state.snapshot(reg.chat)!.state as Json).status, 1, "the idle chat stays Idle");
    assert.equal((h.state.snapshot(reg.session)!.state as Json).status, 24, "the session says InputNeeded, not 25");
    ev({ type: "input_resolved", requestId: "q2", response: "cancel" });
    await c.action((e) => e.action.type === "session/inputNeededRemoved" && String(e.action.id).endsWith(":q2"));
    await check("idle input resolved");

    // createChat: the announced summary's modifiedAt is the stored one.
    const added = c.request("createChat", { channel: reg.session, chat: "ahp-chat:/side" });
    const cc = await be.next((f) => f.type === "command" && f.command.type === "create_chat");
    be.send({ type: "command_result", commandId: cc.commandId, accepted: true });
    await added;
    const announced = (await c.action((e) => e.action.type === "session/chatAdded")).action.summary;
    assert.equal(announced.modifiedAt, h.state.chatIndex.get("ahp-chat:/side")!.modifiedAt);
    await check("chat added");
    c.close();
    be.close();
  }));

test("finding: reconnect replayed envelopes the reducer had mutated since (duplicated text)", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "replay" });
    const { c } = await AhpClient.init(h, [reg.chat]);
    const before = h.state.serverSeq;
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "go", turnId: "T" } });
    for (let i = 0; i < 25; i++) be.send({ type: "event", session: reg.session, event: { type: "text_delta", text: `w${i} ` } });
    await until(() => c.actions().filter((e) => e.action.type === "chat/delta").length === 24, 3000, "live deltas");
    const live = c.actions().filter((e) => e.serverSeq > before);
    const c2 = await AhpClient.open(h);
    const r = await c2.request("reconnect", { clientId: "c2", lastSeenServerSeq: before, subscriptions: [reg.chat] });
    assert.equal(r.result.type, "replay");
    assert.deepEqual(r.result.actions, live, "replay is byte-for-byte what was sent live");
    const part = r.result.actions.find((e: Json) => e.action.type === "chat/responsePart");
    assert.equal(part.action.part.content, "w0 ");
    c.close();
    c2.close();
    be.close();
  }));
