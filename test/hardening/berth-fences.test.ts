/**
 * The Berth backend answers the host's event refusals (`event_rejected`, `event_resync_required`,
 * `event_epoch_mismatch`, `event_epoch_required`) by registering the session again only when the refusal concerns
 * the session's current registration (spec "Sequenced publication and logical failure isolation": an old epoch's
 * reply or an unattributable refusal is no authority to retire a newer epoch), and never starts a second
 * registration for a session while one is in flight. "No registration" is shown with an ordered marker: a ping
 * round trip after the refusals, then every registration the backend began has been written, then a second round
 * trip; whatever the backend wrote for the refusals reached the fake host before that last ping.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { until, type Json } from "../host/helpers.js";
import { withBackend, type FakeHost, type Rig } from "./berth-fake-host.js";

/** Every frame the backend wrote after `from`, once everything it began for the frames sent so far has arrived. */
async function settledAfter(w: Rig, from: number): Promise<Json[]> {
  await w.rt.sync(); // every frame sent before has been handled
  await w.rt.registrationsSent(); // the registrations they began are written
  await w.rt.sync(); // and have reached the fake host (one ordered socket)
  return w.host.frames.slice(from);
}

/** The registrations the backend wrote since `from` (it registers the test's one session only). */
const since = (host: FakeHost, from: number): Json[] => host.frames.slice(from).filter((f) => f.type === "register_session");

/** Answer the newest registration with a new epoch `logical`; resolves once a command on that epoch is routed. */
async function answerRegistration(w: Rig, uri: string, chat: string, logical: string, from: number): Promise<void> {
  const reg = since(w.host, from).at(-1)!;
  w.host.send({ type: "session_registered", requestId: reg.requestId, session: uri, backendConnectionId: logical, chat });
  w.host.send({ type: "command", commandId: `probe-${logical}`, backendInstanceId: w.rt.instanceId, session: uri, backendConnectionId: logical, command: { type: "abort" } });
  await until(() => w.results(`probe-${logical}`).length > 0, 10_000, `registration ${logical} handled`);
  assert.equal(w.results(`probe-${logical}`)[0]!.accepted, true, `epoch ${logical} is current`);
}

const refusal = (type: string, uri: string, logical: string | undefined): Json => ({
  type,
  session: uri,
  sequence: 3,
  ...(type === "event_resync_required" ? { expectedSequence: 1 } : {}),
  ...(logical !== undefined ? { backendConnectionId: logical } : {}),
  error: "refused for the test",
});

test("a refusal naming a replaced epoch, or none, starts no registration and keeps the current epoch", () =>
  withBackend(async (w) => {
    const s = await w.session("stale");
    // Move the session to a second epoch: a refusal for the first (current) one re-registers it.
    let from = w.host.frames.length;
    w.host.send(refusal("event_resync_required", s.uri, s.logical));
    await until(() => since(w.host, from).length > 0, 10_000, "re-registration after the current epoch's refusal");
    await answerRegistration(w, s.uri, s.chat, "L-stale-2", from);

    // Late answers about the first epoch, and refusals that name no epoch at all.
    from = w.host.frames.length;
    for (const type of ["event_rejected", "event_resync_required", "event_epoch_mismatch"]) w.host.send(refusal(type, s.uri, s.logical));
    for (const type of ["event_rejected", "event_epoch_required"]) w.host.send(refusal(type, s.uri, undefined));
    const after = await settledAfter(w, from);
    assert.deepEqual(after.filter((f) => f.type === "register_session"), [], "no registration for a stale or unattributable refusal");
    // The second epoch still routes commands: it was not thrown away.
    w.host.send({ type: "command", commandId: "still-current", backendInstanceId: w.rt.instanceId, session: s.uri, backendConnectionId: "L-stale-2", command: { type: "abort" } });
    await until(() => w.results("still-current").length > 0, 10_000, "the command on the current epoch answered");
    assert.equal(w.results("still-current")[0]!.accepted, true);
    assert.equal(w.logs.filter((m) => /ignored/.test(m)).length, 5, `each ignored refusal is logged: ${w.logs.join(" | ")}`);
  }));

test("a refusal naming the current epoch starts exactly one registration", () =>
  withBackend(async (w) => {
    const s = await w.session("cur");
    const from = w.host.frames.length;
    w.host.send(refusal("event_rejected", s.uri, s.logical));
    const after = await settledAfter(w, from);
    const regs = after.filter((f) => f.type === "register_session");
    assert.equal(regs.length, 1, "one registration");
    await answerRegistration(w, s.uri, s.chat, "L-cur-2", from);
  }));

test("two refusals in a row for the current epoch start one registration, not two", () =>
  withBackend(async (w) => {
    const s = await w.session("two");
    const from = w.host.frames.length;
    // One write: both are handled before the first registration has even been sent (it reads history first).
    w.host.raw([refusal("event_resync_required", s.uri, s.logical), refusal("event_rejected", s.uri, s.logical)].map((f) => JSON.stringify(f)).join("\n"));
    let after = await settledAfter(w, from);
    assert.equal(after.filter((f) => f.type === "register_session").length, 1, "one registration for both refusals");
    // A repeated provider registration (which registers every session) leaves the one in flight alone.
    w.host.send({ type: "provider_registered", protocolVersion: 9 });
    after = await settledAfter(w, from);
    assert.equal(after.filter((f) => f.type === "register_session").length, 1, "no second registration beside the one in flight");
    // A refusal that names no epoch while that registration is in flight adds none either.
    w.host.send(refusal("event_epoch_required", s.uri, undefined));
    after = await settledAfter(w, from);
    assert.equal(after.filter((f) => f.type === "register_session").length, 1, "still one registration");
    await answerRegistration(w, s.uri, s.chat, "L-two-2", from);
    // Once answered, the next refusal of the (new) current epoch registers again.
    w.host.send(refusal("event_rejected", s.uri, "L-two-2"));
    after = await settledAfter(w, from);
    assert.equal(after.filter((f) => f.type === "register_session").length, 2, "a registration for the new epoch's refusal");
  }));
