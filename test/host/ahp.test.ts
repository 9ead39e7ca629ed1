import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, withHost } from "./helpers.js";
import { negotiateVersion } from "../../src/protocols/host/ahp-version.js";

test("version negotiation: 0.9.x and 1.x; -32005 with supportedVersions otherwise; ping before initialize", () =>
  withHost(async (h) => {
    assert.equal(negotiateVersion(["0.9.3", "1.2.0", "2.0.0"]), "1.2.0");
    assert.equal(negotiateVersion(["0.9.1", "0.8.0"]), "0.9.1");
    assert.equal(negotiateVersion(["01.0.0", "1.0.0-rc1"]), null);
    const c = await AhpClient.open(h);
    assert.equal((await c.request("ping", {})).result, null);
    assert.equal((await c.request("listSessions", {})).error.code, -32600);
    const bad = await c.request("initialize", { channel: "ahp-root://", protocolVersions: ["0.8.0", "2.0.0"], clientId: "x" });
    assert.equal(bad.error.code, -32005);
    assert.ok(Array.isArray(bad.error.data.supportedVersions));
    c.close();
    const c2 = await AhpClient.open(h, { query: true });
    const ok = await c2.request("initialize", { channel: "ahp-root://", protocolVersions: ["0.9.0"], clientId: "y", initialSubscriptions: ["ahp-root://"] });
    assert.equal(ok.result.protocolVersion, "0.9.0");
    assert.equal(ok.result.snapshots[0].resource, "ahp-root://");
    assert.deepEqual(c2.invalid, []);
    c2.close();
    await assert.rejects(AhpClient.open(h, { token: "wrong" }), /401/);
  }));

test("subscribe/unsubscribe, one serverSeq, reconnect replay and snapshot fallback, missing channels", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "r" });
    const { c } = await AhpClient.init(h, []);
    const sub = await c.request("subscribe", { channel: reg.chat });
    assert.equal(sub.result.snapshot.resource, reg.chat);
    const from = sub.result.snapshot.fromSeq;
    be.send({ type: "event", session: reg.session, event: { type: "agent_started", turnId: "t" } });
    be.send({ type: "event", session: reg.session, event: { type: "text_delta", text: "a" } });
    be.send({ type: "event", session: reg.session, event: { type: "text_delta", text: "b" } });
    await c.action((e) => e.action.type === "chat/delta");
    const seqs = c.actions(reg.chat).map((e) => e.serverSeq);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
    assert.ok(seqs[0] > from);
    c.close();
    const r = await AhpClient.open(h);
    const rep = await r.request("reconnect", { channel: "ahp-root://", clientId: "c1", lastSeenServerSeq: from, subscriptions: [reg.chat, "ahp-session:/gone"] });
    assert.equal(rep.result.type, "replay");
    assert.deepEqual(rep.result.missing, ["ahp-session:/gone"]);
    assert.deepEqual(rep.result.actions.map((e: any) => e.serverSeq), seqs);
    // Gap older than the bounded buffer → snapshot.
    h.state.serverSeq += 20_000;
    for (let i = 0; i < 10_001; i++) h.state.publish("ahp-root://", { type: "root/activeSessionsChanged", activeSessions: 1 });
    const snap = await r.request("reconnect", { channel: "ahp-root://", clientId: "c1", lastSeenServerSeq: from, subscriptions: [reg.chat] });
    assert.equal(snap.result.type, "snapshot");
    assert.equal(snap.result.snapshots[0].resource, reg.chat);
    r.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "unsubscribe", params: { channel: reg.chat } }));
    assert.equal((await r.request("subscribe", { channel: "ahp-session:/nope" })).error.code, -32008);
    assert.equal((await r.request("bogus", {})).error.code, -32601);
    assert.deepEqual(r.invalid, []);
    r.close();
    be.close();
  }));

test("HTTP: healthz, status (no identities), sessions (bearer, sorted), single-permit inspection", () =>
  withHost(
    async (h) => {
      const a = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "zz", title: "secret title" });
      const b = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "aa" });
      assert.deepEqual(await (await fetch(`${h.httpUrl}/healthz`)).json(), { ok: true });
      const st = await fetch(`${h.httpUrl}/status`);
      const stText = await st.text();
      assert.equal(st.status, 200);
      assert.ok(!stText.includes(a.reg.session) && !stText.includes("secret title"));
      assert.equal(JSON.parse(stText).sessions, 2);
      assert.equal((await fetch(`${h.httpUrl}/sessions`)).status, 401);
      const auth = { headers: { authorization: `Bearer ${h.token}` } };
      const [s1, s2] = await Promise.all([fetch(`${h.httpUrl}/sessions`, auth), fetch(`${h.httpUrl}/sessions`, auth)]);
      const codes = [s1.status, s2.status].sort();
      assert.deepEqual(codes, [200, 503]);
      const busy = s1.status === 503 ? s1 : s2;
      assert.deepEqual(await busy.json(), { error: "inspection_busy", retryable: true });
      const okBody = (await (s1.status === 200 ? s1 : s2).json()) as { sessions: Array<{ id: string }> };
      const ids = okBody.sessions.map((x) => x.id);
      assert.deepEqual(ids, [...ids].sort());
      assert.equal(ids.length, 2);
      a.be.close();
      b.be.close();
    },
    { inspectionHoldMs: 100 },
  ));
