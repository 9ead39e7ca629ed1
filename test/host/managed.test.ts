/**
 * Backend protocol v10, the managed invocation extension ("Managed invocation extension" and
 * "Managed transcript continuity" in the live-backend spec), driven by fake backends speaking
 * the real frames and a spec-derived AHP client that validates everything the host emits.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, until, withHost, type Json } from "./helpers.js";
import { MAX_UNRESOLVED_MANAGED, OBSERVATION_GAP_MESSAGE } from "../../src/protocols/host/managed-schema.js";
import { reduceChat, type Chat } from "../../src/client/ahp/reducer.js";

const user = (text: string) => ({ text, origin: { kind: "user" } });
const managedCaps = { chatCapabilities: { managedInvocations: true } };

async function managedSession(h: Parameters<Parameters<typeof withHost>[0]>[0], instanceId = "inst-1", sourceId = "managed-src") {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 10, sourceId, instanceId, ...managedCaps });
  assert.equal(reg.type, "registered", JSON.stringify(reg));
  assert.equal(reg.protocolVersion, 10);
  return { be, reg };
}
function command(be: FakeBackend, type: string): Promise<Json> {
  return be.next((f) => f.type === "command" && f.command.type === type, type);
}
async function accept(be: FakeBackend, type: string): Promise<Json> {
  const cmd = await command(be, type);
  be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
  return cmd;
}
const ev = (reg: Json, event: Json) => ({ type: "event", session: reg.session, event });

/** Start a managed turn from the client; returns the accepted `managed_prompt` command. */
async function startTurn(c: AhpClient, be: FakeBackend, reg: Json, turnId: string, text = "hello"): Promise<Json> {
  c.dispatch(reg.chat, { type: "chat/turnStarted", turnId, message: user(text) });
  const cmd = await accept(be, "managed_prompt");
  assert.deepEqual(cmd.command, { type: "managed_prompt", text, turnId });
  assert.equal(cmd.chat, reg.chat);
  return cmd;
}
/** The chat a client rebuilds from its initial snapshot and every accepted envelope equals a fresh snapshot. */
async function assertRebuilt(c: AhpClient, init: Json, chat: string): Promise<void> {
  const mirror = structuredClone((init.snapshots as Json[]).find((x) => x.resource === chat)!.state) as Chat;
  mirror.queuedMessages ??= [];
  for (const e of c.actions(chat)) if (e.rejectionReason === undefined) reduceChat(mirror, e.action);
  const fresh = (await c.request("subscribe", { channel: chat })).result.snapshot.state as Json;
  const norm = (turns: Json[]) => turns.map((t) => ({ id: t.id, state: t.state, parts: (t.responseParts as Json[]).map((p) => `${String(p.kind)}:${String(p.content ?? p.error?.errorType ?? "")}`) }));
  assert.deepEqual(norm(mirror.turns as unknown as Json[]), norm(fresh.turns as Json[]));
  assert.equal(mirror.activeTurn?.id, (fresh.activeTurn as Json | undefined)?.id);
  assert.deepEqual(mirror.queuedMessages.map((m) => m.id).sort(), ((fresh.queuedMessages as Json[] | undefined) ?? []).map((m) => m.id as string).sort());
}
const ended = (c: AhpClient, chat: string, turnId: string) =>
  c.actions(chat).find((e) => ["chat/turnComplete", "chat/turnCancelled", "chat/error"].includes(e.action.type) && e.action.turnId === turnId);

test("v10 registration: exact acknowledgement; managed capabilities and events refused on legacy connections", () =>
  withHost(async (h) => {
    // A v10 provider connection is acknowledged as exactly v10, and so is its managed session.
    const pv = await FakeBackend.provider(h, 10, ["mgr"]);
    assert.equal(pv.reg.type, "provider_registered");
    assert.equal(pv.reg.protocolVersion, 10);
    pv.be.send({ type: "register_session", requestId: "r1", hello: { protocolVersion: 10, instanceId: "i", sourceId: "m1", provider: "mgr", ...managedCaps } });
    const sr = await pv.be.nextType("session_registered");
    assert.equal(sr.protocolVersion, 10);

    // A v9 provider cannot advertise the extension, nor carry a v10 session.
    const p9 = await FakeBackend.connect(h.backendSocket);
    p9.send({ type: "provider_hello", protocolVersion: 9, instanceId: "p9", providers: [{ id: "old", multipleChats: { managedInvocations: true } }] });
    const e9 = await p9.nextType("error");
    assert.equal(e9.code, "validation_error");
    assert.match(e9.message, /managedInvocations requires protocol version 10/);
    const legacy = await FakeBackend.provider(h, 9, ["legacy"]);
    legacy.be.send({ type: "register_session", requestId: "r2", hello: { protocolVersion: 10, instanceId: "i", sourceId: "m2", provider: "legacy", ...managedCaps } });
    const up = await legacy.be.nextType("error");
    assert.equal(up.code, "unsupported_version");
    assert.equal(up.requestId, "r2");

    // A v9 dedicated session cannot advertise it either.
    const d9 = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "d9", ...managedCaps });
    assert.equal(d9.reg.code, "validation_error");

    // Managed events on a legacy route, or on a v10 route that did not opt in, are refused.
    const plain9 = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "p9s" });
    plain9.be.send({ type: "sequenced_event", session: plain9.reg.session, sequence: 1, event: { type: "invocation_boundary", commandId: "x", phase: "entered" } });
    const rej = await plain9.be.nextType("event_rejected");
    assert.match(rej.error, /requires protocol version 10/);
    const plain10 = await FakeBackend.session(h, { protocolVersion: 10, sourceId: "p10s" });
    plain10.be.send(ev(plain10.reg, { type: "invocation_boundary", commandId: "x", phase: "entered" }));
    const rej10 = await plain10.be.nextType("error");
    assert.match(rej10.message, /requires advertised chatCapabilities.managedInvocations/);

    // A v10 route without the extension keeps the legacy commands (prompt, abort).
    const { c } = await AhpClient.init(h, ["ahp-root://", plain10.reg.chat]);
    c.dispatch(plain10.reg.chat, { type: "chat/turnStarted", turnId: "lt", message: user("legacy") });
    const p = await command(plain10.be, "prompt");
    assert.equal(p.command.turnId, "lt");
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("managed_prompt: a handled prompt settles only after its outcome and native retirement; no invented reply", () =>
  withHost(async (h) => {
    const { be, reg } = await managedSession(h);
    const { c, result: init } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat]);
    const cmd = await startTurn(c, be, reg, "t1");
    be.send(ev(reg, { type: "invocation_boundary", commandId: cmd.commandId, phase: "entered", binding: { span: "s1" } }));
    be.send(ev(reg, { type: "invocation_outcome", commandId: cmd.commandId, target: { turnId: "t1" }, outcome: "succeeded", delivery: { state: "delivered" } }));
    // The early outcome cannot overtake the source stream: the turn stays open until retirement.
    be.send({ type: "ping", id: 1 });
    await be.nextType("pong");
    assert.equal(ended(c, reg.chat, "t1"), undefined);
    assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "t1");
    be.send(ev(reg, { type: "invocation_boundary", commandId: cmd.commandId, phase: "retired" }));
    const done = await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "t1");
    assert.equal(done.channel, reg.chat);
    const snap = (await c.request("subscribe", { channel: reg.chat })).result.snapshot.state;
    assert.equal(snap.turns.length, 1, "no extra turn");
    assert.deepEqual(snap.turns[0].responseParts, [], "no reply was invented from the outcome");

    // Succeeded without explicit delivery is not completion: it stays visible as unknown.
    const cmd2 = await startTurn(c, be, reg, "t2");
    be.send(ev(reg, { type: "invocation_outcome", commandId: cmd2.commandId, target: { turnId: "t2" }, outcome: "succeeded" }));
    be.send(ev(reg, { type: "invocation_boundary", commandId: cmd2.commandId, phase: "retired" }));
    const unk = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t2");
    assert.equal(unk.action.error.errorType, "invocation_outcome_unknown");
    assert.match(unk.action.error.message, /not resent/);

    // Identity validation: a foreign command or a different target is refused, nothing changes.
    const cmd3 = await startTurn(c, be, reg, "t3");
    be.send(ev(reg, { type: "invocation_outcome", commandId: cmd3.commandId, target: { turnId: "other" }, outcome: "succeeded", delivery: { state: "delivered" } }));
    assert.match((await be.nextType("error")).message, /target does not match/);
    be.send(ev(reg, { type: "invocation_outcome", commandId: "not-a-command", target: { turnId: "t3" }, outcome: "failed" }));
    assert.match((await be.nextType("error")).message, /unknown managed invocation/);
    // A native turn (user/model events) settles natively; the later outcome adds nothing.
    be.send(ev(reg, { type: "text_delta", text: "answer" }));
    be.send(ev(reg, { type: "settled", cancelled: false }));
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "t3");
    be.send(ev(reg, { type: "invocation_outcome", commandId: cmd3.commandId, target: { turnId: "t3" }, outcome: "succeeded", delivery: { state: "delivered" } }));
    be.send({ type: "ping", id: 2 });
    await be.nextType("pong");
    assert.equal(c.actions(reg.chat).filter((e) => e.action.type === "chat/turnStarted").length, 3);
    assert.equal(be.frames.some((f) => f.type === "error"), false);

    // A refused managed_prompt ends its turn as backend_rejected.
    c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "t4", message: user("no") });
    const r = await command(be, "managed_prompt");
    be.send({ type: "command_result", commandId: r.commandId, accepted: false, error: "busy" });
    const rej = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t4");
    assert.equal(rej.action.error.errorType, "backend_rejected");
    await assertRebuilt(c, init, reg.chat);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("managed_follow_up: immutable pending versions; only the unchanged version is retired", () =>
  withHost(async (h) => {
    const { be, reg } = await managedSession(h);
    const { c, result: init } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat], "cf");
    const seqA = c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("A") });
    const v1 = await accept(be, "managed_follow_up");
    assert.equal(v1.command.text, "A");
    assert.equal(v1.command.id, "q1");
    assert.deepEqual(v1.command.version, { commandId: v1.commandId, pendingId: "q1", chat: reg.chat, clientId: "cf", clientSeq: seqA });
    await c.action((e) => e.action.type === "chat/pendingMessageSet" && e.origin?.clientSeq === seqA && e.rejectionReason === undefined);
    // Re-setting the same pending ID (even with equal text) is a new version with its own command.
    const seqB = c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("B") });
    const v2 = await accept(be, "managed_follow_up");
    assert.notEqual(v2.commandId, v1.commandId);
    assert.equal(v2.command.version.clientSeq, seqB);
    await c.action((e) => e.action.type === "chat/pendingMessageSet" && e.origin?.clientSeq === seqB);
    assert.deepEqual(h.state.chatIndex.get(reg.chat)!.queuedMessages.map((m) => m.message.text), ["B"]);

    // The runtime starts the OLD version: a turn with its text, but the edited item stays queued.
    be.send(ev(reg, { type: "invocation_user_message", commandId: v1.commandId, text: "A", turnId: "ft1" }));
    const started = await c.action((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "ft1");
    assert.equal(started.action.queuedMessageId, undefined);
    assert.equal(started.action.message.text, "A");
    be.send(ev(reg, { type: "text_delta", text: "done A" }));
    be.send(ev(reg, { type: "settled", cancelled: false }));
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "ft1");
    be.send(ev(reg, { type: "invocation_outcome", commandId: v1.commandId, target: { pendingId: "q1" }, outcome: "succeeded", delivery: { state: "delivered" } }));
    be.send({ type: "ping", id: 1 });
    await be.nextType("pong");
    assert.deepEqual(h.state.chatIndex.get(reg.chat)!.queuedMessages.map((m) => m.message.text), ["B"], "the newer version is not retired by the old one");
    assert.equal(c.actions(reg.chat).some((e) => e.action.type === "chat/pendingMessageRemoved"), false);

    // The current version delivered without a user boundary: it leaves the queue, no turn is invented.
    be.send(ev(reg, { type: "invocation_outcome", commandId: v2.commandId, target: { pendingId: "q1" }, outcome: "succeeded", delivery: { state: "delivered" } }));
    await c.action((e) => e.action.type === "chat/pendingMessageRemoved" && e.action.id === "q1");
    assert.equal(c.actions(reg.chat).filter((e) => e.action.type === "chat/turnStarted").length, 1);

    // A NACK of a newer version leaves the accepted version in place.
    c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q2", message: user("X") });
    await accept(be, "managed_follow_up");
    const seqY = c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q2", message: user("Y") });
    const ny = await command(be, "managed_follow_up");
    be.send({ type: "command_result", commandId: ny.commandId, accepted: false, error: "queue full" });
    const echo = await c.action((e) => e.origin?.clientSeq === seqY);
    assert.match(echo.rejectionReason, /queue full/);
    assert.deepEqual(h.state.chatIndex.get(reg.chat)!.queuedMessages.map((m) => m.message.text), ["X"]);
    // Steering stays the raw `steer` command.
    c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "steering", id: "s1", message: user("steer") });
    assert.equal((await command(be, "steer")).command.id, "s1");
    await assertRebuilt(c, init, reg.chat);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("abort_invocation: scoped Stop with the original binding, a non-reducing receipt, never raw abort", () =>
  withHost(async (h) => {
    const { be, reg } = await managedSession(h);
    const { c, result: init } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat]);
    const cmd = await startTurn(c, be, reg, "t1");
    be.send(ev(reg, { type: "invocation_boundary", commandId: cmd.commandId, phase: "entered", binding: { span: "sp-1", epoch: 3 } }));
    be.send(ev(reg, { type: "text_delta", text: "partial" }));
    await c.action((e) => e.action.type === "chat/responsePart");
    const stopSeq = c.dispatch(reg.chat, { type: "chat/turnCancelled", turnId: "t1" });
    const stop = await command(be, "abort_invocation");
    assert.deepEqual(stop.command, { type: "abort_invocation", turnId: "t1", invocationCommandId: cmd.commandId, binding: { span: "sp-1", epoch: 3 } });
    be.send({ type: "command_result", commandId: stop.commandId, accepted: true });
    const receipt = await c.action((e) => e.action.type === "paratenic/invocationStopRequested");
    assert.deepEqual(receipt.action, { type: "paratenic/invocationStopRequested", turnId: "t1" });
    assert.deepEqual(receipt.origin, { clientId: "c1", clientSeq: stopSeq });
    assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "t1", "not an optimistic cancellation");
    assert.equal(be.frames.some((f) => f.type === "command" && f.command.type === "abort"), false);
    // The native settlement ends the turn.
    be.send(ev(reg, { type: "settled", cancelled: true }));
    await c.action((e) => e.action.type === "chat/turnCancelled" && e.action.turnId === "t1" && e.origin === undefined);

    // A refused Stop echoes the client's action as rejected; the turn keeps running.
    await startTurn(c, be, reg, "t2");
    const seq2 = c.dispatch(reg.chat, { type: "chat/turnCancelled", turnId: "t2" });
    const s2 = await command(be, "abort_invocation");
    be.send({ type: "command_result", commandId: s2.commandId, accepted: false, error: "not_found" });
    const rej = await c.action((e) => e.origin?.clientSeq === seq2);
    assert.equal(rej.action.type, "chat/turnCancelled");
    assert.match(rej.rejectionReason, /not_found/);
    assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "t2");
    await assertRebuilt(c, init, reg.chat);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("continuity: a new incarnation marks active managed turns discontinuous; gap only with outcome and a fresh cut", () =>
  withHost(async (h) => {
    const first = await managedSession(h, "inst-1");
    const reg = first.reg;
    const { c, result: init } = await AhpClient.init(h, ["ahp-root://", reg.session, reg.chat]);
    // Live-tail case: the span is still active at the cut, so output continues until native settlement.
    const cmd = await startTurn(c, first.be, reg, "t1");
    first.be.send(ev(reg, { type: "text_delta", text: "before " }));
    await c.action((e) => e.action.type === "chat/responsePart" && e.action.turnId === "t1");
    first.be.close();
    const second = await managedSession(h, "inst-2");
    const observe = await accept(second.be, "observe_invocation");
    assert.deepEqual(observe.command, { type: "observe_invocation", turnId: "t1", invocationCommandId: cmd.commandId });
    second.be.send(ev(reg, { type: "invocation_observation_cut", sourceEpoch: "e2", activeSpan: { commandId: cmd.commandId }, sourceIdle: false }));
    second.be.send(ev(reg, { type: "invocation_outcome", commandId: cmd.commandId, target: { turnId: "t1" }, outcome: "succeeded", delivery: { state: "delivered" } }));
    second.be.send(ev(reg, { type: "text_delta", text: "after" }));
    second.be.send({ type: "ping", id: 1 });
    await second.be.nextType("pong");
    assert.equal(ended(c, reg.chat, "t1"), undefined, "an early terminal result does not overtake the live suffix");
    second.be.send(ev(reg, { type: "settled", cancelled: false }));
    const gap = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t1");
    assert.equal(gap.action.error.errorType, "source_observation_gap");
    assert.equal(gap.action.error.message, OBSERVATION_GAP_MESSAGE);
    assert.equal(OBSERVATION_GAP_MESSAGE, "Reply continuity could not be verified after reconnection. Received output was kept; your message was not resent.");
    const t1 = h.state.chatIndex.get(reg.chat)!.turns.find((t) => t.id === "t1")!;
    assert.equal((t1.responseParts as Json[])[0]!.content, "before after", "received output is kept");
    assert.equal(t1.state, "error");

    // Bound turn, span gone at a fresh cut + terminal outcome: the gap ends it at once.
    const cmd2 = await startTurn(c, second.be, reg, "t2");
    second.be.send(ev(reg, { type: "invocation_boundary", commandId: cmd2.commandId, phase: "entered" }));
    second.be.close();
    const third = await managedSession(h, "inst-3");
    await accept(third.be, "observe_invocation");
    third.be.send(ev(reg, { type: "invocation_observation_cut", sourceEpoch: "e3", activeSpan: null }));
    third.be.send({ type: "ping", id: 1 });
    await third.be.nextType("pong");
    assert.equal(ended(c, reg.chat, "t2"), undefined, "a cut without the original terminal outcome is not enough");
    third.be.send(ev(reg, { type: "invocation_outcome", commandId: cmd2.commandId, target: { turnId: "t2" }, outcome: "succeeded", delivery: { state: "delivered" } }));
    const gap2 = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t2");
    assert.equal(gap2.action.error.errorType, "source_observation_gap");

    // Precreated turn with no observed binding: absence of a span alone is insufficient; sourceIdle:true is required.
    const cmd3 = await startTurn(c, third.be, reg, "t3");
    third.be.close();
    const fourth = await managedSession(h, "inst-4");
    await accept(fourth.be, "observe_invocation");
    fourth.be.send(ev(reg, { type: "invocation_outcome", commandId: cmd3.commandId, target: { turnId: "t3" }, outcome: "succeeded", delivery: { state: "delivered" } }));
    fourth.be.send(ev(reg, { type: "invocation_observation_cut", sourceEpoch: "e4", activeSpan: null }));
    fourth.be.send({ type: "ping", id: 1 });
    await fourth.be.nextType("pong");
    assert.equal(ended(c, reg.chat, "t3"), undefined, "missing sourceIdle defaults to false");
    fourth.be.send(ev(reg, { type: "invocation_observation_cut", sourceEpoch: "e4", activeSpan: null, sourceIdle: true }));
    const gap3 = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t3");
    assert.equal(gap3.action.error.message, OBSERVATION_GAP_MESSAGE);
    // Completed prior turns are untouched, and nothing was ever resent.
    const turns = h.state.chatIndex.get(reg.chat)!.turns.map((t) => `${String(t.id)}:${String(t.state)}`);
    assert.deepEqual(turns, ["t1:error", "t2:error", "t3:error"]);
    assert.equal(fourth.be.frames.some((f) => f.type === "command" && /prompt|follow_up/.test(f.command.type)), false);
    await assertRebuilt(c, init, reg.chat);
    assert.deepEqual(c.invalid, []);
    c.close();
    fourth.be.close();
  }));

test(`managed admission is bounded at ${MAX_UNRESOLVED_MANAGED} unresolved records per session (at and one past)`, () =>
  withHost(async (h) => {
    const { be, reg } = await managedSession(h);
    const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
    const sent: Json[] = [];
    const pump = setInterval(() => {
      for (const f of be.frames.splice(0)) if (f.type === "command") {
        be.send({ type: "command_result", commandId: f.commandId, accepted: true });
        sent.push(f);
      }
    }, 2);
    try {
      for (let i = 0; i < MAX_UNRESOLVED_MANAGED; i++) c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: `q${i}`, message: user(`m${i}`) });
      await until(() => h.state.chatIndex.get(reg.chat)!.queuedMessages.length === MAX_UNRESOLVED_MANAGED, 10_000, "all admitted");
      const seq = c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "over", message: user("one too many") });
      const rej = await c.action((e) => e.origin?.clientSeq === seq);
      assert.match(rej.rejectionReason, /too many unresolved managed invocations/);
      const tseq = c.dispatch(reg.chat, { type: "chat/turnStarted", turnId: "tx", message: user("prompt") });
      assert.match((await c.action((e) => e.origin?.clientSeq === tseq)).rejectionReason, /too many unresolved/);
      assert.equal(sent.length, MAX_UNRESOLVED_MANAGED, "nothing past the bound was sent");
      // One outcome resolves one record; then one more is admitted.
      const first = sent[0]!;
      be.send(ev(reg, { type: "invocation_outcome", commandId: first.commandId, target: { pendingId: first.command.id }, outcome: "failed", error: "dropped" }));
      await c.action((e) => e.action.type === "chat/pendingMessageRemoved" && e.action.id === first.command.id);
      const okSeq = c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "later", message: user("fits") });
      const ok = await c.action((e) => e.origin?.clientSeq === okSeq);
      assert.equal(ok.rejectionReason, undefined);
    } finally {
      clearInterval(pump);
    }
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("managed correlation is checkpointed: a restarted host still validates and applies the connector's outcomes", async () => {
  const home = tempHome();
  let reg: Json = {};
  let prompt: Json = {};
  let follow: Json = {};
  await withHost(
    async (h) => {
      const first = await managedSession(h, "inst-1");
      reg = first.reg;
      const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
      c.dispatch(reg.chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("later") });
      follow = await accept(first.be, "managed_follow_up");
      await c.action((e) => e.action.type === "chat/pendingMessageSet" && e.rejectionReason === undefined);
      prompt = await startTurn(c, first.be, reg, "t1");
      c.close();
      first.be.close();
    },
    { home },
  );
  await withHost(
    async (h) => {
      const { be } = await managedSession(h, "inst-2");
      const { c } = await AhpClient.init(h, ["ahp-root://", reg.chat]);
      assert.deepEqual(h.state.chatIndex.get(reg.chat)!.queuedMessages.map((m) => m.id), ["q1"]);
      // The precreated turn survived the restart, output-discontinuous: the new route is asked to re-observe it.
      assert.equal(h.state.chatIndex.get(reg.chat)!.activeTurn?.id, "t1");
      const observe = await command(be, "observe_invocation");
      assert.deepEqual(observe.command, { type: "observe_invocation", turnId: "t1", invocationCommandId: prompt.commandId });
      // Its outcome is still recognised (not refused); with a fresh idle cut it ends with the gap, not success.
      be.send(ev(reg, { type: "invocation_outcome", commandId: prompt.commandId, target: { turnId: "t1" }, outcome: "succeeded", delivery: { state: "delivered" } }));
      be.send(ev(reg, { type: "invocation_observation_cut", sourceEpoch: "e2", activeSpan: null, sourceIdle: true }));
      const gap = await c.action((e) => e.action.type === "chat/error" && e.action.turnId === "t1");
      assert.equal(gap.action.error.errorType, "source_observation_gap");
      assert.equal(gap.action.error.message, OBSERVATION_GAP_MESSAGE);
      // A forged target is still refused: identity validation uses the checkpointed correlation.
      be.send(ev(reg, { type: "invocation_outcome", commandId: follow.commandId, target: { pendingId: "other" }, outcome: "succeeded", delivery: { state: "delivered" } }));
      assert.match((await be.nextType("error")).message, /target does not match/);
      be.send(ev(reg, { type: "invocation_outcome", commandId: follow.commandId, target: { pendingId: "q1" }, outcome: "succeeded", delivery: { state: "delivered" } }));
      await c.action((e) => e.action.type === "chat/pendingMessageRemoved" && e.action.id === "q1");
      await until(() => h.state.sessions.get(reg.session)!.extra.managed === undefined, 3000, "ledger emptied");
      assert.equal(be.frames.some((f) => f.type === "error"), false);
      assert.deepEqual(c.invalid, []);
      c.close();
      be.close();
    },
    { home },
  );
});
