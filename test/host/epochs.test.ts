/**
 * The epoch fence of multiplexed routes (spec "Sequenced publication and logical failure isolation"):
 * a failed epoch stays fenced with `event_rejected` until its session registers again, after which
 * its ID is an old one (`event_epoch_mismatch`); the per-provider registry of superseded epochs is
 * bounded without ever forgetting a session's latest epoch.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeBackend, withHost, type Json } from "./helpers.js";
import { EPOCH_REGISTRY_BOUND } from "../../src/protocols/host/backend-schema.js";
import type { BackendConn } from "../../src/protocols/host/backend-conn.js";

const hello = (sourceId: string, v = 10): Json => ({ protocolVersion: v, instanceId: "si", provider: "prov", sourceId });
const register = (be: FakeBackend, requestId: string, sourceId: string, v = 10) => be.send({ type: "register_session", requestId, hello: hello(sourceId, v) });
const seq = (be: FakeBackend, reg: Json, sequence: number, event: Json, id: string = reg.backendConnectionId) =>
  be.send({ type: "sequenced_event", session: reg.session, sequence, backendConnectionId: id, event });
const noTurnDelta = { type: "text_delta", text: "no turn" };

/** Registers `n` sessions (each its own source, or all `sourceId`) in one write and waits for every answer. */
async function registerMany(be: FakeBackend, prefix: string, n: number, sourceId?: string): Promise<void> {
  let out = "";
  for (let i = 0; i < n; i++) out += JSON.stringify({ type: "register_session", requestId: `${prefix}${i}`, hello: hello(sourceId ?? `${prefix}-src-${i}`) }) + "\n";
  be.raw(out);
  const last = `${prefix}${n - 1}`;
  const reply = await be.next((f) => f.requestId === last, `registration ${last}`);
  assert.equal(reply.type, "session_registered");
  for (let i = be.frames.length - 1; i >= 0; i--) if (typeof be.frames[i]!.requestId === "string" && be.frames[i]!.requestId.startsWith(prefix)) be.frames.splice(i, 1);
}

test("a failed epoch stays fenced (event_rejected) however many sessions the provider registers after it", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 10);
    register(be, "a", "src-a");
    const a = await be.next((f) => f.requestId === "a");
    seq(be, a, 1, noTurnDelta);
    const rj = await be.nextType("event_rejected");
    assert.equal(rj.backendConnectionId, a.backendConnectionId);
    // More current routes than the registry bound: the failed epoch is still the session's latest.
    await registerMany(be, "m", EPOCH_REGISTRY_BOUND);
    seq(be, a, 1, { type: "agent_started" });
    seq(be, a, 2, { type: "agent_started" });
    for (const sequence of [1, 2]) {
      const f = await be.next((x) => x.session === a.session && x.sequence === sequence, `refusal of ${sequence}`);
      assert.equal(f.type, "event_rejected", `sequence ${sequence} on the failed epoch is rejected, never ACKed nor treated as an unknown generation`);
      assert.equal(f.backendConnectionId, a.backendConnectionId);
    }
    be.close();
  }));

test("after a re-registration the failed epoch's ID is an old one: event_epoch_mismatch, the new route untouched", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 10);
    register(be, "a", "src-a");
    const a = await be.next((f) => f.requestId === "a");
    seq(be, a, 1, noTurnDelta);
    await be.nextType("event_rejected");
    register(be, "a2", "src-a");
    const a2 = await be.next((f) => f.requestId === "a2");
    assert.notEqual(a2.backendConnectionId, a.backendConnectionId);
    seq(be, a, 1, { type: "agent_started" }); // an old queued envelope of the failed epoch
    const mm = await be.next((f) => f.session === a.session && f.sequence === 1, "refusal");
    assert.equal(mm.type, "event_epoch_mismatch");
    assert.equal(mm.backendConnectionId, a.backendConnectionId, "a stale-generation refusal echoes the supplied old ID");
    seq(be, a2, 1, { type: "agent_started" });
    assert.deepEqual(await be.nextType("event_ack"), { type: "event_ack", session: a.session, sequence: 1, backendConnectionId: a2.backendConnectionId });
    be.close();
  }));

test("at most 10,000 superseded epochs are kept (at and one past the bound); forgetting one changes no answer", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 10);
    const conn = h.state.providers.get("prov") as BackendConn;
    register(be, "y", "src-y");
    const y = await be.next((f) => f.requestId === "y");
    seq(be, y, 1, noTurnDelta);
    await be.nextType("event_rejected");
    register(be, "x", "src-x");
    const x0 = await be.next((f) => f.requestId === "x");
    const oldFrame = async (sequence: number) => {
      seq(be, x0, sequence, { type: "agent_started" });
      return be.next((f) => f.session === x0.session && f.sequence === sequence, `refusal of ${sequence}`);
    };
    // x0 and EPOCH_REGISTRY_BOUND − 1 later epochs superseded: exactly at the bound, all kept.
    await registerMany(be, "r", EPOCH_REGISTRY_BOUND, "src-x");
    assert.ok(conn.epochs.get(x0.backendConnectionId), "the oldest of 10,000 superseded epochs is kept");
    assert.equal(conn.epochs.size, EPOCH_REGISTRY_BOUND + 2, "10,000 superseded epochs, and the latest of x and of y");
    assert.equal((await oldFrame(1)).type, "event_epoch_mismatch");
    // One past: the oldest superseded epoch is forgotten, and answered the same.
    await registerMany(be, "s", 1, "src-x");
    assert.equal(conn.epochs.get(x0.backendConnectionId), undefined, "the oldest is forgotten past the bound");
    assert.equal(conn.epochs.size, EPOCH_REGISTRY_BOUND + 2);
    const mm = await oldFrame(2);
    assert.equal(mm.type, "event_epoch_mismatch");
    assert.equal(mm.backendConnectionId, x0.backendConnectionId);
    // A session's latest epoch is never forgotten: y's failed epoch is still fenced.
    seq(be, y, 2, { type: "agent_started" });
    const fenced = await be.next((f) => f.session === y.session && f.sequence === 2, "y refusal");
    assert.equal(fenced.type, "event_rejected");
    be.close();
  }));

test("v10+ multiplexed: a refused unsequenced event is a semantic rejection (sequence 0) that retires only its route", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 10);
    register(be, "a", "src-a");
    register(be, "b", "src-b");
    register(be, "old", "src-old", 9); // a v9 route keeps the legacy answer
    const a = await be.next((f) => f.requestId === "a");
    const b = await be.next((f) => f.requestId === "b");
    const old = await be.next((f) => f.requestId === "old");
    be.send({ type: "event", session: a.session, event: noTurnDelta });
    const rj = await be.next((f) => f.session === a.session, "refusal");
    assert.equal(rj.type, "event_rejected");
    assert.equal(rj.sequence, 0, "an unsequenced refusal has sequence 0");
    assert.equal(rj.backendConnectionId, a.backendConnectionId, "a semantic failure names the actual logical generation");
    assert.match(rj.error, /without an active turn/);
    // The failed epoch is fenced: the host does not advance past the refused event.
    seq(be, a, 1, { type: "agent_started" });
    assert.equal((await be.next((f) => f.session === a.session && f.sequence === 1, "fenced")).type, "event_rejected");
    be.send({ type: "chat_event", session: a.session, chat: a.chat, event: { type: "agent_started" } });
    assert.equal((await be.next((f) => f.session === a.session && f.sequence === 0, "fenced unsequenced")).type, "event_rejected");
    assert.equal(h.state.sessions.get(a.session)!.route, undefined, "the route left its session");
    // Only that route: the sibling and the provider carry on.
    seq(be, b, 1, { type: "agent_started" });
    assert.deepEqual(await be.nextType("event_ack"), { type: "event_ack", session: b.session, sequence: 1, backendConnectionId: b.backendConnectionId });
    // A route registered below v10 keeps its legacy answer: an error frame, and the route stays.
    be.send({ type: "event", session: old.session, event: noTurnDelta });
    const legacy = await be.next((f) => f.session === old.session, "legacy refusal");
    assert.equal(legacy.type, "error");
    assert.equal(legacy.code, "validation_error");
    seq(be, old, 1, { type: "agent_started" });
    assert.equal((await be.next((f) => f.session === old.session && f.sequence === 1, "legacy ack")).type, "event_ack");
    // Recovery: a new registration starts at sequence 1.
    register(be, "a2", "src-a");
    const a2 = await be.next((f) => f.requestId === "a2");
    seq(be, a2, 1, { type: "agent_started" });
    assert.equal((await be.next((f) => f.session === a.session && f.sequence === 1, "ack")).type, "event_ack");
    assert.equal(be.closed, false);
    be.close();
  }));
