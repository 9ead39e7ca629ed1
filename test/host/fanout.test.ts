/**
 * Fan-out framing (fanout.ts): envelopes are framed once onto a shared tape and each client gets
 * its slices in one write per event-loop turn. What a client observes must not change: every
 * `action` message is byte-exact `{"jsonrpc":"2.0","method":"action","params":<envelope text>}`
 * with the envelope text the replay ring holds, each client gets the envelopes its negotiated
 * version admits (a shape-split action in its own shape), in serverSeq order, and anything else
 * sent to a client in the same turn (a notification, an answer) stays in its place.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { wsText } from "../../src/transport/ws-text.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const HEAD = '{"jsonrpc":"2.0","method":"action","params":';

/** A client of one AHP version that keeps every message text it receives, in order. */
async function rawClient(h: HostHandle, version: string, clientId: string, subs: string[]): Promise<{ c: AhpClient; raw: string[] }> {
  const c = await AhpClient.open(h);
  const raw: string[] = [];
  c.ws.on("message", (d) => raw.push(wsText(d)));
  const r = await c.request("initialize", { channel: "ahp-root://", protocolVersions: [version], clientId, initialSubscriptions: subs });
  assert.equal(r.result?.protocolVersion, version, JSON.stringify(r));
  raw.length = 0; // from here on: what is fanned out
  return { c, raw };
}

const actionsOf = (raw: string[]): string[] => raw.filter((t) => t.startsWith(HEAD));
const seqOf = (t: string): number => (JSON.parse(t) as Json).params.serverSeq as number;

test("fan-out: clients on 0.9, 1.0 and 1.1 each get a burst byte-exact, a shape-split action in their own shape", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "fan-src" });
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    const session = reg.session as string;
    be.send({ type: "event", session, event: { type: "resource_action", action: { type: "session/customizationUpdated", customization: { type: "plugin", id: "p1", uri: "file:///plugins/p1", name: "p1" } } } });
    be.send({ type: "event", session, event: { type: "user_message", text: "go" } });
    await be.roundTrip();
    const chat = h.state.sessions.get(session)!.primaryChat;
    const subs = [session, chat];
    const clients = {
      v09: await rawClient(h, "0.9.0", "v09", subs),
      v10: await rawClient(h, "1.0.0", "v10", subs),
      v11: await rawClient(h, "1.1.0", "v11", subs),
      v11b: await rawClient(h, "1.1.0", "v11b", subs),
    };
    const before = h.state.serverSeq;

    // One write: the host handles the whole burst in one turn. Texts cover every frame-header size
    // (< 126, < 65,536 and larger payloads), multi-byte UTF-8, and more than one tape chunk (256 KiB).
    const texts = ["a", "é", "😀 ok", "ж".repeat(40), "x".repeat(200), "y".repeat(70_000), "w".repeat(300_000), "z"];
    let burst = "";
    const line = (event: Json) => (burst += JSON.stringify({ type: "event", session, event }) + "\n");
    for (const text of texts.slice(0, 3)) line({ type: "text_delta", text });
    line({ type: "resource_action", action: { type: "session/customizationToggled", id: "p1", enabled: false } });
    for (const text of texts.slice(3)) line({ type: "text_delta", text });
    be.raw(burst);
    await be.roundTrip();
    const last = h.state.serverSeq;
    assert.ok(last > before + texts.length, "the burst was published");
    for (const { raw } of Object.values(clients)) await until(() => actionsOf(raw).some((t) => seqOf(t) === last), 3000, "the burst's last envelope");

    // Each client's messages are exactly the replay ring's envelopes it admits, as the ring holds them.
    for (const [name, { raw }] of Object.entries(clients)) {
      const got = actionsOf(raw);
      assert.equal(got.length, raw.length, `${name}: only action messages`);
      const replay = h.state.replaySince(before, new Set(subs), () => true)!;
      const seqs = new Set(got.map(seqOf));
      const expected = replay.filter((e) => seqs.has(e.serverSeq)).map((e) => `${HEAD}${JSON.stringify(e)}}`);
      assert.deepEqual(got, expected, `${name}: byte-exact to the ring, in order`);
      const deltas = got.map((t) => (JSON.parse(t) as Json).params.action).filter((a: Json) => a.type === "chat/delta" || a.type === "chat/responsePart");
      assert.equal(deltas.map((a: Json) => a.content ?? a.part.content).join(""), texts.join(""), `${name}: every delta`);
      const toggles = got.map((t) => (JSON.parse(t) as Json).params.action).filter((a: Json) => a.type === "session/customizationToggled");
      assert.equal(toggles.length, 1, `${name}: one toggle, in its own shape`);
      if (name === "v11" || name === "v11b") assert.deepEqual(toggles[0], { type: "session/customizationToggled", id: "p1", enablement: [{ kind: "session", enabled: false }] });
      else assert.deepEqual(toggles[0], { type: "session/customizationToggled", id: "p1", enabled: false });
    }
    // Same shape, same bytes; the old and new shapes differ only by the toggle's envelope.
    assert.deepEqual(clients.v11b.raw, clients.v11.raw);
    assert.deepEqual(clients.v10.raw, clients.v09.raw);
    const other = (a: string[], b: string[]) => a.filter((t) => !b.includes(t));
    assert.equal(other(clients.v10.raw, clients.v11.raw).length, 1);
    assert.equal(other(clients.v11.raw, clients.v10.raw).length, 1);
    for (const { c } of Object.values(clients)) {
      assert.deepEqual(c.invalid, []);
      c.close();
    }
    be.close();
  }));

test("fan-out: a notification sent in the same turn as queued envelopes keeps its place between them", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "fan-order" });
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    const { c, raw } = await rawClient(h, "1.0.0", "order", ["ahp-root://"]);
    const s = h.state.sessions.get(reg.session as string)!;
    // One synchronous step: envelope, notification, envelope, notification, envelope.
    h.state.publishRootCount();
    h.state.summaryChanged(s, true);
    h.state.publishRootCount();
    h.state.summaryChanged(s, true);
    h.state.publishRootCount();
    await until(() => raw.length >= 5, 3000, "five messages");
    assert.deepEqual(
      raw.map((t) => (JSON.parse(t) as Json).method),
      ["action", "root/sessionSummaryChanged", "action", "root/sessionSummaryChanged", "action"],
    );
    const seqs = actionsOf(raw).map(seqOf);
    assert.deepEqual(seqs, [seqs[0]!, seqs[0]! + 1, seqs[0]! + 2]);
    // A request answered in a later turn comes after all of it.
    await c.request("ping", {});
    assert.equal(raw.length, 6);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));
