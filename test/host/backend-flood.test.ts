/**
 * A hostile backend runtime on the owner-only socket that floods sequenced events without reading their acks: the
 * host stops reading it once more than the bound waits for it (its own writes back up instead of the host's memory),
 * serves everyone else meanwhile, and acknowledges every event once the backend reads again. Real sockets.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost } from "./helpers.js";

const BOUND = 64 * 1024;

test("finding: a backend flooding events without reading its acks grew the host's memory without bound; the host stops reading it", () =>
  withHost(
    async (h) => {
      const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "flood" });
      const { be: other, reg: otherReg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "calm" });
      const { c } = await AhpClient.init(h, [otherReg.session as string], "watcher");
      const frame = { type: "sequenced_event", session: reg.session, sequence: 1, event: { type: "title_changed", title: "flood" } };
      be.send(frame);
      await be.next((f) => f.type === "event_ack", "the first ack");
      be.sock.pause(); // it stops reading what the host sends
      const n = 40_000; // re-sent, each re-acknowledged: ~4 MiB of acks
      for (let i = 0; i < n; i++) be.send(frame);
      const conn = [...h.backend.conns].find((x) => x.route?.sessionUri === reg.session)!;
      await until(() => conn.readingPaused, 30_000, "the host to stop reading the flooding backend");
      // At most the bound and the acks of the frames read with the one that crossed it wait for it.
      assert.ok(conn.unsentBytes <= BOUND + 256 * 1024, `${conn.unsentBytes} bytes wait`);
      // Everyone else is served meanwhile.
      other.send({ type: "event", session: otherReg.session, event: { type: "title_changed", title: "still served" } });
      await c.action((e) => e.action.type === "session/titleChanged" && e.action.title === "still served");
      assert.equal((await c.request("ping")).result, null);
      // Once it reads, every event is acknowledged and the connection goes on.
      be.sock.resume();
      await until(() => be.frames.filter((f) => f.type === "event_ack").length === n, 60_000, "every ack");
      assert.deepEqual(be.frames.filter((f) => f.type !== "event_ack"), [], "no error, nothing refused");
      assert.equal(conn.readingPaused, false);
      assert.equal(be.closed, false);
      c.close();
      be.close();
      other.close();
    },
    { backendBytesBound: BOUND },
  ));
