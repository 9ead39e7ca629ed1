/**
 * A pending message ID names one message of its chat (AHP `chat/pendingMessageSet`, kinds `queued` and
 * `steering`), so a client that resends one after a dropped connection never gets it run twice:
 *  - an ID the chat already consumed (its turn started, or the runtime injected it) or removed is refused,
 *    naming why and the fix, and nothing goes to the backend; this holds across a host restart;
 *  - a resend of an ID still pending, with the same text, is idempotent: echoed with the resender's origin,
 *    nothing sent to the backend again (also while the first is still on its way);
 *  - a fresh ID is accepted as before.
 * The backend here is a loopback fake speaking the host protocol, so every command the host sends is seen.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { user } from "./berth-rig.js";
import { RETIRED_PENDING_LIMIT } from "../../src/protocols/host/model.js";

const consumed = (id: string) => `pending message "${id}" was already consumed or removed in this chat (a resent message is not run twice); send a new id for a new message`;

function lastSeq(c: AhpClient): number {
  return c.actions().reduce((m, e) => Math.max(m, e.serverSeq as number), 0);
}

/** Set a pending message and answer the backend's command with `accepted`; resolves with its echo. */
async function setPending(c: AhpClient, be: FakeBackend, chat: string, kind: "queued" | "steering", id: string, text: string): Promise<Json> {
  const seq = c.dispatch(chat, { type: "chat/pendingMessageSet", kind, id, message: user(text) });
  const cmd = await be.next((f) => f.type === "command" && f.command.type === (kind === "queued" ? "follow_up" : "steer") && f.command.id === id, `${kind} ${id}`);
  be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
  return c.action((e) => e.action.type === "chat/pendingMessageSet" && e.origin?.clientSeq === seq, `echo of ${id}`);
}

/** The echo of the client's action `seq` (accepted or refused). */
const echoOf = (c: AhpClient, seq: number, what: string) => c.action((e) => e.origin?.clientSeq === seq && e.origin?.clientId === "c1", what);

const commands = (be: FakeBackend, type: string) => be.frames.filter((f) => f.type === "command" && f.command.type === type);

test("a pending message ID consumed or removed is refused when resent after a reconnect; the backend is not asked again", async () => {
  const home = tempHome();
  let chat = "";
  await withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "resend" });
    chat = reg.chat as string;
    const { c: a } = await AhpClient.init(h, [chat], "c1");
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "first", turnId: "T1" } });
    await a.action((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "T1");
    await setPending(a, be, chat, "queued", "q1", "after that");
    await setPending(a, be, chat, "steering", "s1", "focus");
    // The runtime injects the steering message into T1, then runs the queued one as T2.
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "focus", pendingId: "s1" } });
    be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "after that", turnId: "T2", pendingId: "q1" } });
    await a.action((e) => e.action.type === "chat/turnStarted" && e.action.queuedMessageId === "q1");
    const seqA = lastSeq(a);
    a.ws.terminate();

    // The client comes back, unsure whether its messages arrived, and sends them again.
    const c = await AhpClient.open(h);
    c.clientSeq = a.clientSeq;
    const rep = (await c.request("reconnect", { channel: "ahp-root://", clientId: "c1", lastSeenServerSeq: seqA, subscriptions: [chat] })).result;
    assert.equal(rep.type, "replay");
    const q = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("after that") });
    const s = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "steering", id: "s1", message: user("focus") });
    // The same ID under the other kind names the same message: refused too.
    const x = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "steering", id: "q1", message: user("after that") });
    assert.equal((await echoOf(c, q, "the resent queued message")).rejectionReason, consumed("q1"));
    assert.equal((await echoOf(c, s, "the resent steering message")).rejectionReason, consumed("s1"));
    assert.equal((await echoOf(c, x, "q1 as steering")).rejectionReason, consumed("q1"));
    // A new ID still goes through; commands go out in order, so no resend went before it.
    await setPending(c, be, chat, "queued", "q2", "one more");
    assert.deepEqual(commands(be, "follow_up").map((f) => f.command.id), [], "no follow_up other than those answered");
    assert.deepEqual(commands(be, "steer"), []);
    const held = h.state.chatIndex.get(chat)!;
    assert.deepEqual(held.queuedMessages.map((m) => m.id), ["q2"]);
    assert.equal(held.steeringMessage, undefined);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }, { home });

  // After a restart the chat still knows which IDs it consumed.
  await withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "resend" });
    assert.equal(reg.chat, chat);
    const { c } = await AhpClient.init(h, [chat], "c1");
    const q = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("after that") });
    assert.equal((await echoOf(c, q, "q1 after the restart")).rejectionReason, consumed("q1"));
    const s = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "steering", id: "s1", message: user("focus") });
    assert.equal((await echoOf(c, s, "s1 after the restart")).rejectionReason, consumed("s1"));
    await setPending(c, be, chat, "steering", "s2", "new steer");
    assert.deepEqual(commands(be, "follow_up"), []);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }, { home });
});

test("a resend of a pending message still pending is idempotent: echoed to the resender, not sent to the backend again", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "idem" });
    const chat = reg.chat as string;
    const { c } = await AhpClient.init(h, [chat], "c1");
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "first", turnId: "T1" } });
    await c.action((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "T1");

    // Resent while the first is still on its way to the backend: both get the backend's answer, one command.
    const q1 = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("after that") });
    const q1b = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("after that") });
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "follow_up", "follow_up q1");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await echoOf(c, q1, "q1")).rejectionReason, undefined);
    assert.equal((await echoOf(c, q1b, "q1 resent in flight")).rejectionReason, undefined);

    // Resent once accepted: echoed again, nothing sent.
    const q1c = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("after that") });
    assert.equal((await echoOf(c, q1c, "q1 resent while pending")).rejectionReason, undefined);
    await setPending(c, be, chat, "steering", "s1", "focus");
    const s1b = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "steering", id: "s1", message: user("focus") });
    assert.equal((await echoOf(c, s1b, "s1 resent while pending")).rejectionReason, undefined);
    // Other text under a pending ID: this backend cannot replace a message it was given.
    const edit = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("something else") });
    assert.equal(
      (await echoOf(c, edit, "q1 with other text")).rejectionReason,
      'pending message "q1" is already pending with other text, and this backend cannot replace it; send a new id for a new message',
    );
    await setPending(c, be, chat, "queued", "q2", "fresh");
    assert.deepEqual(commands(be, "follow_up"), [], "one follow_up per message");
    assert.deepEqual(commands(be, "steer"), [], "one steer per message");
    const held = h.state.chatIndex.get(chat)!;
    assert.deepEqual(held.queuedMessages.map((m) => [m.id, m.message.text]), [["q1", "after that"], ["q2", "fresh"]]);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test(`a chat remembers its newest ${RETIRED_PENDING_LIMIT} consumed pending message IDs (at and one past the bound)`, () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "bound" });
    const chat = reg.chat as string;
    const { c } = await AhpClient.init(h, [chat], "c1");
    const n = RETIRED_PENDING_LIMIT + 1;
    let last = 0;
    for (let i = 0; i < n; i++) last = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: `q${i}`, message: user(`m${i}`) });
    for (let i = 0; i < n; i++) {
      const cmd = await be.next((f) => f.type === "command" && f.command.type === "follow_up", `follow_up ${i}`);
      be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    }
    await echoOf(c, last, "the last queued echo");
    // The runtime runs each as a turn of its own, oldest first.
    for (let i = 0; i < n; i++) {
      be.send({ type: "event", session: reg.session, event: { type: "user_message", text: `m${i}`, turnId: `T${i}`, pendingId: `q${i}` } });
      be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
    }
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === `T${n - 1}`, "the last turn", 30_000);
    assert.deepEqual(h.state.chatIndex.get(chat)!.queuedMessages, []);
    // q1 is the oldest remembered: refused. q0 fell out of the bound: it is a new message again.
    const kept = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("m1") });
    assert.equal((await echoOf(c, kept, "q1")).rejectionReason, consumed("q1"));
    const old = await setPending(c, be, chat, "queued", "q0", "m0");
    assert.equal(old.rejectionReason, undefined);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("on a managed route a consumed queued message ID is refused when resent: no second managed_follow_up", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 10, sourceId: "managed-resend", chatCapabilities: { managedInvocations: true } });
    assert.equal(reg.protocolVersion, 10, JSON.stringify(reg));
    const chat = reg.chat as string;
    const { c } = await AhpClient.init(h, [chat], "c1");
    const q = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("later") });
    const v1 = await be.next((f) => f.type === "command" && f.command.type === "managed_follow_up", "managed_follow_up q1");
    be.send({ type: "command_result", commandId: v1.commandId, accepted: true });
    assert.equal((await echoOf(c, q, "q1")).rejectionReason, undefined);
    be.send({ type: "event", session: reg.session, event: { type: "invocation_user_message", commandId: v1.commandId, text: "later", turnId: "M1" } });
    await c.action((e) => e.action.type === "chat/turnStarted" && e.action.queuedMessageId === "q1");
    const again = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("later") });
    assert.equal((await echoOf(c, again, "q1 resent")).rejectionReason, consumed("q1"));
    // The next command the backend sees is the new message's, not a second version of q1.
    c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q2", message: user("next") });
    const next = await be.next((f) => f.type === "command" && f.command.type === "managed_follow_up", "managed_follow_up q2");
    assert.equal(next.command.id, "q2");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("a queued message whose follow_up was left indeterminate by a lost backend connection, then run by the runtime, is refused when resent", () =>
  withHost(async (h) => {
    const first = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "lost-ack" });
    const chat = first.reg.chat as string;
    const session = first.reg.session as string;
    const { c } = await AhpClient.init(h, [chat], "c1");
    const q = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("after that") });
    await first.be.next((f) => f.type === "command" && f.command.type === "follow_up", "follow_up q1");
    // The runtime got it, but the connection drops before its answer reaches the host.
    first.be.close();
    assert.equal((await echoOf(c, q, "q1")).rejectionReason, "backend outcome indeterminate");
    // The runtime comes back and runs the message it had queued.
    const { be } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "lost-ack" });
    be.send({ type: "event", session, event: { type: "user_message", text: "after that", turnId: "T1", pendingId: "q1" } });
    be.send({ type: "event", session, event: { type: "settled", cancelled: false } });
    await c.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "T1");
    // The client, told the outcome was unknown, sends it again: it already ran.
    const again = c.dispatch(chat, { type: "chat/pendingMessageSet", kind: "queued", id: "q1", message: user("after that") });
    assert.equal((await echoOf(c, again, "q1 resent")).rejectionReason, consumed("q1"));
    await setPending(c, be, chat, "queued", "q2", "next");
    assert.deepEqual(commands(be, "follow_up"), []);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));
