/**
 * AHP `reconnect` (AHP lifecycle, "Reconnection"): a reconnecting client misses no event and sees none twice,
 * in the shapes of the version it negotiated.
 *  - Across a host restart ("On restart, clients reconnect using the reconnection flow above"): a client that saw
 *    serverSeq N of the host before it stopped must not be answered with a replay of the restarted host's
 *    envelopes after N: those are another run's numbers, and the client would miss every change published
 *    before them. It gets snapshots (or a replay that misses nothing).
 *  - On a new transport, `reconnect` replaces `initialize` and carries no version: the host answers in the
 *    version that client negotiated, not in a default one.
 *  - A connection's `clientId` (set by `initialize` or a bare `reconnect`) is never switched: a later `reconnect`
 *    naming another client is refused (-32602), one naming the same client replays as before.
 * Real sockets: fake backends over the backend socket, AHP clients over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, until, withHost, type Json } from "./helpers.js";
import { TOOLS_SERVER } from "./mcp-helpers.js";
import { REMEMBERED_CLIENT_VERSIONS } from "../../src/protocols/host/ahp.js";

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

test("a bare reconnect on a new transport answers in the version the client negotiated (replay, snapshot and live)", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "rv-src", mcpServers: [TOOLS_SERVER] });
    const toggle = (enabled: boolean) => be.send({ type: "event", session: reg.session, event: { type: "resource_action", action: { type: "session/customizationToggled", id: TOOLS_SERVER.id, enabled } } });
    const first = await AhpClient.open(h);
    const init = await first.request("initialize", { channel: "ahp-root://", protocolVersions: ["1.1.0"], clientId: "v11", initialSubscriptions: [reg.session] });
    assert.equal(init.result.protocolVersion, "1.1.0");
    toggle(false);
    const seen = (await first.action((e) => e.action.type === "session/customizationToggled")).serverSeq as number;
    first.close();
    await until(() => first.closed, 3000, "first transport closed");
    toggle(true); // while the client is away
    await be.roundTrip();

    const is11 = (a: Json) => Array.isArray(a.enablement) && !("enabled" in a);
    const again = await AhpClient.open(h);
    const r = await again.request("reconnect", { channel: "ahp-root://", clientId: "v11", lastSeenServerSeq: seen, subscriptions: [reg.session] });
    assert.equal(r.result.type, "replay");
    const replayed = (r.result.actions as Json[]).filter((e) => e.action.type === "session/customizationToggled");
    assert.equal(replayed.length, 1, JSON.stringify(r.result.actions));
    assert.ok(is11(replayed[0]!.action), `replayed in the 1.1 shape: ${JSON.stringify(replayed[0]!.action)}`);
    assert.deepEqual(replayed[0]!.action.enablement, [{ kind: "session", enabled: true }]);
    toggle(false);
    const live = await again.action((e) => e.action.type === "session/customizationToggled" && e.serverSeq > seen);
    assert.ok(is11(live.action), `live in the 1.1 shape: ${JSON.stringify(live.action)}`);
    // A gap older than anything replayable: the snapshot is shaped for 1.1 too.
    const third = await AhpClient.open(h);
    const snap = await third.request("reconnect", { channel: "ahp-root://", clientId: "v11", lastSeenServerSeq: h.state.serverSeq + 1, subscriptions: [reg.session] });
    assert.equal(snap.result.type, "snapshot");
    const server = (snap.result.snapshots[0].state.customizations as Json[]).find((c) => c.id === TOOLS_SERVER.id)!;
    assert.deepEqual([server.enablement, "enabled" in server], [[{ kind: "session", enabled: false }], false], JSON.stringify(server));
    assert.deepEqual([...again.invalid, ...third.invalid], []);
    again.close();
    third.close();
    be.close();
  }));

test(`the negotiated versions of the newest ${REMEMBERED_CLIENT_VERSIONS} clients are remembered (at and one past the bound)`, { timeout: 120_000 }, () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "bound-src", mcpServers: [TOOLS_SERVER] });
    be.send({ type: "event", session: reg.session, event: { type: "resource_action", action: { type: "session/customizationToggled", id: TOOLS_SERVER.id, enabled: false } } });
    await be.roundTrip();
    /** One client on its own transport: `initialize` in `version`, then gone. */
    const initialize = async (clientId: string, version: string): Promise<void> => {
      const c = await AhpClient.open(h);
      const r = await c.request("initialize", { channel: "ahp-root://", protocolVersions: [version], clientId });
      assert.equal(r.result.protocolVersion, version);
      c.close();
    };
    const others = async (from: number, n: number): Promise<void> => {
      // In batches, below the listener's 64 connections not yet upgraded.
      for (let i = from; i < from + n; i += 48) await Promise.all(Array.from({ length: Math.min(48, from + n - i) }, (_, k) => initialize(`other-${i + k}`, "1.0.0")));
    };
    /** The shape a bare reconnect on a new transport is answered in: the 1.1 `enablement` or the 1.0 `enabled`. */
    const shapeOf = async (clientId: string): Promise<string> => {
      const c = await AhpClient.open(h);
      const r = await c.request("reconnect", { channel: "ahp-root://", clientId, lastSeenServerSeq: h.state.serverSeq + 1, subscriptions: [reg.session] });
      c.close();
      assert.deepEqual(c.invalid, []);
      const server = (r.result.snapshots[0].state.customizations as Json[]).find((x) => x.id === TOOLS_SERVER.id)!;
      return "enablement" in server ? "1.1" : "enabled" in server ? "1.0" : JSON.stringify(server);
    };
    await initialize("first", "1.1.0");
    await initialize("second", "1.1.0");
    await others(0, REMEMBERED_CLIENT_VERSIONS - 2);
    // Exactly at the bound: the oldest of 4,096 is still served in its own version (and becomes the newest).
    assert.equal(await shapeOf("first"), "1.1");
    // One more client: the oldest now (`second`) is forgotten and served in the preferred 1.0.0.
    await others(REMEMBERED_CLIENT_VERSIONS - 2, 1);
    assert.equal(await shapeOf("second"), "1.0");
    assert.equal(await shapeOf("first"), "1.1", "a remembered client is unaffected");
    be.close();
  }));

test("a reconnect naming another clientId on a connection that has a client is refused; the same clientId still reconnects", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "rc-own", mcpServers: [TOOLS_SERVER] });
    be.send({ type: "event", session: reg.session, event: { type: "resource_action", action: { type: "session/customizationToggled", id: TOOLS_SERVER.id, enabled: false } } });
    await be.roundTrip();
    // Client `b` negotiated 1.1 on its own connection; client `a` negotiated 1.0 on this one.
    const b = await AhpClient.open(h);
    assert.equal((await b.request("initialize", { channel: "ahp-root://", protocolVersions: ["1.1.0"], clientId: "b" })).result.protocolVersion, "1.1.0");
    b.close();
    const { c: a, result } = await AhpClient.init(h, [reg.session], "a");
    const seen = result.serverSeq as number;

    const refused = await a.request("reconnect", { channel: "ahp-root://", clientId: "b", lastSeenServerSeq: seen, subscriptions: [reg.session] });
    assert.equal(refused.result, undefined, `refused: ${JSON.stringify(refused.result)}`);
    assert.deepEqual(refused.error, { code: -32602, message: 'this connection already belongs to client "a"; open a new connection to reconnect as client "b"' });
    // The connection still speaks for `a`: its next action's origin names `a`.
    const seq = a.dispatch(reg.session, { type: "session/isReadChanged", isRead: true });
    assert.equal((await a.action((e) => e.origin?.clientSeq === seq)).origin.clientId, "a");
    // `b` keeps its own negotiated version: a bare reconnect on a new transport is answered in 1.1.
    const again = await AhpClient.open(h);
    const snap = await again.request("reconnect", { channel: "ahp-root://", clientId: "b", lastSeenServerSeq: h.state.serverSeq + 1, subscriptions: [reg.session] });
    const server = (snap.result.snapshots[0].state.customizations as Json[]).find((x) => x.id === TOOLS_SERVER.id)!;
    assert.ok("enablement" in server, `b is still served in 1.1: ${JSON.stringify(server)}`);
    // The same clientId reconnects on its own connection as before: a replay from what it saw.
    const same = await a.request("reconnect", { channel: "ahp-root://", clientId: "a", lastSeenServerSeq: seen, subscriptions: [reg.session] });
    assert.equal(same.result.type, "replay", JSON.stringify(same));
    assert.ok((same.result.actions as Json[]).some((e) => e.action.type === "session/isReadChanged"));
    // A connection whose client a bare reconnect set holds on to it the same way.
    const refusedAgain = await again.request("reconnect", { channel: "ahp-root://", clientId: "a", lastSeenServerSeq: 0, subscriptions: [] });
    assert.equal(refusedAgain.error?.code, -32602);
    assert.match(refusedAgain.error?.message as string, /already belongs to client "b"/);
    assert.deepEqual([...a.invalid, ...again.invalid], []);
    a.close();
    again.close();
    be.close();
  }));
