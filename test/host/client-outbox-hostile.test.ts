/**
 * The client outbox (client-outbox.ts) against hostile and slow AHP clients: one that reads slowly but steadily is
 * served in full and never dropped under its bound; one that ends its side of the connection (TCP FIN, no close frame)
 * while bytes wait for it, or drops its socket in the middle of a large frame, is let go with everything it held; and
 * many clients subscribing and unsubscribing while a large turn streams leave the daemon-wide total at 0 once they
 * are all gone. Real sockets: a fake backend over the backend socket, AHP clients over the WebSocket; the total is
 * read from the host's own budget (`h.clientBudget`, test-only: nothing new on the wire).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Socket } from "node:net";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const rawOf = (c: AhpClient): Socket => (c.ws as unknown as { _socket: Socket })._socket;
const TITLE = "t".repeat(64 * 1024);
const subscribers = (h: HostHandle, channel: string) => [...(h.state.subs.get(channel) ?? [])].map((s) => s.clientId).sort();
/** Published to the session's subscribers: a client's refused title, echoed with its rejection (64 KiB each). */
const refusedTitle = (w: AhpClient, session: string) => w.dispatch(session, { type: "session/titleChanged", title: TITLE, bad: 1 });

test("finding: a client that ended its side (FIN, no close frame) without reading kept its subscription and held bytes for ever", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "half-closed" });
    const session = reg.session as string;
    const { c } = await AhpClient.init(h, [session], "half");
    const { c: w } = await AhpClient.init(h, [session], "watcher");
    c.ws.pause();
    const held = () => [...h.clientBudget.outboxes].map((o) => o.held);
    while (!held().some((n) => n > 1024 * 1024)) {
      for (let i = 0; i < 8; i++) refusedTitle(w, session);
      await w.request("ping");
    }
    rawOf(c).end(); // the peer's FIN: it sends nothing more, not even a close frame, and reads nothing
    await until(() => h.clientBudget.outboxes.size === 1, 5000, "the half-closed client let go");
    assert.deepEqual(subscribers(h, session), ["watcher"], "its subscription ended");
    await w.request("ping");
    assert.equal(h.clientBudget.total, 0, "nothing it held is counted any more");
    for (let i = 0; i < 4; i++) refusedTitle(w, session);
    assert.equal((await w.request("ping")).result, null, "the other client goes on");
    w.close();
    await until(() => h.clientBudget.outboxes.size === 0 && h.clientBudget.total === 0, 5000, "every client gone, nothing held");
    be.close();
  }));

test("a client dropping its socket in the middle of a large frame: everything it held is released", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "mid-frame" });
    const ev = (event: Json) => be.send({ type: "event", session: reg.session, event });
    ev({ type: "user_message", text: "go", turnId: "t1" });
    for (let i = 0; i < 3; i++) ev({ type: "text_delta", text: "m".repeat(1024 * 1024) }); // the chat's snapshot: one 3 MiB frame
    await until(() => (h.state.chatIndex.get(reg.chat)?.activeTurn?.textChars ?? 0) === 3 * 1024 * 1024, 5000, "the turn's text");
    const { c } = await AhpClient.init(h, [], "cutter");
    let got = 0;
    rawOf(c).on("data", (d: Buffer) => {
      got += d.length;
      if (got > 64 * 1024) rawOf(c).destroy(); // part of the snapshot's frame read, the rest never
    });
    void c.request("subscribe", { channel: reg.chat }).catch(() => {});
    await until(() => c.closed, 5000, "the client gone mid-frame");
    await until(() => h.clientBudget.outboxes.size === 0, 5000, "its outbox gone");
    assert.equal(h.clientBudget.total, 0);
    assert.deepEqual(subscribers(h, reg.chat), []);
    be.close();
  }));

test("a client reading slowly but steadily is never dropped under its bound and gets every envelope in order", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "slow-reader" });
    const session = reg.session as string;
    const { c: slow } = await AhpClient.init(h, [session], "slow");
    const { c: w } = await AhpClient.init(h, [], "writer");
    const n = 256; // 16 MiB of envelopes, half the client's bound, more than its socket buffers
    slow.ws.pause();
    for (let i = 0; i < n; i++) refusedTitle(w, session);
    await w.request("ping");
    const behind = h.clientBudget.total;
    assert.ok(behind > 4 * 1024 * 1024, `bytes wait for it in the host (${behind})`);
    // It reads a little at a time: resumed until a few more envelopes arrived, then paused again.
    while (slow.actions(session).length < n) {
      const seen = slow.actions(session).length;
      slow.ws.resume();
      await until(() => slow.actions(session).length >= Math.min(n, seen + 16) || slow.closed, 10_000, "a few more read");
      slow.ws.pause();
      assert.equal(slow.closed, false, "not dropped");
    }
    slow.ws.resume();
    const seqs = slow.actions(session).map((e) => e.serverSeq as number);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "in order");
    assert.equal(new Set(seqs).size, n, "each once");
    assert.deepEqual(subscribers(h, session), ["slow"]);
    slow.close();
    w.close();
    await until(() => h.clientBudget.outboxes.size === 0 && h.clientBudget.total === 0, 5000, "every client gone, nothing held");
    be.close();
  }));

test("many clients subscribing and unsubscribing while a large turn streams: the daemon-wide total returns to 0", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "churn" });
    const ev = (event: Json) => be.send({ type: "event", session: reg.session, event });
    ev({ type: "user_message", text: "go", turnId: "t1" });
    const clients: AhpClient[] = [];
    for (let i = 0; i < 16; i++) clients.push((await AhpClient.init(h, [], `churn${i}`)).c);
    // Half of them stop reading: bytes wait in the host for them when they go.
    for (const c of clients.slice(0, 8)) c.ws.pause();
    for (let round = 0; round < 12; round++) {
      ev({ type: "text_delta", text: String(round % 10).repeat(256 * 1024) });
      for (const [i, c] of clients.entries()) {
        if ((i + round) % 2 === 0) c.ws.send(JSON.stringify({ jsonrpc: "2.0", id: 1000 + round, method: "subscribe", params: { channel: reg.chat } }));
        else c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "unsubscribe", params: { channel: reg.chat } }));
      }
    }
    await be.roundTrip();
    for (const c of clients.slice(8)) await c.request("ping");
    // Every client goes: some close properly, some drop their sockets, paused ones among both.
    for (const [i, c] of clients.entries()) {
      if (i % 2 === 0) rawOf(c).destroy();
      else c.close();
    }
    for (const c of clients.slice(0, 8)) c.ws.resume();
    await until(() => h.clientBudget.outboxes.size === 0, 10_000, "every outbox gone");
    assert.equal(h.clientBudget.total, 0, "no byte left counted");
    assert.deepEqual(subscribers(h, reg.chat), []);
    be.close();
  }));
