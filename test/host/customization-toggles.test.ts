/**
 * `session/customizationToggled` from the backend (v6 `resource_action`) and from clients, across
 * the two shapes the negotiated AHP types define: a 1.0 client reads `{id, enabled}`, a 1.1 client
 * `{id, enablement}`. Each client's state rebuilt with its own version's reducer semantics (written
 * here from the public types) must equal a fresh snapshot taken at the same version, after every
 * step; a disabled MCP server cannot be started. Real sockets throughout.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, withHost, type Json } from "./helpers.js";
import { TOOLS_SERVER } from "./mcp-helpers.js";
import type { HostHandle } from "../../src/protocols/host/host.js";

type Shape = "1.0.0" | "1.1.0";

/** The session-channel customization reducers of one AHP version (upstream semantics). */
function reduce(s: Json, a: Json, v: Shape): void {
  const list = (): Json[] => (s.customizations ??= []);
  const toggle = (c: Json): Json => {
    if (v === "1.0.0") return { ...c, enabled: a.enabled };
    if (c.type === "plugin" || c.type === "mcpServer") {
      if (a.enablement.length > 0) return { ...c, enablement: a.enablement };
      const { enablement: _e, ...rest } = c;
      return rest;
    }
    return { ...c, enabled: a.enablement[0]?.enabled ?? true };
  };
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
      const i = list().findIndex((c) => c.id === a.id);
      if (i >= 0) list().splice(i, 1);
      else for (const c of list()) if (Array.isArray(c.children)) c.children = c.children.filter((x: Json) => x.id !== a.id);
      return;
    }
    case "session/customizationToggled": {
      assert.equal(v === "1.0.0" ? typeof a.enabled : Array.isArray(a.enablement) ? "array" : "none", v === "1.0.0" ? "boolean" : "array", `a ${v} client reads its own shape: ${JSON.stringify(a)}`);
      assert.equal(v === "1.0.0" ? "enablement" in a : "enabled" in a, false, `no other shape's field: ${JSON.stringify(a)}`);
      const i = list().findIndex((c) => c.id === a.id);
      if (i >= 0) {
        list()[i] = toggle(list()[i]!);
        return;
      }
      for (const c of list()) {
        if (c.type === "mcpServer" || !Array.isArray(c.children)) continue;
        const j = c.children.findIndex((x: Json) => x.id === a.id);
        if (j >= 0) {
          c.children[j] = toggle(c.children[j]);
          return;
        }
      }
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
  }
}

async function connect(h: HostHandle, v: Shape, clientId: string, subs: string[]): Promise<AhpClient> {
  const c = await AhpClient.open(h);
  const r = await c.request("initialize", { channel: "ahp-root://", protocolVersions: [v], clientId, initialSubscriptions: subs });
  assert.equal(r.result?.protocolVersion, v, JSON.stringify(r));
  return c;
}

/** A client of one version, its mirror of the session, and a second connection of the same version for fresh snapshots. */
class Viewer {
  state: Json = {};
  seen = 0;
  private constructor(readonly c: AhpClient, readonly fresh: AhpClient, readonly v: Shape, readonly session: string) {}
  static async open(h: HostHandle, v: Shape, clientId: string, session: string): Promise<Viewer> {
    const x = new Viewer(await connect(h, v, clientId, []), await connect(h, v, `${clientId}-fresh`, []), v, session);
    x.state = structuredClone((await x.c.request("subscribe", { channel: session })).result.snapshot.state);
    return x;
  }
  async check(what: string): Promise<Json> {
    await this.c.request("ping", {});
    const envs = this.c.actions(this.session);
    for (const e of envs.slice(this.seen)) if (e.rejectionReason === undefined) reduce(this.state, structuredClone(e.action), this.v);
    this.seen = envs.length;
    const snap = (await this.fresh.request("subscribe", { channel: this.session })).result.snapshot.state as Json;
    assert.deepEqual(this.state.customizations, snap.customizations, `${this.v} client after ${what}`);
    return snap;
  }
  close(): void {
    this.c.close();
    this.fresh.close();
  }
}

const plugin = (id: string, extra: Json = {}) => ({ type: "plugin", id, uri: `file:///plugins/${id}`, name: id, ...extra });
const skill = (id: string) => ({ type: "skill", id, uri: `file:///skills/${id}.md`, name: id });
const find = (list: Json[], id: string): Json => list.find((x) => x.id === id) ?? list.flatMap((x) => (x.children as Json[] | undefined) ?? []).find((x) => x.id === id)!;

test("customizationToggled: each client reads its version's shape; client toggles go through the backend; a disabled MCP server cannot start", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "tog-src", mcpServers: [TOOLS_SERVER] });
    assert.equal(reg.type, "registered", JSON.stringify(reg));
    const ev = (action: Json) => be.send({ type: "event", session: reg.session, event: { type: "resource_action", action } });
    ev({ type: "session/customizationUpdated", customization: plugin("p1", { children: [skill("k1")] }) });
    await be.roundTrip();
    const old = await Viewer.open(h, "1.0.0", "old", reg.session);
    const neu = await Viewer.open(h, "1.1.0", "new", reg.session);
    const both = async (what: string): Promise<[Json, Json]> => [await old.check(what), await neu.check(what)];

    // The backend disables a plugin (old shape) and a child (new shape); each client gets its own shape.
    ev({ type: "session/customizationToggled", id: "p1", enabled: false });
    ev({ type: "session/customizationToggled", id: "k1", enablement: [{ kind: "global", enabled: false }] });
    await be.roundTrip();
    let [o, n] = await both("backend toggles");
    assert.deepEqual([find(o.customizations, "p1").enabled, find(o.customizations, "k1").enabled], [false, false]);
    assert.deepEqual([find(n.customizations, "p1").enablement, find(n.customizations, "k1").enabled], [[{ kind: "session", enabled: false }], false]);
    assert.equal("enablement" in find(o.customizations, "p1"), false);

    // A 1.1 client disables the MCP server: sent to the backend in the decisions form, applied once accepted.
    const dis = { type: "session/customizationToggled", id: TOOLS_SERVER.id, enablement: [{ kind: "session", enabled: false }, { kind: "global", enabled: true }] };
    let seq = neu.c.dispatch(reg.session, dis);
    let cmd = await be.nextType("command");
    assert.deepEqual(cmd.command, { type: "apply_resource_action", channel: reg.session, action: dis });
    await old.c.request("ping", {});
    assert.equal(old.c.actions(reg.session).some((e) => e.action.type === "session/customizationToggled" && e.action.id === TOOLS_SERVER.id), false, "nothing before the backend accepts");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    const echoNew = await neu.c.action((e) => e.origin?.clientId === "new" && e.origin.clientSeq === seq);
    assert.deepEqual(echoNew.action, dis);
    const echoOld = await old.c.action((e) => e.origin?.clientId === "new" && e.origin.clientSeq === seq);
    assert.deepEqual(echoOld.action, { type: "session/customizationToggled", id: TOOLS_SERVER.id, enabled: false });
    [o, n] = await both("a client's toggle");
    assert.equal(find(o.customizations, TOOLS_SERVER.id).enabled, false);

    // Disabled start is rejected; stopping stays available.
    seq = old.c.dispatch(reg.session, { type: "session/mcpServerStartRequested", id: TOOLS_SERVER.id });
    const rej = await old.c.action((e) => e.origin?.clientId === "old" && e.origin.clientSeq === seq);
    assert.equal(rej.rejectionReason, "the MCP server is disabled (session/customizationToggled); enable it before starting it");
    seq = old.c.dispatch(reg.session, { type: "session/mcpServerStopRequested", id: TOOLS_SERVER.id });
    cmd = await be.nextType("command");
    assert.equal(cmd.command.action.type, "session/mcpServerStopRequested");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    await old.c.action((e) => e.action.type === "paratenic/mcpLifecycleAccepted");

    // A 1.0 client enables it again (its shape becomes the session-scoped decision); a refusal changes nothing.
    seq = old.c.dispatch(reg.session, { type: "session/customizationToggled", id: TOOLS_SERVER.id, enabled: true });
    cmd = await be.nextType("command");
    assert.deepEqual(cmd.command.action, { type: "session/customizationToggled", id: TOOLS_SERVER.id, enablement: [{ kind: "session", enabled: true }] });
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: false, error: "no" });
    assert.equal((await old.c.action((e) => e.origin?.clientId === "old" && e.origin.clientSeq === seq)).rejectionReason, "backend refused the action");
    seq = old.c.dispatch(reg.session, { type: "session/customizationToggled", id: TOOLS_SERVER.id, enabled: true });
    cmd = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await old.c.action((e) => e.origin?.clientId === "old" && e.origin.clientSeq === seq)).rejectionReason, undefined);
    [o, n] = await both("enabling again");
    assert.deepEqual(find(n.customizations, TOOLS_SERVER.id).enablement, [{ kind: "session", enabled: true }]);
    seq = old.c.dispatch(reg.session, { type: "session/mcpServerStartRequested", id: TOOLS_SERVER.id });
    cmd = await be.nextType("command");
    assert.equal(cmd.command.action.type, "session/mcpServerStartRequested");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });

    // Refusals: unknown IDs, both shapes at once, a client's plugin toggled by the backend.
    for (const [bad, why] of [
      [{ type: "session/customizationToggled", id: "ghost", enabled: true }, "no customization \"ghost\" in this session"],
      [{ type: "session/customizationToggled", id: "p1", enabled: true, enablement: [] }, "invalid session/customizationToggled: it carries id and exactly one of enabled (a boolean) or enablement (at most 3 scoped decisions)"],
    ] as Array<[Json, string]>) {
      seq = neu.c.dispatch(reg.session, bad);
      assert.equal((await neu.c.action((e) => e.origin?.clientId === "new" && e.origin.clientSeq === seq)).rejectionReason, why);
    }
    ev({ type: "session/customizationToggled", id: "ghost", enabled: true });
    assert.equal((await be.nextType("error")).message, 'event refused: session/customizationToggled names no customization of this session ("ghost")');
    seq = neu.c.dispatch(reg.session, { type: "session/activeClientSet", activeClient: { clientId: "new", tools: [], customizations: [plugin("cp")] } });
    await neu.c.action((e) => e.origin?.clientId === "new" && e.origin.clientSeq === seq);
    ev({ type: "session/customizationToggled", id: "cp", enabled: false });
    assert.equal((await be.nextType("error")).message, 'event refused: customization "cp" is contributed by active client "new"; its client decides its enablement');

    // Replacing a customization drops its decisions (the reducers replace it whole).
    ev({ type: "session/customizationUpdated", customization: plugin("p1", { children: [skill("k1")] }) });
    await be.roundTrip();
    [o, n] = await both("a replacement");
    assert.deepEqual([find(o.customizations, "p1").enabled, find(n.customizations, "p1").enablement, find(n.customizations, "k1").enabled], [undefined, undefined, undefined]);

    // A full replacement (the route goes and comes back) carries the decisions in each shape.
    const last = old.c.actions(reg.session).at(-1)!.serverSeq as number;
    be.close();
    await old.c.action((e) => e.action.type === "session/customizationsChanged" && e.serverSeq > last);
    const back = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "tog-src", mcpServers: [TOOLS_SERVER] });
    await old.c.action((e) => e.action.type === "session/customizationsChanged" && e.action.customizations.length > 0 && e.serverSeq > last);
    await neu.c.action((e) => e.action.type === "session/customizationsChanged" && e.action.customizations.length > 0 && e.serverSeq > last);
    [o, n] = await both("a new route");
    assert.equal(find(o.customizations, TOOLS_SERVER.id).enabled, true);
    assert.deepEqual(find(n.customizations, TOOLS_SERVER.id).enablement, [{ kind: "session", enabled: true }]);

    // A reconnect replays only the envelopes of the client's own shape (rejected echoes are as the client sent them).
    const r = await (await connect(h, "1.0.0", "old-again", [])).request("reconnect", { channel: "ahp-root://", clientId: "old-again", lastSeenServerSeq: 0, subscriptions: [reg.session] });
    assert.equal(r.result.type, "replay");
    const toggles = (r.result.actions as Json[]).filter((e) => e.action.type === "session/customizationToggled" && e.rejectionReason === undefined);
    assert.equal(toggles.length, 4);
    assert.equal(toggles.every((e) => typeof e.action.enabled === "boolean" && !("enablement" in e.action)), true, JSON.stringify(toggles));
    assert.deepEqual([...old.c.invalid, ...neu.c.invalid, ...old.fresh.invalid, ...neu.fresh.invalid], []);
    back.be.close();
    old.close();
    neu.close();
  }));
