/**
 * Which requested channels a `reconnect` cannot resume, in the shapes AHP's reconnect result defines (types
 * `ReconnectReplayResult` / `ReconnectSnapshotResult`, the same in every version this host negotiates):
 *  - `replay` lists them in `missing` ("URIs from `ReconnectParams.subscriptions` that the server cannot resume"):
 *    a disposed chat, a channel the host never had; each once, in the order asked;
 *  - `snapshot` has no `missing` member: a channel is reported missing by having no snapshot, so the answer holds
 *    exactly one snapshot per resumable channel asked for, in the order asked, and nothing else;
 *  - a session or chat removed while the client was away and there again under its URI (a chat created again, a
 *    source registering again) is not the channel the client holds: the answer is snapshots, never a replay that
 *    the client would apply to the removed channel's state.
 * Real sockets: a fake backend over the backend socket, AHP clients over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { REPLAY_LIMIT } from "../../src/protocols/host/model.js";

const ROOT = "ahp-root://";
const lastSeq = (c: AhpClient) => c.actions().reduce((m, e) => Math.max(m, e.serverSeq as number), 0);

for (const version of ["0.9.0", "1.0.0"]) {
  test(`${version}: a reconnect reports the channels it cannot resume: in missing (replay), by no snapshot (snapshot)`, () =>
    withHost(async (h) => {
      const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: `gone-${version}`, chatCapabilities: { create: true, dispose: true } });
      const session = reg.session as string;
      const chat = reg.chat as string;
      const side = `${chat}-side`;
      const a = await AhpClient.open(h);
      const init = await a.request("initialize", { channel: ROOT, protocolVersions: [version], clientId: "c1", initialSubscriptions: [ROOT, session, chat] });
      assert.equal(init.result.protocolVersion, version);
      const created = a.request("createChat", { channel: session, chat: side });
      const cc = await be.next((f) => f.type === "command" && f.command.type === "create_chat", "create_chat");
      be.send({ type: "command_result", commandId: cc.commandId, accepted: true });
      assert.equal((await created).error, undefined);
      await a.request("subscribe", { channel: side });
      const seen = lastSeq(a);
      a.ws.terminate();

      // While the client is away its side chat is disposed, and the session changes.
      const { c: other } = await AhpClient.init(h, [], "other");
      const disposed = other.request("disposeChat", { channel: side });
      const dc = await be.next((f) => f.type === "command" && f.command.type === "dispose_chat", "dispose_chat");
      be.send({ type: "command_result", commandId: dc.commandId, accepted: true });
      assert.equal((await disposed).error, undefined);
      be.send({ type: "event", session, event: { type: "title_changed", title: "while away" } });
      await until(() => h.state.sessions.get(session)!.title === "while away");

      const never = "ahp-chat:/never-existed";
      const asked = [ROOT, session, never, chat, side, never, chat];
      const r = await AhpClient.open(h);
      const rep = (await r.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: seen, subscriptions: asked })).result;
      assert.equal(rep.type, "replay");
      assert.deepEqual(Object.keys(rep).sort(), ["actions", "missing", "type"]);
      assert.deepEqual(rep.missing, [never, side]);
      assert.ok((rep.actions as Json[]).every((e) => [ROOT, session, chat].includes(e.channel as string)), "nothing replayed for a missing channel");
      assert.ok((rep.actions as Json[]).some((e) => e.action.type === "session/titleChanged"));
      r.close();

      // The gap outgrows the ring: snapshots instead.
      for (let i = 0; i <= REPLAY_LIMIT; i++) be.send({ type: "event", session, event: { type: "title_changed", title: `t${i}` } });
      await until(() => h.state.sessions.get(session)!.title === `t${REPLAY_LIMIT}`, 60_000, "the titles");
      const s = await AhpClient.open(h);
      const snap = (await s.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: seen, subscriptions: asked })).result;
      assert.equal(snap.type, "snapshot");
      assert.deepEqual(Object.keys(snap).sort(), ["snapshots", "type"], "AHP's snapshot answer has no missing member");
      assert.deepEqual((snap.snapshots as Json[]).map((x) => x.resource), [ROOT, session, chat]);
      assert.equal((snap.snapshots as Json[])[1]!.state.title, `t${REPLAY_LIMIT}`);
      assert.deepEqual([...a.invalid, ...r.invalid, ...s.invalid, ...other.invalid], []);
      s.close();
      other.close();
      be.close();
    }));
}

/** Create chat `uri` with an initial message the fake runtime answers with `reply`; resolves once the host has it. */
async function createChatWithTurn(c: AhpClient, be: FakeBackend, session: string, uri: string, text: string, reply: string): Promise<void> {
  const pending = c.request("createChat", { channel: session, chat: uri, initialMessage: { text, origin: { kind: "user" } } });
  const cmd = await be.next((f) => f.type === "command" && f.command.type === "create_chat", "create_chat");
  be.raw(
    [
      { type: "command_result", commandId: cmd.commandId, accepted: true },
      { type: "chat_event", session, chat: uri, event: { type: "text_delta", text: reply } },
      { type: "chat_event", session, chat: uri, event: { type: "settled", cancelled: false } },
    ]
      .map((f) => JSON.stringify(f) + "\n")
      .join(""),
  );
  assert.equal((await pending).error, undefined);
}

test("a chat disposed and created again under its URI while the client was away is answered with snapshots, not a replay onto the old chat", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "reborn", chatCapabilities: { create: true, dispose: true } });
    const session = reg.session as string;
    const side = "ahp-chat:/reborn-side";
    const { c: a } = await AhpClient.init(h, [ROOT, session], "c1");
    await createChatWithTurn(a, be, session, side, "first life", "old answer");
    await until(() => h.state.chatIndex.get(side)?.turns.length === 1, 3000, "the first chat's turn");
    const sub = (await a.request("subscribe", { channel: side })).result.snapshot;
    assert.equal((sub.state.turns as Json[]).length, 1);
    const seen = Math.max(lastSeq(a), sub.fromSeq as number);
    a.ws.terminate();

    // Another client disposes the chat and creates a new one under the same URI.
    const { c: other } = await AhpClient.init(h, [], "other");
    const disposed = other.request("disposeChat", { channel: side });
    const dc = await be.next((f) => f.type === "command" && f.command.type === "dispose_chat", "dispose_chat");
    be.send({ type: "command_result", commandId: dc.commandId, accepted: true });
    assert.equal((await disposed).error, undefined);
    await createChatWithTurn(other, be, session, side, "second life", "new answer");
    await until(() => h.state.chatIndex.get(side)?.turns.length === 1, 3000, "the new chat's turn");

    const r = await AhpClient.open(h);
    const rep = (await r.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: seen, subscriptions: [ROOT, session, side] })).result;
    // A replay would be applied to the first chat's state: the client would show its old turn too.
    assert.equal(rep.type, "snapshot", "the replay cannot bring the old chat's state to the new chat's");
    const snap = (rep.snapshots as Json[]).find((x) => x.resource === side)!;
    assert.deepEqual((snap.state.turns as Json[]).map((t) => (t.message as Json).text), ["second life"]);
    // Live from the snapshot on.
    be.send({ type: "chat_event", session, chat: side, event: { type: "title_changed", title: "renamed" } });
    await r.action((e) => e.channel === session || e.channel === side, "a live envelope after the snapshot");
    assert.deepEqual([...a.invalid, ...r.invalid, ...other.invalid], []);
    r.close();
    other.close();
    be.close();
  }));

test("a session disposed and registered again by its source while the client was away is answered with snapshots", () =>
  withHost(async (h) => {
    const first = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "reborn-session" });
    const session = first.reg.session as string;
    const chat = first.reg.chat as string;
    const { c: a } = await AhpClient.init(h, [ROOT, session, chat], "c1");
    first.be.send({ type: "event", session, event: { type: "user_message", text: "old question", turnId: "T-old" } });
    first.be.send({ type: "event", session, event: { type: "settled", cancelled: false } });
    await a.action((e) => e.action.type === "chat/turnComplete" && e.action.turnId === "T-old");
    const seen = lastSeq(a);
    a.ws.terminate();

    const { c: other } = await AhpClient.init(h, [], "other");
    assert.equal((await other.request("disposeSession", { channel: session })).result, null);
    first.be.close();
    const again = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "reborn-session" });
    assert.equal(again.reg.session, session, "premise: the source's session comes back under its URI");
    assert.equal(again.reg.chat, chat);

    const r = await AhpClient.open(h);
    const rep = (await r.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: seen, subscriptions: [ROOT, session, chat] })).result;
    assert.equal(rep.type, "snapshot", "a replay would leave the disposed session's turn in the client's chat");
    const held = (rep.snapshots as Json[]).find((x) => x.resource === chat)!;
    assert.deepEqual(held.state.turns, []);
    assert.deepEqual([...a.invalid, ...r.invalid, ...other.invalid], []);
    r.close();
    other.close();
    again.be.close();
  }));
