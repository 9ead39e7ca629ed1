/**
 * Session customizations beside the host's MCP servers: backend-owned containers (v6
 * `resource_action` `session/customizationUpdated` / `session/customizationRemoved`) and active
 * clients' plugins (`session/activeClientSet` `customizations`). A fake v6 backend over the real
 * socket, AHP clients over the real WebSocket; every envelope is checked against ahp-schema
 * (`c.invalid`), and the session state rebuilt from envelopes (upstream reducer semantics, written
 * here from the public types) must equal a fresh snapshot after every step.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { TOOLS_SERVER } from "./mcp-helpers.js";
import { HOST_OWNED, MAX_BACKEND_CUSTOMIZATIONS, MAX_CUSTOMIZATION_BYTES } from "../../src/protocols/host/customizations.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

const plugin = (id: string, extra: Json = {}) => ({ type: "plugin", id, uri: `file:///plugins/${id}`, name: `Plugin ${id}`, ...extra });
const skill = (id: string) => ({ type: "skill", id, uri: `file:///skills/${id}.md`, name: id });

/** Session-channel reduction of the customization and active-client actions (AHP session reducer semantics). */
function reduceSession(s: Json, a: Json): void {
  const list = (): Json[] => (s.customizations ??= []);
  switch (a.type) {
    case "session/customizationsChanged":
      s.customizations = a.customizations;
      return;
    case "session/customizationUpdated": {
      const i = list().findIndex((c) => c.id === a.customization.id);
      if (i >= 0) list()[i] = a.customization;
      else list().push(a.customization);
      return;
    }
    case "session/customizationRemoved": {
      const top = list().findIndex((c) => c.id === a.id);
      if (top >= 0) {
        list().splice(top, 1);
        return;
      }
      for (const c of list()) if (Array.isArray(c.children)) c.children = c.children.filter((x: Json) => x.id !== a.id);
      return;
    }
    case "session/mcpServerStateChanged": {
      const c = list().find((x) => x.id === a.id);
      if (!c) return;
      c.state = a.state;
      if (a.channel === undefined) delete c.channel;
      else c.channel = a.channel;
      return;
    }
    case "session/activeClientSet": {
      const i = s.activeClients.findIndex((x: Json) => x.clientId === a.activeClient.clientId);
      if (i >= 0) s.activeClients[i] = a.activeClient;
      else s.activeClients.push(a.activeClient);
      return;
    }
    case "session/activeClientRemoved":
      s.activeClients = s.activeClients.filter((x: Json) => x.clientId !== a.clientId);
      return;
  }
}

/** A client's view of one session: a snapshot, then every envelope it receives. */
class Mirror {
  state: Json = {};
  seen = 0;
  constructor(readonly c: AhpClient, readonly session: string) {}
  async load(): Promise<void> {
    const r = await this.c.request("subscribe", { channel: this.session });
    this.state = structuredClone(r.result.snapshot.state);
    this.seen = this.c.actions(this.session).length;
  }
  /** Apply what arrived since, and compare with a fresh snapshot (taken on a second connection). */
  async check(fresh: AhpClient, what: string): Promise<Json> {
    await this.c.request("ping", {}).catch(() => undefined);
    const envs = this.c.actions(this.session);
    for (const e of envs.slice(this.seen)) if (e.rejectionReason === undefined) reduceSession(this.state, structuredClone(e.action));
    this.seen = envs.length;
    const snap = (await fresh.request("subscribe", { channel: this.session })).result.snapshot.state as Json;
    assert.deepEqual(this.state.customizations, snap.customizations, `customizations after ${what}`);
    assert.deepEqual(this.state.activeClients, snap.activeClients, `activeClients after ${what}`);
    return snap;
  }
}

async function backend(h: HostHandle, sourceId = "cust-src"): Promise<{ be: FakeBackend; reg: Json; ev: (e: Json) => void }> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId, mcpServers: [TOOLS_SERVER] });
  assert.equal(reg.type, "registered", JSON.stringify(reg));
  return { be, reg, ev: (event: Json) => be.send({ type: "event", session: reg.session, event }) };
}
const updated = (customization: Json) => ({ type: "resource_action", action: { type: "session/customizationUpdated", customization } });
const removed = (id: string) => ({ type: "resource_action", action: { type: "session/customizationRemoved", id } });

async function refused(be: FakeBackend, ev: (e: Json) => void, event: Json, message: string): Promise<void> {
  ev(event);
  const err = await be.nextType("error");
  assert.equal(err.message, `event refused: ${message}`, JSON.stringify(event));
}

test("backend customizations: upserted and removed beside the host's MCP servers; refusals name the owner; gone with the route", () =>
  withHost(async (h) => {
    const { be, reg, ev } = await backend(h);
    const { c } = await AhpClient.init(h, [reg.session], "watcher");
    const { c: fresh } = await AhpClient.init(h, [], "fresh");
    const m = new Mirror(c, reg.session);
    await m.load();
    assert.deepEqual(m.state.customizations.map((x: Json) => x.id), [TOOLS_SERVER.id]);

    ev(updated(plugin("p1", { children: [skill("k1"), skill("k2")] })));
    await c.action((e) => e.action.type === "session/customizationUpdated");
    await m.check(fresh, "a new plugin");
    ev(updated({ type: "directory", id: "d1", uri: "file:///w/.agents", name: "Agents", enabled: true, contents: "agent", writable: true }));
    ev(updated(plugin("p1", { name: "Renamed", children: [skill("k1"), skill("k2")] })));
    await be.roundTrip();
    let snap = await m.check(fresh, "a directory and an in-place update");
    assert.deepEqual(snap.customizations.map((x: Json) => x.id), [TOOLS_SERVER.id, "p1", "d1"], "an update keeps its place; a new entry is appended");
    assert.equal(snap.customizations[1].name, "Renamed");
    ev(removed("k2"));
    await be.roundTrip();
    snap = await m.check(fresh, "a child's removal");
    assert.deepEqual(snap.customizations[1].children.map((x: Json) => x.id), ["k1"]);

    // The host owns MCP server customizations; IDs are session-unique; a backend has no clientId.
    await refused(be, ev, updated({ type: "mcpServer", id: TOOLS_SERVER.id, uri: "x:y", name: "n", state: { kind: "ready" } }), HOST_OWNED(TOOLS_SERVER.id));
    await refused(be, ev, updated(plugin(TOOLS_SERVER.id)), HOST_OWNED(TOOLS_SERVER.id));
    await refused(be, ev, removed(TOOLS_SERVER.id), HOST_OWNED(TOOLS_SERVER.id));
    await refused(be, ev, updated(plugin("p2", { children: [skill(TOOLS_SERVER.id)] })), HOST_OWNED(TOOLS_SERVER.id));
    await refused(be, ev, updated(plugin("p2", { children: [skill("k1")] })), 'customization ID "k1" is already used by another customization');
    await refused(be, ev, updated(plugin("p2", { clientId: "x" })), "session/customizationUpdated: clientId marks a client's plugin; a backend customization has none");
    await refused(be, ev, removed("ghost"), 'session/customizationRemoved names no customization of this session ("ghost")');
    await refused(be, ev, updated({ type: "skill", id: "s", uri: "file:///s", name: "s" }), "invalid session/customizationUpdated: type Invalid discriminator value. Expected 'plugin' | 'directory'");

    // A client's plugins appear with its clientId; their IDs are the client's.
    const { c: a } = await AhpClient.init(h, [reg.session], "laptop");
    let seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "laptop", tools: [], customizations: [plugin("cp1", { nonce: "v1", childEnablement: {} })] } });
    let echo = await a.action((e) => e.origin?.clientSeq === seq);
    assert.equal(echo.rejectionReason, undefined, echo.rejectionReason);
    snap = await m.check(fresh, "a client's plugin");
    assert.deepEqual(snap.customizations.at(-1), { ...plugin("cp1"), clientId: "laptop" });
    await refused(be, ev, updated(plugin("cp1")), 'customization "cp1" is contributed by active client "laptop"');
    await refused(be, ev, removed("cp1"), 'customization "cp1" is contributed by active client "laptop"');
    seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "laptop", tools: [], customizations: [plugin("p1")] } });
    echo = await a.action((e) => e.origin?.clientSeq === seq);
    assert.equal(echo.rejectionReason, 'customization "p1" belongs to the session\'s backend');
    seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "laptop", tools: [], customizations: [{ ...skill("s1") }] } });
    echo = await a.action((e) => e.origin?.clientSeq === seq);
    assert.match(echo.rejectionReason, /^invalid activeClient\.customizations\.0: type/);
    // A refresh publishes only what changed: the same plugin again changes nothing, a second one is added.
    const before = c.actions(reg.session).length;
    seq = a.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "laptop", tools: [], customizations: [plugin("cp1", { nonce: "v2" }), plugin("cp2")] } });
    await a.action((e) => e.origin?.clientSeq === seq);
    await m.check(fresh, "a refresh");
    assert.deepEqual(c.actions(reg.session).slice(before).map((e) => e.action.type), ["session/activeClientSet", "session/customizationUpdated"]);
    // The client leaving (its connection closing) removes its plugins.
    a.close();
    await c.action((e) => e.action.type === "session/activeClientRemoved");
    await c.action((e) => e.action.type === "session/customizationRemoved" && e.action.id === "cp2");
    snap = await m.check(fresh, "the client leaving");
    assert.deepEqual(snap.customizations.map((x: Json) => x.id), [TOOLS_SERVER.id, "p1", "d1"]);

    // Backend customizations describe the live backend: they leave with its route, and a new route starts without them.
    be.close();
    await c.action((e) => e.action.type === "session/customizationRemoved" && e.action.id === "d1");
    snap = await m.check(fresh, "the route going away");
    assert.deepEqual(snap.customizations, []);
    const again = await backend(h);
    assert.equal(again.reg.session, reg.session);
    await again.be.roundTrip();
    snap = await m.check(fresh, "a new registration");
    assert.deepEqual(snap.customizations.map((x: Json) => x.id), [TOOLS_SERVER.id]);
    assert.deepEqual([...c.invalid, ...fresh.invalid], []);
    again.be.close();
    c.close();
    fresh.close();
  }));

test(`backend customizations: at most ${MAX_BACKEND_CUSTOMIZATIONS} per session and ${MAX_CUSTOMIZATION_BYTES} bytes each, exactly`, () =>
  withHost(async (h) => {
    const { be, reg, ev } = await backend(h, "bounds-src");
    const { c } = await AhpClient.init(h, [reg.session], "watcher");
    for (let i = 0; i < MAX_BACKEND_CUSTOMIZATIONS; i++) ev(updated(plugin(`p${i}`)));
    await be.roundTrip();
    assert.equal(be.frames.filter((f) => f.type === "error").length, 0, JSON.stringify(be.frames.find((f) => f.type === "error")));
    await refused(be, ev, updated(plugin("one-more")), `session/customizationUpdated: a session holds at most ${MAX_BACKEND_CUSTOMIZATIONS} backend customizations (remove one first)`);
    // Replacing one is not adding one.
    ev(updated(plugin("p0", { name: "again" })));
    // Exactly the byte bound is accepted (padding in _meta); one byte more is refused whole.
    const sized = (n: number): Json => {
      const base = plugin("p1", { _meta: { pad: "" } });
      const pad = n - Buffer.byteLength(JSON.stringify(base));
      return plugin("p1", { _meta: { pad: "x".repeat(pad) } });
    };
    assert.equal(Buffer.byteLength(JSON.stringify(sized(MAX_CUSTOMIZATION_BYTES))), MAX_CUSTOMIZATION_BYTES);
    ev(updated(sized(MAX_CUSTOMIZATION_BYTES)));
    await be.roundTrip();
    assert.equal(be.frames.filter((f) => f.type === "error").length, 0, "the replacement and the exact-size one are accepted");
    await refused(be, ev, updated(sized(MAX_CUSTOMIZATION_BYTES + 1)), `session/customizationUpdated: the customization is ${MAX_CUSTOMIZATION_BYTES + 1} bytes encoded; at most ${MAX_CUSTOMIZATION_BYTES} are accepted`);
    const state = (await c.request("subscribe", { channel: reg.session })).result.snapshot.state as Json;
    assert.equal(state.customizations.length, 1 + MAX_BACKEND_CUSTOMIZATIONS);
    assert.equal(state.customizations.find((x: Json) => x.id === "p1")._meta.pad.length > 0, true);
    assert.equal(state.customizations.some((x: Json) => x.id === "one-more"), false);
    assert.deepEqual(c.invalid, []);
    be.close();
    c.close();
  }));

test("backend customizations are not persisted: after a host restart the session has only what a new route reports", async () => {
  const home = tempHome();
  let session = "";
  await withHost(
    async (h) => {
      const { be, reg, ev } = await backend(h, "restart-src");
      session = reg.session as string;
      ev(updated(plugin("p1")));
      await be.roundTrip();
      be.close();
    },
    { home },
  );
  await withHost(
    async (h) => {
      const { c } = await AhpClient.init(h, [], "after");
      const before = (await c.request("subscribe", { channel: session })).result.snapshot.state as Json;
      assert.equal((before.customizations ?? []).some((x: Json) => x.id === "p1"), false);
      const { be, reg, ev } = await backend(h, "restart-src");
      assert.equal(reg.session, session);
      ev(updated(plugin("p2")));
      await c.action((e) => e.action.type === "session/customizationUpdated");
      const after = (await c.request("subscribe", { channel: session })).result.snapshot.state as Json;
      assert.deepEqual(after.customizations.map((x: Json) => x.id), [TOOLS_SERVER.id, "p2"]);
      assert.deepEqual(c.invalid, []);
      be.close();
      c.close();
    },
    { home },
  );
});
