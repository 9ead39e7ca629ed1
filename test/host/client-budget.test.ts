/**
 * The daemon-wide bound on bytes waiting to be written to AHP clients (docs/host.md, "AHP clients"): each client has
 * its own 32 MiB bound, and the sum over clients has one too. A write that takes the sum past it disconnects the
 * clients holding the most, largest first, until the sum is back at or under it; each gets a close frame (1013 and a
 * reason naming the cause and the fix) after the complete frames it was already handed, can `reconnect` without
 * losing anything, and the other clients go on being served in order. At the bound nobody is disconnected.
 * Real sockets: a fake backend over the backend socket; AHP clients that stop reading (paused sockets) and one that
 * reads. The bound is set to 4 MiB so the test allocates little.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { BUDGET_REASON } from "../../src/protocols/host/ahp.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const BOUND = 4 * 1024 * 1024;
const TITLE = "t".repeat(64 * 1024);

const seqs = (c: AhpClient, channel: string): number[] => c.actions(channel).map((e) => e.serverSeq as number);

/** Stalled clients holding some of the budget each, s1 the most; the sum is then taken to `BOUND + over` by s2. */
async function stallAndFill(h: HostHandle, over: number) {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 1, sourceId: "budget" });
  const session = reg.session as string;
  const stalled: AhpClient[] = [];
  for (const id of ["s1", "s2", "s3"]) {
    const { c } = await AhpClient.init(h, [session], id);
    c.ws.pause();
    stalled.push(c);
  }
  const { c: writer } = await AhpClient.init(h, [], "writer");
  const held = () => [...h.clientBudget.outboxes].map((o) => o.held);
  // Published envelopes (refused titles, echoed to the session's subscribers) until each stalled client's socket is
  // full and bytes wait in the host for it: from then on the sum moves only by what the host sends them.
  while (held().filter((n) => n > 768 * 1024).length < 3) {
    for (let i = 0; i < 8; i++) writer.dispatch(session, { type: "session/titleChanged", title: TITLE, bad: 1 });
    await writer.request("ping");
  }
  const [s1, s2] = stalled as [AhpClient, AhpClient, AhpClient];
  const total = () => h.clientBudget.total;
  // An answer to a ping whose id is L characters long adds exactly r0 + L bytes (one frame, a 4-byte header).
  const ping = async (c: AhpClient, len: number, done?: () => boolean) => {
    const before = total();
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", id: "p".repeat(len), method: "ping" }));
    await until(done ?? (() => total() > before), 5000, "the ping's answer queued");
    return total() - before;
  };
  const r0 = (await ping(s1, 1000)) - 1000;
  while (BOUND - total() > 65_000) await ping(s1, Math.max(1000, Math.min(60_000, BOUND - total() - 40_000)));
  assert.ok(total() <= BOUND, `filled to ${total()}`);
  assert.ok(stalled.every((c) => !c.closed));
  const before = held();
  // At the bound the sum is then exactly BOUND; one byte past it, a client is dropped in the same step.
  const dropped = () => [...h.clientBudget.outboxes].some((o) => o.dropped);
  await ping(s2, BOUND + over - total() - r0, over > 0 ? dropped : () => total() === BOUND);
  return { be, session, stalled, writer, before };
}

/** Resume reading a stalled client and wait until it has read `n` envelopes of `channel` (or closed). */
async function drain(c: AhpClient, channel: string, n: number): Promise<void> {
  c.ws.resume();
  await until(() => c.closed || seqs(c, channel).length >= n, 10_000, "the client caught up");
}

test("at the daemon-wide bound of unsent bytes no AHP client is disconnected, and every one is served in order", () =>
  withHost(
    async (h) => {
      const { be, session, stalled, writer } = await stallAndFill(h, 0);
      assert.equal(h.clientBudget.total, BOUND, "exactly at the bound");
      assert.ok([...h.clientBudget.outboxes].every((o) => !o.dropped), "nobody dropped at the bound");
      const published = h.state.actions.serverSeq;
      for (const c of stalled) {
        await drain(c, session, 0);
        await until(() => (seqs(c, session).at(-1) ?? 0) === published, 10_000, "every envelope");
        const s = seqs(c, session);
        assert.deepEqual(s, s.map((_, i) => s[0]! + i), "in order, none missing");
        assert.equal(c.closed, false);
        assert.equal((await c.request("ping")).result, null);
      }
      for (const c of [...stalled, writer]) c.close();
      be.close();
    },
    { clientBytesBound: BOUND },
  ));

test("finding: 64 slow AHP clients could hold 64 × 32 MiB; one byte past the daemon-wide bound drops the client furthest behind, which can reconnect", () => {
  const logs: string[] = [];
  return withHost(
    async (h) => {
      const { be, session, stalled, writer, before } = await stallAndFill(h, 1);
      const [s1, s2, s3] = stalled as [AhpClient, AhpClient, AhpClient];
      assert.ok(before[0]! > before[1]! && before[0]! > before[2]!, "s1 held the most");
      assert.ok(h.clientBudget.total <= BOUND, `back under the bound (${h.clientBudget.total})`);
      assert.deepEqual(
        [...h.clientBudget.outboxes].map((o) => o.dropped),
        [true, false, false, false],
        "only the client holding the most was dropped",
      );
      assert.ok(logs.some((l) => l.includes("s1") && l.includes(`daemon-wide bound of ${BOUND}`)), "the log names the client and the cause");
      // The dropped client reads the complete frames its socket held, then the close frame naming cause and fix.
      s1.ws.resume();
      await until(() => s1.closed, 10_000, "s1 sees the close");
      assert.equal(s1.closeCode, 1013);
      assert.equal(s1.closeReason, BUDGET_REASON);
      assert.deepEqual(s1.invalid, [], "every message it read was whole and valid");
      const got = seqs(s1, session);
      // The others go on being served, in order and in full.
      const published = h.state.actions.serverSeq;
      for (const c of [s2, s3]) {
        await drain(c, session, 0);
        await until(() => (seqs(c, session).at(-1) ?? 0) === published, 10_000, "every envelope");
        const s = seqs(c, session);
        assert.deepEqual(s, s.map((_, i) => s[0]! + i), "in order, none missing");
        assert.equal(c.closed, false);
      }
      const all = seqs(s2, session);
      assert.deepEqual(got, all.slice(0, got.length), "s1 read a prefix of what the others did");
      // Nothing durable is lost: a reconnect replays the rest.
      const again = await AhpClient.open(h);
      const r = await again.request("reconnect", { clientId: "s1", lastSeenServerSeq: got.at(-1) ?? 0, subscriptions: [session] });
      assert.equal(r.result.type, "replay");
      assert.deepEqual(
        (r.result.actions as Json[]).map((e) => e.serverSeq),
        all.slice(got.length),
      );
      for (const c of [s2, s3, writer, again]) c.close();
      be.close();
    },
    { clientBytesBound: BOUND, log: (m) => logs.push(m) },
  );
});
