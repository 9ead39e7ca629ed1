/**
 * A hostile or buggy AHP client's `reconnect` (AHP lifecycle "Reconnection"; 0.9 and 1.x carry one connection-wide
 * `lastSeenServerSeq` and `subscriptions: URI[]`):
 *  - malformed params (too many URIs, per-channel cursor objects from a later AHP draft, a bad `lastSeenServerSeq`)
 *    are refused with -32602 naming the field and the fix, and the connection goes on working;
 *  - a huge list of URIs the host does not have is answered (each in `missing`, once) and subscribes nothing;
 *  - a `lastSeenServerSeq` this host never issued (past its `serverSeq`) is answered with snapshots;
 *  - the same `reconnect` again and again on one connection subscribes each channel once.
 * Real sockets: a fake backend over the backend socket, AHP clients over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, withHost, type Json } from "./helpers.js";

const ROOT = "ahp-root://";

test("finding: a malformed reconnect was refused as just \"invalid reconnect params\"; the refusal names the field and the fix", () =>
  withHost(async (h) => {
    const c = await AhpClient.open(h);
    const cases: [Json, RegExp][] = [
      [{ clientId: "c1", lastSeenServerSeq: 0, subscriptions: Array.from({ length: 10_001 }, (_, i) => `ahp-chat:/x${i}`) }, /subscriptions holds at most 10000 channel URIs/],
      [{ clientId: "c1", subscriptions: [{ channel: ROOT, lastSeenServerSeq: 4 }] }, /subscriptions\[0\] must be a channel URI.*one lastSeenServerSeq for all channels.*per-channel cursors/],
      [{ clientId: "c1", lastSeenServerSeq: -1, subscriptions: [ROOT] }, /lastSeenServerSeq must be an integer of 0 or more/],
      [{ clientId: "c1", lastSeenServerSeq: 1.5, subscriptions: [ROOT] }, /lastSeenServerSeq must be an integer of 0 or more/],
      [{ clientId: "c1", lastSeenServerSeq: "3", subscriptions: [ROOT] }, /lastSeenServerSeq must be an integer of 0 or more/],
      [{ clientId: "", lastSeenServerSeq: 0, subscriptions: [ROOT] }, /clientId must be/],
      [{ clientId: "c1", lastSeenServerSeq: 0 }, /subscriptions must be a list/],
      [{ clientId: "c1", lastSeenServerSeq: 0, subscriptions: [""] }, /subscriptions\[0\] must be a channel URI/],
    ];
    for (const [params, why] of cases) {
      const r = await c.request("reconnect", { channel: ROOT, ...params });
      assert.equal(r.error?.code, -32602, JSON.stringify(params).slice(0, 80));
      assert.match(r.error.message as string, why);
    }
    // Nothing was set by the refusals: the connection still reconnects as any client.
    const ok = await c.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: 0, subscriptions: [ROOT] });
    assert.ok(ok.result.type === "replay" || ok.result.type === "snapshot");
    assert.equal((await c.request("ping")).result, null);
    assert.deepEqual(c.invalid, []);
    c.close();
  }));

test("a reconnect naming 10,000 channels the host does not have lists each once in missing and subscribes none", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "huge-list" });
    const session = reg.session as string;
    const { c: first, result } = await AhpClient.init(h, [ROOT, session], "c1");
    first.ws.terminate();
    const unknown = Array.from({ length: 9_997 }, (_, i) => `ahp-chat:/never-${i}`);
    // 10,000 entries, the most a reconnect may name, one of them twice.
    const asked = [ROOT, ...unknown, session, unknown[0]!];
    const subsBefore = h.state.subs.size;
    const r = await AhpClient.open(h);
    const rep = (await r.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: result.serverSeq as number, subscriptions: asked })).result;
    assert.equal(rep.type, "replay");
    assert.deepEqual(rep.missing, unknown);
    assert.ok(h.state.subs.size <= subsBefore, "no subscription for a channel the host does not have");
    assert.ok([...(h.state.subs.get(session) ?? [])].some((s) => s.clientId === "c1"));
    be.send({ type: "event", session, event: { type: "title_changed", title: "live" } });
    await r.action((e) => e.channel === session && e.action.type === "session/titleChanged");
    assert.deepEqual(r.invalid, []);
    r.close();
    be.close();
  }));

test("a lastSeenServerSeq this host never issued gets snapshots; reconnect repeated on one connection subscribes once", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "cursor" });
    const session = reg.session as string;
    const c = await AhpClient.open(h);
    const ahead = (await c.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: h.state.serverSeq + 1_000_000, subscriptions: [ROOT, session] })).result;
    assert.equal(ahead.type, "snapshot", "a cursor from elsewhere is not trusted for a replay");
    assert.deepEqual((ahead.snapshots as Json[]).map((s) => s.resource), [ROOT, session]);
    const answers = await Promise.all(Array.from({ length: 50 }, () => c.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: 0, subscriptions: [ROOT, session] })));
    assert.ok(answers.every((a) => a.result?.type === "snapshot" || a.result?.type === "replay"));
    assert.equal(h.state.subs.get(session)?.size, 1, "one subscription however often reconnected");
    be.send({ type: "event", session, event: { type: "title_changed", title: "once" } });
    await c.action((e) => e.action.type === "session/titleChanged");
    assert.equal((await c.request("ping")).result, null);
    assert.equal(c.actions(session).filter((e) => e.action.type === "session/titleChanged").length, 1, "delivered once");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));
