/**
 * A hostile or buggy AHP client on the WebSocket, against subscriptions (AHP "Channels & Subscriptions"):
 *  - `unsubscribe` of a channel the connection does not hold (never subscribed, unknown, not a string, as a
 *    notification or as a request) changes nothing: no subscription, no active-client entry, no memory;
 *  - a storm of `subscribe`s to one channel is harmless for a client that reads its answers, and bounded for one
 *    that does not: past the backlog bound the host reads no more of its requests until it reads (at most the bound
 *    and one answer wait), then answers every one, in order, on the same connection.
 * Real sockets: fake backends over the backend socket, AHP clients over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { MAX_CLIENT_BACKLOG, type AhpConnection } from "../../src/protocols/host/ahp.js";
import { wsText } from "../../src/transport/ws-text.js";

const ROOT = "ahp-root://";
const raw = (c: AhpClient, msg: Json) => c.ws.send(JSON.stringify({ jsonrpc: "2.0", ...msg }));

test("finding: unsubscribe of a session never subscribed removed the client's active-client entry; it changes nothing", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "unsub", toolCapabilities: { clientTools: true } });
    const session = reg.session as string;
    const { c: watcher } = await AhpClient.init(h, [session], "watcher");
    // The client is active in the session without subscribing to it, and subscribed to root only.
    const { c } = await AhpClient.init(h, [ROOT], "ca");
    c.dispatch(session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: [] } });
    await watcher.action((e) => e.action.type === "session/activeClientSet");
    const subsBefore = [...h.state.subs.keys()].sort();
    for (const channel of [session, "ahp-chat:/never", "ahp-terminal:/x", ""]) raw(c, { method: "unsubscribe", params: { channel } });
    raw(c, { method: "unsubscribe", params: { channel: 7 } });
    raw(c, { method: "unsubscribe", params: {} });
    for (let i = 0; i < 1000; i++) raw(c, { method: "unsubscribe", params: { channel: `ahp-chat:/storm-${i}` } });
    assert.equal((await c.request("unsubscribe", { channel: session })).result, null, "a request form is answered null");
    assert.equal((await c.request("ping")).result, null, "every unsubscribe was handled; the connection works");
    be.send({ type: "event", session, event: { type: "title_changed", title: "after" } });
    await watcher.action((e) => e.action.type === "session/titleChanged");
    assert.deepEqual(watcher.actions(session).filter((e) => e.action.type === "session/activeClientRemoved"), [], "the entry stayed");
    assert.deepEqual((h.state.sessions.get(session)!.activeClients as Json[]).map((x) => x.clientId), ["ca"]);
    assert.deepEqual([...h.state.subs.keys()].sort(), subsBefore, "no subscription added or removed");
    assert.ok([...(h.state.subs.get(ROOT) ?? [])].some((s) => s.clientId === "ca"), "its own root subscription held");
    // Its own subscription is released by its unsubscribe, as before.
    raw(c, { method: "unsubscribe", params: { channel: ROOT } });
    await c.request("ping");
    assert.ok(![...(h.state.subs.get(ROOT) ?? [])].some((s) => s.clientId === "ca"));
    assert.deepEqual([...c.invalid, ...watcher.invalid], []);
    c.close();
    watcher.close();
    be.close();
  }));

test("finding: a connection kept holding a removed session; an unsubscribe after it came back removed the client's new active-client entry", () =>
  withHost(async (h) => {
    const first = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "gone-held", toolCapabilities: { clientTools: true } });
    const session = first.reg.session as string;
    const chat = first.reg.chat as string;
    const { c } = await AhpClient.init(h, [ROOT, session, chat], "ca");
    const conn = [...(h.state.subs.get(ROOT) ?? [])].find((s) => s.clientId === "ca") as AhpConnection;
    const { c: other } = await AhpClient.init(h, [], "other");
    assert.equal((await other.request("disposeSession", { channel: session })).result, null);
    first.be.close();
    assert.deepEqual([...conn.channels], [ROOT], "the removed session and chat are no longer held");
    // The source comes back; the client is active in the new session without subscribing to it.
    const again = await FakeBackend.session(h, { protocolVersion: 4, sourceId: "gone-held", toolCapabilities: { clientTools: true } });
    assert.equal(again.reg.session, session);
    const { c: watcher } = await AhpClient.init(h, [session], "watcher");
    c.dispatch(session, { type: "session/activeClientSet", activeClient: { clientId: "ca", tools: [] } });
    await watcher.action((e) => e.action.type === "session/activeClientSet");
    raw(c, { method: "unsubscribe", params: { channel: session } });
    await c.request("ping");
    again.be.send({ type: "event", session, event: { type: "title_changed", title: "after" } });
    await watcher.action((e) => e.action.type === "session/titleChanged");
    assert.deepEqual(watcher.actions(session).filter((e) => e.action.type === "session/activeClientRemoved"), [], "the entry stayed");
    assert.deepEqual((h.state.sessions.get(session)!.activeClients as Json[]).map((x) => x.clientId), ["ca"]);
    for (const x of [c, other, watcher]) x.close();
    again.be.close();
  }));

/** A chat whose snapshot is about 1 MiB. */
async function bigChat(h: Parameters<Parameters<typeof withHost>[0]>[0]): Promise<{ be: FakeBackend; chat: string }> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "storm" });
  be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "q", turnId: "t1" } });
  be.send({ type: "event", session: reg.session, event: { type: "text_delta", text: "s".repeat(1024 * 1024) } });
  be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
  await until(() => h.state.chatIndex.get(reg.chat)?.turns.length === 1, 5000, "the transcript");
  return { be, chat: reg.chat as string };
}

test("a subscribe storm on one channel is harmless for a client reading its answers", () =>
  withHost(async (h) => {
    const { be, chat } = await bigChat(h);
    const { c } = await AhpClient.init(h, [], "reader");
    const answers = await Promise.all(Array.from({ length: 100 }, () => c.request("subscribe", { channel: chat }, 30_000)));
    assert.ok(answers.every((a) => a.result?.snapshot?.resource === chat), "each subscribe answered with the snapshot");
    assert.equal(h.state.subs.get(chat)?.size, 1, "one subscription, however often asked for");
    assert.equal(c.closed, false);
    assert.equal((await c.request("ping")).result, null);
    c.close();
    be.close();
  }));

test("finding: a subscribe storm from a client not reading buffered every answer (unbounded); the host holds its requests past the bound", () =>
  withHost(async (h) => {
    const { be, chat } = await bigChat(h);
    const { c } = await AhpClient.init(h, [], "storm");
    c.ws.pause();
    // 200 answers of ~1 MiB, each one the client asked for: unread, they would all wait in the host's memory.
    const n = Math.ceil((2 * MAX_CLIENT_BACKLOG) / (1024 * 1024)) + 136;
    for (let i = 0; i < n; i++) raw(c, { id: 1000 + i, method: "subscribe", params: { channel: chat } });
    raw(c, { id: 9999, method: "ping" });
    let conn: AhpConnection | undefined;
    await until(() => (conn = [...(h.state.subs.get(chat) ?? [])].find((s) => s.clientId === "storm") as AhpConnection | undefined) !== undefined, 10_000, "the first subscribe handled");
    await until(() => conn!.heldMessages > 0, 60_000, "the host holding the rest");
    // Held once past the bound; the kernel may have taken some of it since (the client's socket buffers fill late).
    const held = conn!.unsentBytes;
    assert.ok(held <= MAX_CLIENT_BACKLOG + 2 * 1024 * 1024, `at most the bound and one answer wait (${held} bytes)`);
    // Once the client reads, every request is answered, in order, on the same connection.
    const ids: number[] = [];
    c.ws.on("message", (d) => {
      const m = JSON.parse(wsText(d)) as Json;
      if (typeof m.id === "number" && m.id >= 1000) ids.push(m.id);
    });
    c.ws.resume();
    await until(() => ids.length === n + 1, 60_000, "every answer");
    assert.deepEqual(ids, [...Array.from({ length: n }, (_, i) => 1000 + i), 9999]);
    assert.equal(c.closed, false);
    assert.equal(conn!.heldMessages, 0);
    c.close();
    be.close();
  }));

test("finding: initialize naming one channel 10,000 times answered 10,000 copies of its snapshot; each channel is answered once", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "repeat" });
    const chat = reg.chat as string;
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "q", turnId: "t1" } });
    be.send({ type: "event", session: reg.session, event: { type: "text_delta", text: "x".repeat(1024) } });
    be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
    await until(() => h.state.chatIndex.get(chat)?.turns.length === 1, 5000, "the transcript");
    const c = await AhpClient.open(h);
    const subs = [...Array.from({ length: 9_998 }, () => chat), ROOT, chat];
    const r = await c.request("initialize", { channel: ROOT, protocolVersions: ["1.0.0"], clientId: "repeat", initialSubscriptions: subs }, 30_000);
    assert.deepEqual(
      (r.result.snapshots as Json[]).map((s) => s.resource),
      [chat, ROOT],
      "each channel's snapshot once, in the order first asked",
    );
    assert.equal([...(h.state.subs.get(chat) ?? [])].filter((s) => s.clientId === "repeat").length, 1);
    assert.equal((await c.request("ping")).result, null);
    c.close();
    be.close();
  }));
