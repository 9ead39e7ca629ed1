/**
 * What a restarted host reports must equal what it reported before it stopped (found by
 * families.fuzz.test.ts): chats' own `modifiedAt` (a created chat's creation time, a chat's last
 * turn end), independent of later changes to the session. Fake v6 backend over the real socket,
 * AHP clients over the real WebSocket, every message validated by ahp-schema.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, until, withHost, type Json } from "./helpers.js";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";

async function chatSummaries(h: HostHandle, session: string): Promise<Json[]> {
  const { c } = await AhpClient.init(h, [], "probe");
  const state = (await c.request("subscribe", { channel: session })).result.snapshot.state as Json;
  assert.deepEqual(c.invalid, []);
  c.close();
  return state.chats as Json[];
}

test("a restart keeps each chat's own modifiedAt (not the session's)", async () => {
  const home = tempHome();
  let session = "";
  let before: Json[] = [];
  await withHost(async (h1) => {
    const { be, reg } = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "mod-at", chatCapabilities: { create: true, dispose: true } });
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    session = reg.session as string;
    const { c } = await AhpClient.init(h1, [session, reg.chat], "mod-at");
    // A finished turn in the primary chat, and a created chat with no turns.
    be.send({ type: "event", session, event: { type: "user_message", text: "hi" } });
    be.send({ type: "event", session, event: { type: "agent_started", turnId: "T1" } });
    be.send({ type: "event", session, event: { type: "settled", cancelled: false } });
    await c.action((e) => e.action.type === "chat/turnComplete");
    const side = `${reg.chat as string}-side`;
    const pending = c.request("createChat", { channel: session, chat: side });
    const cmd = await be.next((f) => f.type === "command" && f.command.type === "create_chat", "create_chat");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await pending).error, undefined);
    before = await chatSummaries(h1, session);
    // Later changes to the session move its modifiedAt past both chats'.
    const was = h1.state.sessions.get(session)!.modifiedAt;
    await until(() => new Date().toISOString() > was, 3000, "the clock moves on");
    be.send({ type: "event", session, event: { type: "title_changed", title: "Renamed" } });
    await c.action((e) => e.action.type === "session/titleChanged");
    assert.notEqual(h1.state.sessions.get(session)!.modifiedAt, was);
    assert.deepEqual(await chatSummaries(h1, session), before, "a session change leaves its chats' modifiedAt alone");
    c.close();
    be.close();
  }, { home });
  await withHost(async (h2) => {
    assert.deepEqual(await chatSummaries(h2, session), before, "the restarted host reports each chat as it was");
  }, { home });
});

test("a restart keeps the Error status of a chat whose last turn failed", async () => {
  const home = tempHome();
  let session = "";
  let chat = "";
  const h1 = await startHost({ home, log: () => {} });
  const statuses = async (h: HostHandle): Promise<{ session: unknown; chat: unknown; summary: unknown }> => {
    const { c } = await AhpClient.init(h, [], "probe-status");
    const s = (await c.request("subscribe", { channel: session })).result.snapshot.state as Json;
    const ch = (await c.request("subscribe", { channel: chat })).result.snapshot.state as Json;
    assert.deepEqual(c.invalid, []);
    c.close();
    return { session: s.status, chat: ch.status, summary: (s.chats as Json[])[0]!.status };
  };
  let before: Json = {};
  try {
    const { be, reg } = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "last-error" });
    session = reg.session as string;
    chat = reg.chat as string;
    const { c } = await AhpClient.init(h1, [chat], "last-error");
    be.send({ type: "event", session, event: { type: "user_message", text: "hi" } });
    be.send({ type: "event", session, event: { type: "agent_started", turnId: "T1" } });
    be.send({ type: "event", session, event: { type: "settled", cancelled: false, error: "the model failed" } });
    await c.action((e) => e.action.type === "chat/error");
    before = await statuses(h1);
    assert.deepEqual(before, { session: 2, chat: 2, summary: 2 }, "Error while the host runs");
    c.close();
    be.close();
  } finally {
    await h1.close();
  }
  await withHost(async (h2) => {
    assert.deepEqual(await statuses(h2), before, "the restarted host reports the failed chat as Error too");
  }, { home });
});

test("a restart keeps the open question of a running turn listed in the session, until the turn ends", async () => {
  const home = tempHome();
  let session = "";
  let before: Json = {};
  const view = async (h: HostHandle): Promise<Json> => {
    const { c } = await AhpClient.init(h, [], "probe-input");
    const s = (await c.request("subscribe", { channel: session })).result.snapshot.state as Json;
    assert.deepEqual(c.invalid, []);
    c.close();
    return { status: s.status, inputNeeded: s.inputNeeded };
  };
  await withHost(async (h1) => {
    const { be, reg } = await FakeBackend.session(h1, { protocolVersion: 6, sourceId: "open-question", inputCapabilities: { freeform: true } });
    session = reg.session as string;
    const { c } = await AhpClient.init(h1, [session], "open-question");
    be.send({ type: "event", session, event: { type: "user_message", text: "hi" } });
    be.send({ type: "event", session, event: { type: "agent_started", turnId: "T1" } });
    be.send({ type: "event", session, event: { type: "input_requested", turnId: "T1", request: { id: "q1", message: "Which?", questions: [{ id: "a", kind: "text", message: "A?" }] } } });
    await c.action((e) => e.action.type === "session/inputNeededSet");
    c.close();
    be.close();
    await until(() => h1.state.sessions.get(session)?.route === undefined, 5000, "route loss");
    before = await view(h1);
    assert.equal((before.inputNeeded as Json[]).length, 1, "listed while the host runs");
  }, { home });
  await withHost(async (h2) => {
    assert.deepEqual(await view(h2), before, "the restarted host lists the open question of the restored turn");
    // The runtime comes back idle: the restored turn ends, and its question leaves the session with it.
    const { c } = await AhpClient.init(h2, [session], "after");
    const { be } = await FakeBackend.session(h2, { protocolVersion: 10, sourceId: "open-question", instanceId: "inst-2", inputCapabilities: { freeform: true }, runtimeIdle: true });
    await c.action((e) => e.channel === session && e.action.type === "session/inputNeededRemoved", "the question retired with the turn", 10_000);
    assert.equal(((await view(h2)).inputNeeded as Json[] | undefined)?.length ?? 0, 0);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }, { home });
});
