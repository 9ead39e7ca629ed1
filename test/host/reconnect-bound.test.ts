/**
 * The bound of the removal memory behind `reconnect` (channel-removals.ts): a removal at serverSeq r is remembered
 * while the replay ring could still answer a client that saw up to r with a replay, that is up to serverSeq
 * r + REPLAY_LIMIT; a removal made after that forgets it, and such a client gets snapshots from the ring's own
 * bound instead. Checked at the bound and one past it, through real sockets (fake backends, AHP clients).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost } from "./helpers.js";
import { REPLAY_LIMIT } from "../../src/protocols/host/model.js";
import { rememberedRemovals, removedSince } from "../../src/protocols/host/channel-removals.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const ROOT = "ahp-root://";

/** Publish title changes of `session` until serverSeq is exactly `target`. */
async function advanceTo(h: HostHandle, be: FakeBackend, session: string, target: number): Promise<void> {
  const n = target - h.state.serverSeq;
  assert.ok(n >= 0, "premise: not past the target yet");
  for (let i = 0; i < n; i++) be.send({ type: "event", session, event: { type: "title_changed", title: `t${target}-${i}` } });
  await until(() => h.state.serverSeq >= target, 60_000, `serverSeq ${target}`);
  assert.equal(h.state.serverSeq, target, "one envelope per title change");
}

test("a removal is remembered up to serverSeq r + REPLAY_LIMIT and forgotten one past it", () =>
  withHost(async (h) => {
    const a = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "bound-a" });
    const pusher = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "bound-pusher" });
    const c = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "bound-c" });
    const d = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "bound-d" });
    const session = a.reg.session as string;
    const chat = a.reg.chat as string;
    const { c: client } = await AhpClient.init(h, [ROOT, session, chat], "c1");
    const { c: other } = await AhpClient.init(h, [], "other");
    client.ws.terminate();

    const r = h.state.serverSeq;
    assert.equal((await other.request("disposeSession", { channel: session })).result, null);
    assert.ok(removedSince(h.state, session, r) && !removedSince(h.state, session, r + 1), "premise: the removal is at serverSeq r");
    a.be.close();
    const again = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "bound-a" });
    assert.equal(again.reg.session, session, "premise: the session comes back under its URI");
    const reconnect = async () => {
      const w = await AhpClient.open(h);
      const res = (await w.request("reconnect", { channel: ROOT, clientId: "c1", lastSeenServerSeq: r, subscriptions: [ROOT, session, chat] })).result;
      w.close();
      return res.type as string;
    };

    // At the bound: the ring could still replay from r, so only the memory makes the answer snapshots.
    await advanceTo(h, pusher.be, pusher.reg.session as string, r + REPLAY_LIMIT);
    assert.notEqual(h.state.replaySince(r, new Set()), null, "premise: the ring spans r");
    assert.equal(await reconnect(), "snapshot", "at the bound the removal is remembered");
    // A removal made at the bound keeps it.
    const before = rememberedRemovals(h.state);
    assert.equal((await other.request("disposeSession", { channel: c.reg.session })).result, null);
    assert.ok(removedSince(h.state, session, r), "kept by a removal at serverSeq r + REPLAY_LIMIT");
    assert.equal(rememberedRemovals(h.state), before + 2, "the new removal (session and chat) is added, nothing dropped");

    // One past: the next removal forgets it; the ring no longer spans r, so the answer is still snapshots.
    assert.ok(h.state.serverSeq > r + REPLAY_LIMIT);
    assert.equal((await other.request("disposeSession", { channel: d.reg.session })).result, null);
    assert.equal(removedSince(h.state, session, r), false, "forgotten by a removal past the bound");
    assert.equal(rememberedRemovals(h.state), before + 2, "the two entries of r dropped, the two of the new removal added");
    assert.equal(h.state.replaySince(r, new Set()), null, "premise: the ring no longer spans r");
    assert.equal(await reconnect(), "snapshot");
    other.close();
    for (const b of [pusher, c, d, again]) b.be.close();
  }));
