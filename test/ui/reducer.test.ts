/**
 * UI-REDUCER: the client reducers the web UI uses (`src/client/ahp/reducer.ts`), fed the real
 * envelopes a daemon sends over an earlier snapshot, reach the same chat and session state as a
 * fresh snapshot — checked at several points of a scripted backend's turns (streaming,
 * reasoning, a pending and an approved confirmation, an input request, a queued message, a
 * refused prompt, a cancelled turn).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "../host/helpers.js";
import { reduceChat, reduceSession, type Chat, type SessionState } from "../../src/client/ahp/reducer.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const user = (text: string) => ({ text, origin: { kind: "user" } });

function toolView(tc: Json): Json {
  const keep: Json = {};
  for (const k of ["toolCallId", "toolName", "status", "reason", "toolInput", "success"]) if (tc[k] !== undefined) keep[k] = tc[k];
  return keep;
}
function partView(p: Json): Json {
  if (p.kind === "toolCall") return { kind: p.kind, toolCall: toolView(p.toolCall as Json) };
  if (p.kind === "inputRequest") return { kind: p.kind, id: (p.request as Json).id, response: p.response ?? null };
  if (p.kind === "error") return { kind: p.kind, message: (p.error as Json).message };
  return { kind: p.kind, id: p.id, content: p.content };
}
function turnView(t: Json | undefined): Json | null {
  if (!t) return null;
  return { id: t.id, state: t.state ?? null, text: (t.message as Json).text, parts: (t.responseParts as Json[]).map(partView) };
}
function chatView(c: Json): Json {
  return {
    turns: (c.turns as Json[]).map(turnView),
    active: turnView(c.activeTurn as Json | undefined),
    steering: (c.steeringMessage as Json | undefined)?.id ?? null,
    queued: ((c.queuedMessages as Json[] | undefined) ?? []).map((m) => m.id),
    cursor: c.turnsNextCursor ?? null,
  };
}
function sessionView(s: Json): Json {
  return {
    lifecycle: s.lifecycle,
    title: s.title,
    chats: (s.chats as Json[]).map((c) => c.resource),
    inputNeeded: ((s.inputNeeded as Json[] | undefined) ?? []).map((r) => r.id),
  };
}

test("UI-REDUCER: envelopes reduced over an old snapshot equal a fresh snapshot at every checkpoint", () =>
  withHost(async (h: HostHandle) => {
    const { be, reg } = await FakeBackend.session(h, {
      protocolVersion: 4,
      sourceId: "reducer",
      title: "Reducer",
      inputCapabilities: { freeform: true },
      toolCapabilities: { confirmations: true },
      history: [{ id: "h0", userText: "old", responseText: "old answer" }],
    });
    const session = reg.session as string;
    const chat = reg.chat as string;
    const { c, result } = await AhpClient.init(h, [session, chat], "watcher");
    const snaps = result.snapshots as Json[];
    const s0 = snaps.find((s) => s.resource === session)!;
    const c0 = snaps.find((s) => s.resource === chat)!;
    const ev = (event: Json) => be.send({ type: "event", session, event });
    const accept = async (type: string, ok = true): Promise<Json> => {
      const cmd = await be.next((f) => f.type === "command" && (f.command as Json).type === type, type);
      be.send({ type: "command_result", commandId: cmd.commandId, accepted: ok, ...(ok ? {} : { error: "busy" }) });
      return cmd;
    };
    let checks = 0;
    const checkpoint = async (what: string) => {
      const { c: fresh, result: r } = await AhpClient.init(h, [session, chat], `fresh-${++checks}`);
      fresh.close();
      const sNow = (r.snapshots as Json[]).find((s) => s.resource === session)!;
      const cNow = (r.snapshots as Json[]).find((s) => s.resource === chat)!;
      const upTo = r.serverSeq as number;
      await until(() => c.actions().some((e) => (e.serverSeq as number) >= upTo) || upTo <= (c0.fromSeq as number), 3000, `watcher to reach ${upTo}`);
      let st = structuredClone(s0.state) as SessionState;
      const ch = { ...(structuredClone(c0.state) as Chat), rev: 0 };
      ch.queuedMessages ??= [];
      for (const e of c.actions()) {
        if ((e.serverSeq as number) > upTo || e.rejectionReason !== undefined) continue;
        if (e.channel === session && (e.serverSeq as number) > (s0.fromSeq as number)) st = reduceSession(st, e.action as Json);
        if (e.channel === chat && (e.serverSeq as number) > (c0.fromSeq as number)) reduceChat(ch, e.action as Json);
      }
      assert.deepEqual(chatView(ch as unknown as Json), chatView(cNow.state as Json), `chat at: ${what}`);
      assert.deepEqual(sessionView(st), sessionView(sNow.state as Json), `session at: ${what}`);
    };

    // Turn 1: streaming, reasoning, a confirmation (pending, then approved), an input request.
    c.dispatch(chat, { type: "chat/turnStarted", turnId: "T1", startedAt: new Date().toISOString(), message: user("go") });
    await accept("prompt");
    ev({ type: "thinking_delta", text: "hmm " });
    ev({ type: "thinking_delta", text: "ok" });
    ev({ type: "text_delta", text: "Working " });
    ev({ type: "text_delta", text: "on it." });
    ev({ type: "tool_started", toolCallId: "w", toolName: "write", input: "{\"p\":1}" });
    ev({ type: "tool_confirmation_requested", toolCallId: "w", input: "{\"p\":1}", title: "Write" });
    await c.action((e) => e.action.type === "chat/toolCallReady");
    await checkpoint("a pending confirmation");
    c.dispatch(chat, { type: "chat/toolCallConfirmed", turnId: "T1", toolCallId: "w", approved: true, confirmed: "user-action" });
    await accept("confirm_tool");
    ev({ type: "tool_completed", toolCallId: "w", toolName: "write", output: "done", isError: false });
    ev({ type: "input_requested", request: { id: "q", message: "Name?", questions: [{ id: "n", kind: "text", message: "Name" }] } });
    await c.action((e) => e.action.type === "chat/inputRequested");
    await checkpoint("an open input request");
    c.dispatch(chat, { type: "chat/inputCompleted", requestId: "q", response: "accept", answers: { n: { state: "submitted", value: { kind: "text", value: "x" } } } });
    const ci = await accept("complete_input");
    ev({ type: "input_resolved", requestId: "q", response: "accept", commandId: ci.commandId });
    ev({ type: "text_delta", text: " Finished." });
    ev({ type: "settled", cancelled: false });
    await c.action((e) => e.action.type === "chat/turnComplete");
    await checkpoint("turn 1 complete");

    // Turn 2 with a queued message; turn 3 refused; turn 4 cancelled by the client.
    c.dispatch(chat, { type: "chat/turnStarted", turnId: "T2", startedAt: new Date().toISOString(), message: user("again") });
    await accept("prompt");
    ev({ type: "text_delta", text: "second" });
    c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "m1", message: user("after that") });
    await accept("follow_up");
    await c.action((e) => e.action.type === "chat/pendingMessageSet");
    await checkpoint("a queued message during a turn");
    ev({ type: "settled", cancelled: false });
    await c.action((e) => e.action.type === "chat/turnComplete" && (e.action as Json).turnId === "T2");
    c.dispatch(chat, { type: "chat/turnStarted", turnId: "T3", startedAt: new Date().toISOString(), message: user("refused") });
    await accept("prompt", false);
    await c.action((e) => e.action.type === "chat/error");
    await checkpoint("a refused prompt");
    c.dispatch(chat, { type: "chat/turnStarted", turnId: "T4", startedAt: new Date().toISOString(), message: user("stop me") });
    await accept("prompt");
    ev({ type: "text_delta", text: "partial" });
    ev({ type: "tool_started", toolCallId: "b", toolName: "bash" });
    await c.action((e) => e.action.type === "chat/toolCallStart" && (e.action as Json).toolCallId === "b");
    c.dispatch(chat, { type: "chat/turnCancelled", turnId: "T4" });
    await c.action((e) => e.action.type === "chat/turnCancelled");
    await checkpoint("a cancelled turn with an open tool");
    assert.equal(checks, 6);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));
