/**
 * A hostile or buggy AHP client on the WebSocket, against subscriptions (AHP "Channels & Subscriptions"):
 *  - `unsubscribe` of a channel the connection does not hold (never subscribed, unknown, not a string, as a
 *    notification or as a request) changes nothing: no subscription, no active-client entry, no memory;
 * Real sockets: fake backends over the backend socket, AHP clients over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, withHost, type Json } from "./helpers.js";

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
