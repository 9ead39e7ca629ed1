import { test } from "node:test";
import assert from "node:assert/strict";
import { get as httpGet } from "node:http";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";

const LIMIT = 16 * 1024 * 1024;
/**
 * One GET on a fresh connection. Not `fetch`: its pooled keep-alive socket may be one the server is closing
 * (idle timeout) when the next request goes out, which fails as "fetch failed" on a busy machine.
 */
const get = (url: string, token?: string) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpGet(url, { agent: false, headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
  });

test("/providers: bearer-authenticated, bounded identities, readiness and receipt age, completeness", () =>
  withHost(async (h) => {
    assert.equal((await get(`${h.httpUrl}/providers`)).status, 401);
    const p9 = await FakeBackend.provider(h, 9, ["alpha", "beta"], { source: { serviceId: "svc", instanceId: "up-1" } });
    const empty = JSON.parse((await get(`${h.httpUrl}/providers?provider=alpha`, h.token)).text) as Json;
    assert.equal(empty.providers[0].ready, null, "no receipt yet: not proof of readiness");
    assert.equal(empty.providers[0].readyAgeMs, null);
    p9.be.send({ type: "provider_status", ready: true });
    await until(() => h.state.providers.get("alpha")!.ready === true);
    const all = JSON.parse((await get(`${h.httpUrl}/providers`, h.token)).text) as Json;
    assert.equal(all.complete, true);
    assert.equal(typeof all.observedAt, "string");
    assert.deepEqual(all.providers.map((p: Json) => p.provider), ["alpha", "beta"]);
    const a = all.providers[0];
    assert.equal(a.connected, true);
    assert.equal(a.connectionId, p9.reg.backendConnectionId);
    assert.equal(a.instanceId, "pm-1");
    assert.equal(a.protocolVersion, 9);
    assert.equal(a.ready, true);
    assert.ok(Number.isInteger(a.readyAgeMs) && a.readyAgeMs >= 0);
    assert.deepEqual(a.source, { serviceId: "svc", instanceId: "up-1" });
    const ghost = JSON.parse((await get(`${h.httpUrl}/providers?provider=ghost`, h.token)).text) as Json;
    assert.deepEqual(ghost.providers, [{ provider: "ghost", connected: false, ready: null, readyAgeMs: null }]);
    p9.be.close();
    await until(() => h.state.providers.size === 0);
    const gone = JSON.parse((await get(`${h.httpUrl}/providers?provider=alpha`, h.token)).text) as Json;
    assert.equal(gone.providers[0].connected, false, "a disconnected provider reports no readiness");
  }));

test("inspection_unavailable: once state and storage diverge, /status and /sessions refuse rather than report", () =>
  withHost(async (h) => {
    const a = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "before" });
    assert.equal((await get(`${h.httpUrl}/status`)).status, 200);
    // Persistence becomes unavailable (the real store, closed under the running host); the next
    // durable write fails and the host state is marked poisoned.
    h.state.store.close();
    const b = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "after" });
    assert.equal(b.reg.type, "registered");
    await until(() => h.state.poisoned !== undefined, 3000, "poisoned state");
    for (const [path, token] of [["/status", undefined], ["/sessions", h.token], ["/providers", h.token]] as const) {
      const r = await get(`${h.httpUrl}${path}`, token);
      assert.equal(r.status, 503, path);
      assert.deepEqual(JSON.parse(r.text), { error: "inspection_unavailable", retryable: false });
    }
    assert.equal((await get(`${h.httpUrl}/healthz`)).status, 200, "liveness is unaffected");
    a.be.close();
    b.be.close();
  }));

test("inspection_limit: a body of exactly 16 MiB is served, one byte more is refused (no partial list)", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "big", title: "t" });
    const { c } = await AhpClient.init(h, []);
    const setTitle = async (title: string) => {
      c.dispatch(reg.session, { type: "session/titleChanged", title });
      await until(() => h.state.sessions.get(reg.session)!.title.length === title.length, 5000, "title applied");
    };
    const base = await get(`${h.httpUrl}/sessions`, h.token);
    assert.equal(base.status, 200);
    const baseBytes = Buffer.byteLength(base.text);
    // Grow the title so the complete encoding is exactly the limit (ASCII: one byte per char).
    await setTitle("t".repeat(1 + LIMIT - baseBytes));
    const at = await get(`${h.httpUrl}/sessions`, h.token);
    assert.equal(at.status, 200);
    assert.equal(Buffer.byteLength(at.text), LIMIT);
    await setTitle("t".repeat(2 + LIMIT - baseBytes));
    const over = await get(`${h.httpUrl}/sessions`, h.token);
    assert.equal(over.status, 503);
    assert.deepEqual(JSON.parse(over.text), { error: "inspection_limit", retryable: false });
    // /status carries no content and is unaffected.
    assert.equal((await get(`${h.httpUrl}/status`)).status, 200);
    c.close();
    be.close();
  }));
