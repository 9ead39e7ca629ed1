/**
 * Which requested channels a `reconnect` cannot resume, in the shapes AHP's reconnect result defines (types
 * `ReconnectReplayResult` / `ReconnectSnapshotResult`, the same in every version this host negotiates):
 *  - `replay` lists them in `missing` ("URIs from `ReconnectParams.subscriptions` that the server cannot resume"):
 *    a disposed chat, a channel the host never had; each once, in the order asked;
 *  - `snapshot` has no `missing` member: a channel is reported missing by having no snapshot, so the answer holds
 *    exactly one snapshot per resumable channel asked for, in the order asked, and nothing else.
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
