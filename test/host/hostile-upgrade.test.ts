/**
 * A hostile or buggy peer at the AHP WebSocket upgrade and at scale:
 *  - an upgrade without the token, with a wrong one, or to another path is refused with a JSON body naming the cause
 *    and the fix, never echoing what was presented (the Host/Origin refusals are in limits.test.ts);
 *  - one client holding 1,000 authenticated connections is served on every one, other clients are served meanwhile,
 *    and closing them releases every subscription they held.
 * Real sockets: AHP clients over the host's WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { connect } from "node:net";
import { AhpClient, tempHome, until, withHost, type Json } from "./helpers.js";
import { startHost } from "../../src/protocols/host/host.js";

const ROOT = "ahp-root://";

/** The status and JSON body the listener answers an upgrade with (101 and {} when it is accepted). */
function upgrade(url: string, headers: Record<string, string>, protocols?: string[]): Promise<{ status: number; body: Json }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols ?? [], { headers });
    ws.once("open", () => {
      ws.close();
      resolve({ status: 101, body: {} });
    });
    ws.once("unexpected-response", (_req, res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text === "" ? {} : (JSON.parse(text) as Json) }));
    });
    ws.once("error", reject);
  });
}

test("finding: an AHP upgrade without the token, or with a wrong one, got a bare 401 saying nothing of what to send", () =>
  withHost(async (h) => {
    const wrong = "not-the-token-" + "z".repeat(40);
    const missing = {
      error: "unauthorized",
      message: "the AHP WebSocket needs this daemon's token: send Authorization: Bearer <token> (the token is in the daemon's ready line and in host/token under its home), or the berth-token.<token> sub-protocol from a browser",
    };
    const refused = {
      error: "unauthorized",
      message: "the token presented is not this daemon's: send the one in its ready line or in host/token under its home (a daemon started with another home has another token)",
    };
    assert.deepEqual(await upgrade(h.ahpUrl, {}), { status: 401, body: missing });
    assert.deepEqual(await upgrade(h.ahpUrl, { authorization: "Bearer " }), { status: 401, body: missing });
    assert.deepEqual(await upgrade(h.ahpUrl, { authorization: `Basic ${Buffer.from(`u:${h.token}`).toString("base64")}` }), { status: 401, body: missing });
    for (const [url, headers, protocols] of [
      [h.ahpUrl, { authorization: `Bearer ${wrong}` }, undefined],
      [`${h.ahpUrl}?tkn=${wrong}`, {}, undefined],
      [h.ahpUrl, {}, ["berth-ahp", `berth-token.${wrong}`]],
    ] as [string, Record<string, string>, string[] | undefined][]) {
      const r = await upgrade(url, headers, protocols);
      assert.deepEqual(r, { status: 401, body: refused });
      assert.ok(!JSON.stringify(r.body).includes(wrong), "the refusal never echoes what was presented");
    }
    assert.deepEqual(await upgrade(h.ahpUrl.replace(/\/ahp$/, "/nope"), { authorization: `Bearer ${h.token}` }), {
      status: 404,
      body: { error: "not_found", message: "no WebSocket is served at this path: the AHP WebSocket is at /ahp" },
    });
    assert.equal((await upgrade(h.ahpUrl, { authorization: `Bearer ${h.token}` })).status, 101);
  }));

test("one client holding 1,000 AHP connections is served on each, others meanwhile, and closing them releases their subscriptions", { timeout: 300_000 }, () =>
  withHost(async (h) => {
    const { c: bystander } = await AhpClient.init(h, [ROOT], "bystander");
    const subsBefore = h.state.subs.get(ROOT)?.size ?? 0;
    const conns: AhpClient[] = [];
    // In waves of 50: the listener drops the oldest of more than 64 connections still upgrading (limits.test.ts).
    for (let i = 0; i < 1000; i += 50) conns.push(...(await Promise.all(Array.from({ length: 50 }, (_, k) => AhpClient.init(h, [ROOT], `many-${i + k}`)))).map((r) => r.c));
    assert.equal(h.state.subs.get(ROOT)?.size, subsBefore + 1000);
    h.state.publish(ROOT, { type: "root/activeSessionsChanged", activeSessions: 1 });
    await until(() => conns.every((c) => c.actions(ROOT).length === 1), 60_000, "the envelope on every connection");
    assert.equal((await bystander.request("ping")).result, null);
    const answers = await Promise.all(conns.map((c) => c.request("ping")));
    assert.ok(answers.every((a) => a.result === null));
    for (const c of conns) c.close();
    await until(() => (h.state.subs.get(ROOT)?.size ?? 0) === subsBefore, 60_000, "every subscription released");
    assert.ok(conns.every((c) => c.invalid.length === 0));
    assert.equal((await bystander.request("listSessions")).error, undefined);
    bystander.close();
  }));

test("an upgrade request that never completes is closed when idle, and the listener goes on serving", async () => {
  const h = await startHost({ home: tempHome(), log: () => {}, preAuthIdleMs: 300 });
  try {
    const s = connect(h.port, "127.0.0.1");
    s.on("error", () => {});
    let closed = false;
    s.on("close", () => (closed = true));
    await new Promise<void>((r) => s.once("connect", () => r()));
    // Headers begun, never ended (no blank line): the upgrade never reaches the token check.
    s.write(`GET /ahp HTTP/1.1\r\nHost: 127.0.0.1:${h.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`);
    await until(() => closed, 10_000, "the half-sent upgrade closed");
    const { c } = await AhpClient.init(h);
    assert.equal((await c.request("ping")).result, null);
    c.close();
  } finally {
    await h.close();
  }
});
