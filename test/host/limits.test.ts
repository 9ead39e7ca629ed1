/**
 * Issue 18, daemon/host resource and listener findings: DNS rebinding (Host/Origin), pre-auth
 * connection exhaustion, paused AHP clients, huge turns and whole-transcript persistence. Each
 * test is named after its finding.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { request, type IncomingHttpHeaders } from "node:http";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import Database from "better-sqlite3";
import WebSocket from "ws";
import { AhpClient, FakeBackend, tempHome, until, withHost, type Json } from "./helpers.js";
import { startHost, MAX_PREAUTH_CONNECTIONS } from "../../src/protocols/host/host.js";
import { BEHIND_REASON, MAX_CLIENT_BACKLOG } from "../../src/protocols/host/ahp.js";
import { MAX_TURN_TEXT, TRUNCATION_NOTICE } from "../../src/protocols/host/backend-events.js";

function get(port: number, path: string, headers: Record<string, string>): Promise<{ status: number; body: string; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, headers, setHost: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on("error", reject);
    req.end();
  });
}

function upgrade(port: number, headers: Record<string, string>, token: string): Promise<number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ahp`, { headers: { authorization: `Bearer ${token}`, ...headers } });
    ws.once("open", () => {
      ws.close();
      resolve(101);
    });
    ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
    ws.once("error", () => resolve(0));
  });
}

test("finding: /status answered any Host (DNS rebinding); every route and the upgrade check Host and Origin", () =>
  withHost(async (h) => {
    const port = h.port;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`]) {
      assert.equal((await get(port, "/status", { host })).status, 200, host);
    }
    for (const path of ["/status", "/healthz", "/sessions", "/providers", "/nope"]) {
      const r = await get(port, path, { host: `rebind.example:${port}` });
      assert.equal(r.status, 403, path);
      assert.equal(JSON.parse(r.body).error, "forbidden_host");
      assert.ok(!r.body.includes("rebind.example"), "the refusal does not echo the header");
    }
    assert.equal((await get(port, "/status", { host: `127.0.0.1:${port + 1}` })).status, 403, "another port");
    assert.equal((await get(port, "/status", { host: "127.0.0.1" })).status, 403, "no port");
    assert.ok([400, 403].includes((await get(port, "/status", {})).status), "no Host at all (Node itself answers 400)");
    const origin = (o: string) => get(port, "/status", { host: `127.0.0.1:${port}`, origin: o });
    assert.equal((await origin(`http://127.0.0.1:${port}`)).status, 200);
    assert.equal((await origin(`http://localhost:${port}`)).status, 200);
    for (const o of ["http://evil.example", "null", `https://127.0.0.1:${port}`, `http://127.0.0.1:${port + 1}`]) {
      const r = await origin(o);
      assert.equal(r.status, 403, o);
      assert.equal(JSON.parse(r.body).error, "forbidden_origin");
    }
    assert.equal(await upgrade(port, {}, h.token), 101);
    assert.equal(await upgrade(port, { host: `rebind.example:${port}` }, h.token), 403);
    assert.equal(await upgrade(port, { origin: "http://evil.example" }, h.token), 403);
    assert.equal(await upgrade(port, { origin: `http://localhost:${port}` }, h.token), 101);
  }));

test("finding: 562 idle unauthenticated TCP connections exhausted descriptors; pre-auth connections are capped and time out", async () => {
  // A long idle timeout here, so only the cap can drop a connection in the first part.
  const h = await startHost({ home: tempHome(), log: () => {}, preAuthIdleMs: 120_000 });
  const idle: Socket[] = [];
  const closed = new Set<number>();
  const open = async (port = h.port) => {
    const s = connect(port, "127.0.0.1");
    const i = idle.push(s) - 1;
    s.on("error", () => {});
    s.on("close", () => closed.add(i));
    await new Promise<void>((r) => s.once("connect", () => r()));
  };
  try {
    // Exactly at the cap nobody is dropped; one past it, exactly the oldest is.
    for (let i = 0; i < MAX_PREAUTH_CONNECTIONS; i++) await open();
    await open();
    await until(() => closed.has(0), 5000, "the oldest pre-auth connection dropped");
    // idle[1] is still served (an HTTP request on it), so the listener processed the eviction and
    // nothing else was dropped.
    const answer = await new Promise<string>((resolve) => {
      let b = "";
      idle[1]!.on("data", (d: Buffer) => {
        b += d.toString();
        if (b.includes("\r\n\r\n") && b.includes("}")) resolve(b);
      });
      idle[1]!.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${h.port}\r\n\r\n`);
    });
    assert.match(answer, /^HTTP\/1\.1 200/);
    assert.deepEqual([...closed], [0], "only the oldest was dropped");
    for (let i = 0; i < 40; i++) await open();
    await until(() => closed.size >= 41, 5000, "the oldest dropped past the cap");
    assert.equal((await get(h.port, "/healthz", { host: `127.0.0.1:${h.port}` })).status, 200);
    const { c: first } = await AhpClient.init(h);
    assert.equal((await first.request("ping")).result, null, "an AHP client still gets in");
    first.close();
    // Idle pre-auth connections time out; an authenticated AHP connection does not.
    const h2 = await startHost({ home: tempHome(), log: () => {}, preAuthIdleMs: 200 });
    try {
      const { c } = await AhpClient.init(h2);
      const before = idle.length;
      for (let i = 0; i < 5; i++) await open(h2.port);
      await until(() => [...Array(5).keys()].every((k) => closed.has(before + k)), 10_000, "idle pre-auth connections timed out");
      assert.equal((await c.request("ping")).result, null, "the authenticated client outlived the idle timeout");
      c.close();
    } finally {
      await h2.close();
    }
  } finally {
    for (const s of idle) s.destroy();
    await h.close();
  }
});

test("finding: a paused AHP client was never disconnected (+379 MB); it is dropped past the backlog bound and can reconnect", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "paused" });
    const { c: slow } = await AhpClient.init(h, [reg.session]);
    const { c: writer } = await AhpClient.init(h, [], "w");
    slow.ws.pause();
    const big = "y".repeat(1024 * 1024);
    const n = Math.ceil((MAX_CLIENT_BACKLOG * 2) / big.length);
    for (let i = 0; i < n; i++) writer.dispatch(reg.session, { type: "session/titleChanged", title: big, bad: 1 });
    await until(() => ![...(h.state.subs.get(reg.session) ?? [])].some((s) => s.clientId === "c1"), 30_000, "the paused client dropped");
    slow.ws.resume();
    await until(() => slow.closed, 10_000, "the paused client sees the close");
    assert.equal(slow.closeCode, 1008, "a close frame, after the complete frames its socket held");
    assert.equal(slow.closeReason, BEHIND_REASON);
    // The writer (reading normally) is unaffected and a reconnect works.
    assert.equal((await writer.request("ping")).result, null);
    const again = await AhpClient.open(h);
    const r = await again.request("reconnect", { clientId: "c1", lastSeenServerSeq: 0, subscriptions: [reg.session] });
    assert.ok(r.result.type === "snapshot" || r.result.type === "replay");
    again.close();
    writer.close();
    be.close();
  }));

test("a client reading a snapshot larger than the backlog bound is not taken for a paused one", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "big-snapshot" });
    const mib = "s".repeat(1024 * 1024);
    const turns = MAX_CLIENT_BACKLOG / mib.length + 16; // a transcript well past the bound
    for (let i = 0; i < turns; i++) {
      be.send({ type: "event", session: reg.session, event: { type: "user_message", text: `q${i}`, turnId: `t${i}` } });
      be.send({ type: "event", session: reg.session, event: { type: "text_delta", text: mib } });
      be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
    }
    await until(() => h.state.chatIndex.get(reg.chat)!.turns.length === turns, 30_000, "the transcript");
    const { c } = await AhpClient.init(h, []);
    // Ask for the snapshot and stop reading before it arrives: the answer alone is over the bound.
    const sub = c.request("subscribe", { channel: reg.chat }, 30_000);
    c.ws.pause();
    await until(() => [...(h.state.subs.get(reg.chat) ?? [])].length === 1, 5000, "subscribed");
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "after", turnId: "after" } });
    await until(() => h.state.chatIndex.get(reg.chat)!.activeTurn?.id === "after", 5000, "a later envelope fanned out");
    c.ws.resume();
    assert.equal((await sub).result.snapshot.state.turns.length, turns);
    await c.action((e) => e.action.type === "chat/turnStarted" && e.action.turnId === "after", "the later envelope", 10_000);
    assert.equal(c.closed, false);
    c.close();
    be.close();
  }));

test("finding: one 64 MiB backend turn grew memory unboundedly; streamed text per turn is bounded and the cut is announced", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "huge" });
    const { c } = await AhpClient.init(h, [reg.chat]);
    be.send({ type: "event", session: reg.session, event: { type: "user_message", text: "go", turnId: "T" } });
    const chunk = "z".repeat(1024 * 1024 - 1) + "é"; // 1 MiB of UTF-16 units
    const chunks = MAX_TURN_TEXT / chunk.length + 2;
    for (let i = 0; i < chunks; i++) be.send({ type: "event", session: reg.session, event: { type: "text_delta", text: chunk } });
    be.send({ type: "event", session: reg.session, event: { type: "thinking_delta", text: "more" } });
    be.send({ type: "event", session: reg.session, event: { type: "settled", cancelled: false } });
    await c.action((e) => e.action.type === "chat/turnComplete", "turn end", 30_000);
    assert.equal(be.frames.filter((f) => f.type === "error").length, 0, "deltas past the bound are accepted, not refused");
    const turn = h.state.chatIndex.get(reg.chat)!.turns[0]!;
    const parts = turn.responseParts as Json[];
    const kept = parts.filter((p) => p.content !== TRUNCATION_NOTICE).reduce((n, p) => n + (p.content as string).length, 0);
    assert.equal(kept, MAX_TURN_TEXT, "exactly the bound is kept");
    assert.equal(parts.filter((p) => p.content === TRUNCATION_NOTICE).length, 1, "the cut is announced once");
    c.close();
    be.close();
  }));

test("finding: the whole transcript was re-serialized on every persist; turns are appended as rows and survive a restart", async () => {
  const home = tempHome();
  let session = "";
  let chat = "";
  const turns = 30;
  await withHost(
    async (h) => {
      const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "rows" });
      session = reg.session;
      chat = reg.chat;
      for (let i = 0; i < turns; i++) {
        be.send({ type: "event", session, event: { type: "user_message", text: `q${i}`, turnId: `t${i}` } });
        be.send({ type: "event", session, event: { type: "text_delta", text: `a${i} `.repeat(1000) } });
        be.send({ type: "event", session, event: { type: "settled", cancelled: false } });
      }
      await until(() => h.state.chatIndex.get(chat)!.turns.length === turns, 10_000, "all turns");
      h.state.store.flush();
      const db = new Database(join(h.stateDir, "host.db"), { readonly: true });
      const rows = db.prepare(`SELECT pos, turn FROM chat_turns WHERE chat_uri = ? ORDER BY pos`).all(chat) as Array<{ pos: number; turn: string }>;
      const legacy = (db.prepare(`SELECT turns FROM chats WHERE uri = ?`).get(chat) as { turns: string }).turns;
      db.close();
      assert.deepEqual(rows.map((r) => r.pos), Array.from({ length: turns }, (_, i) => i), "one row per turn");
      assert.equal(JSON.parse(rows[7]!.turn).id, "t7");
      assert.equal(legacy, "[]", "no whole-transcript copy");
      be.close();
    },
    { home },
  );
  // A transcript stored the old way (one JSON array in chats.turns) is read and migrated.
  const db = new Database(join(home, "host", "host.db"));
  const old = db.prepare(`SELECT turn FROM chat_turns WHERE chat_uri = ? ORDER BY pos`).all(chat) as Array<{ turn: string }>;
  db.prepare(`UPDATE chats SET turns = ? WHERE uri = ?`).run(JSON.stringify(old.map((r) => JSON.parse(r.turn))), chat);
  db.prepare(`DELETE FROM chat_turns WHERE chat_uri = ?`).run(chat);
  db.close();
  await withHost(
    async (h) => {
      const { c } = await AhpClient.init(h, [chat]);
      const snap = (await c.request("subscribe", { channel: chat })).result.snapshot;
      assert.deepEqual(snap.state.turns.map((t: Json) => t.id), Array.from({ length: turns }, (_, i) => `t${i}`));
      h.state.store.flush();
      const db2 = new Database(join(h.stateDir, "host.db"), { readonly: true });
      assert.equal((db2.prepare(`SELECT count(*) AS n FROM chat_turns WHERE chat_uri = ?`).get(chat) as { n: number }).n, turns);
      assert.equal((db2.prepare(`SELECT turns FROM chats WHERE uri = ?`).get(chat) as { turns: string }).turns, "[]");
      db2.close();
      c.close();
    },
    { home },
  );
});
