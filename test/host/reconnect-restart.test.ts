/**
 * AHP `reconnect` across a host restart (AHP lifecycle, "Unexpected Disconnection": "On restart, clients
 * reconnect using the reconnection flow above"). A client that saw serverSeq N of the host before it stopped must
 * not be answered with a replay of the restarted host's envelopes after N: those are another run's numbers, and
 * the client would miss every change published before them. It gets snapshots (or a replay that misses nothing).
 * Real sockets: fake backends over the backend socket, an AHP client over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";

const title = (reg: Json, text: string) => ({ type: "event", session: reg.session, event: { type: "title_changed", title: text } });

/** The session title a client holds after applying a reconnect answer to what it held before. */
function titleAfter(before: string, session: string, result: Json): string {
  if (result.type === "snapshot") return (result.snapshots as Json[]).find((s) => s.resource === session)!.state.title as string;
  let t = before;
  for (const e of result.actions as Json[]) if (e.channel === session && e.action.type === "session/titleChanged") t = e.action.title as string;
  return t;
}

test("a client reconnecting after a host restart misses no change, even when the new run has passed its serverSeq", async () => {
  const home = tempHome();
  let seen = 0;
  let reg: Json = {};
  await withHost(
    async (h) => {
      const first = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "rr-src", title: "before" });
      reg = first.reg;
      const { c, result } = await AhpClient.init(h, ["ahp-root://", reg.session]);
      seen = result.serverSeq as number;
      for (let i = 0; i < 20; i++) first.be.send(title(reg, `before ${i}`));
      await c.action((e) => e.action.title === "before 19");
      seen = Math.max(seen, ...c.actions().map((e) => e.serverSeq as number));
      c.close();
      first.be.close();
    },
    { home },
  );
  await withHost(
    async (h) => {
      const again = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "rr-src" });
      again.be.send(title(again.reg, "after the restart"));
      await again.be.roundTrip();
      // Another session's traffic carries the new run's serverSeq past what the client saw before the restart.
      const other = await FakeBackend.session(h, { protocolVersion: 9, sourceId: "rr-other", instanceId: "other-1" });
      for (let i = 0; h.state.serverSeq <= seen + 5; i++) {
        other.be.send(title(other.reg, `noise ${i}`));
        await other.be.roundTrip();
      }
      const c = await AhpClient.open(h);
      const r = await c.request("reconnect", { channel: "ahp-root://", clientId: "c1", lastSeenServerSeq: seen, subscriptions: [reg.session] });
      assert.equal(r.error, undefined, JSON.stringify(r.error));
      assert.equal(titleAfter("before 19", reg.session, r.result), "after the restart", `reconnect answer: ${JSON.stringify(r.result).slice(0, 400)}`);
      // Live envelopes follow on the same subscription, once each.
      again.be.send(title(again.reg, "live"));
      await c.action((e) => e.action.title === "live");
      assert.equal(c.actions().filter((e) => e.action.title === "live").length, 1);
      assert.deepEqual(c.invalid, []);
      c.close();
      again.be.close();
      other.be.close();
    },
    { home },
  );
});
