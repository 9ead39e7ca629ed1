import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";

function regSession(be: FakeBackend, requestId: string, hello: Json): void {
  be.send({ type: "register_session", requestId, hello: { protocolVersion: 8, instanceId: "si", provider: "prov", ...hello } });
}
const ev = (text: string) => ({ type: "text_delta", text });

test("v8 multiplexing: correlated registration, failures isolated, root agents, unregister", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h);
    const { be, reg } = await FakeBackend.provider(h, 8, ["prov"]);
    assert.equal(reg.type, "provider_registered");
    assert.deepEqual(reg.providers, ["prov"]);
    await c.action((e) => e.action.type === "root/agentsChanged" && e.action.agents.some((a: Json) => a.provider === "prov"));
    regSession(be, "r1", { sourceId: "a" });
    regSession(be, "r2", { sourceId: "b", protocolVersion: 9 }); // above the connection's version
    regSession(be, "r3", { sourceId: "c", provider: "foreign" });
    const ok = await be.next((f) => f.requestId === "r1");
    assert.equal(ok.type, "session_registered");
    assert.equal(ok.registration.session, ok.session);
    const bad = await be.next((f) => f.requestId === "r2");
    assert.equal(bad.type, "error");
    assert.equal((await be.next((f) => f.requestId === "r3")).code, "authority_error");
    assert.equal(be.closed, false, "failures never tear down siblings");
    be.send({ type: "sequenced_event", session: ok.session, sequence: 1, event: { type: "agent_started" }, backendConnectionId: ok.backendConnectionId });
    assert.equal((await be.nextType("event_ack")).sequence, 1);
    be.send({ type: "unregister_session", requestId: "u1", session: ok.session });
    assert.equal((await be.next((f) => f.requestId === "u1")).type, "session_unregistered");
    be.send({ type: "unregister_session", requestId: "u2", session: ok.session });
    assert.equal((await be.next((f) => f.requestId === "u2")).code, "unknown_session");
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("sequenced publication: gap → resync, re-ACK, rejection retires only that route, epochs after re-registration", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 8);
    regSession(be, "r1", { sourceId: "s1" });
    regSession(be, "r2", { sourceId: "s2" });
    const a = await be.next((f) => f.requestId === "r1");
    const b = await be.next((f) => f.requestId === "r2");
    const seq = (reg: Json, n: number, event: Json, id: string | null = reg.backendConnectionId) =>
      be.send({ type: "sequenced_event", session: reg.session, sequence: n, event, ...(id ? { backendConnectionId: id } : {}) });
    // Legacy omission is allowed on the first epoch.
    seq(a, 1, { type: "agent_started" }, null);
    assert.deepEqual(await be.nextType("event_ack"), { type: "event_ack", session: a.session, sequence: 1, backendConnectionId: a.backendConnectionId });
    seq(a, 3, ev("gap"));
    const rs = await be.nextType("event_resync_required");
    assert.equal(rs.expectedSequence, 2);
    assert.equal(rs.backendConnectionId, a.backendConnectionId);
    seq(a, 2, ev("x"));
    assert.equal((await be.nextType("event_ack")).sequence, 2);
    seq(a, 1, { type: "agent_started" });
    assert.equal((await be.nextType("event_ack")).sequence, 1, "re-ACK while current");
    // Semantic rejection: text before a turn on session b.
    seq(b, 1, ev("no turn"));
    const rj = await be.nextType("event_rejected");
    assert.equal(rj.sequence, 1);
    assert.equal(rj.backendConnectionId, b.backendConnectionId);
    seq(b, 1, { type: "agent_started" });
    assert.equal((await be.nextType("event_rejected")).sequence, 1, "rejected sequence is never ACKed");
    be.send({ type: "event", session: b.session, event: { type: "agent_started" } });
    assert.equal((await be.nextType("event_rejected")).sequence, 0, "unsequenced frames cannot bypass the fence");
    // Sibling still fine.
    seq(a, 3, ev("y"));
    assert.equal((await be.nextType("event_ack")).sequence, 3);
    assert.equal(be.closed, false);
    // Re-registration resets to 1 and requires the new ID.
    regSession(be, "r3", { sourceId: "s2" });
    const b2 = await be.next((f) => f.requestId === "r3");
    assert.equal(b2.session, b.session);
    assert.notEqual(b2.backendConnectionId, b.backendConnectionId);
    seq(b2, 1, { type: "agent_started" }, b.backendConnectionId);
    const mm = await be.nextType("event_epoch_mismatch");
    assert.equal(mm.backendConnectionId, b.backendConnectionId, "stale-generation refusal echoes the old ID");
    seq(b2, 1, { type: "agent_started" }, null);
    const req = await be.nextType("event_epoch_required");
    assert.equal(req.backendConnectionId, undefined);
    seq(b2, 1, { type: "agent_started" });
    assert.deepEqual(await be.nextType("event_ack"), { type: "event_ack", session: b.session, sequence: 1, backendConnectionId: b2.backendConnectionId });
    be.close();
  }));

test("provider fencing: a newer provider connection fences the previous one and its routes", () =>
  withHost(async (h) => {
    const p1 = await FakeBackend.provider(h, 8);
    regSession(p1.be, "r", { sourceId: "x" });
    const r = await p1.be.next((f) => f.requestId === "r");
    const p2 = await FakeBackend.provider(h, 9, ["prov"], { source: { serviceId: "svc", instanceId: "i" } });
    assert.equal(p2.reg.type, "provider_registered");
    assert.equal((await p1.be.nextType("error")).code, "backend_replaced");
    await p1.be.waitClosed();
    assert.equal(h.state.sessions.get(r.session)!.route, undefined);
    p2.be.send({ type: "provider_status", ready: true });
    await until(() => h.state.providers.get("prov")!.ready === true);
    const pv8 = await FakeBackend.provider(h, 8, ["other"]);
    pv8.be.send({ type: "provider_status", ready: true });
    assert.equal((await pv8.be.nextType("error")).code, "unsupported_version");
    const src8 = await FakeBackend.provider(h, 8, ["other2"], { source: { serviceId: "s", instanceId: "i" } });
    assert.equal(src8.reg.code, "validation_error");
    p2.be.close();
    pv8.be.close();
  }));

test("createSession: durable reservation, one-time token claimed by hello → session/ready; misuse refused", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h);
    const { be } = await FakeBackend.provider(h, 8);
    const uri = "ahp-session:/client-chosen-1";
    const pending = c.request("createSession", { channel: uri, provider: "prov", workingDirectories: ["file:///w"] });
    const cmd = await be.nextType("provider_command");
    assert.equal(cmd.command.type, "create_session");
    assert.equal(cmd.command.session, uri);
    const token: string = cmd.command.creationToken;
    assert.ok(token.length >= 32);
    assert.equal(h.state.creations.has(uri), true, "reserved before the provider answers");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await pending).result, null);
    const added = await c.note("root/sessionAdded");
    assert.equal(added.summary.resource, uri);
    assert.ok(!JSON.stringify(c.notes).includes(token), "token never exposed on AHP");
    await c.request("subscribe", { channel: uri });
    // Wrong token.
    const wrong = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "rt", provider: "prov", requestedSession: uri, creationToken: "x".repeat(43) });
    assert.equal(wrong.reg.code, "creation_claim_invalid");
    // Right token.
    const right = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "rt", provider: "prov", requestedSession: uri, creationToken: token });
    assert.equal(right.reg.type, "registered");
    assert.equal(right.reg.session, uri);
    await c.action((e) => e.channel === uri && e.action.type === "session/ready");
    // Reused token from a different source is refused; the bound source may reconnect.
    const reuse = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "intruder", provider: "prov", requestedSession: uri, creationToken: token });
    assert.equal(reuse.reg.code, "creation_claim_invalid");
    const again = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "rt", provider: "prov", requestedSession: uri, creationToken: token });
    assert.equal(again.reg.session, uri);
    // Stale: a claim for a never-reserved URI.
    const stale = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "s9", provider: "prov", requestedSession: "ahp-session:/nope", creationToken: token });
    assert.equal(stale.reg.code, "creation_claim_invalid");
    // Duplicate URI and unknown provider.
    assert.equal((await c.request("createSession", { channel: uri, provider: "prov" })).error.code, -32003);
    assert.equal((await c.request("createSession", { channel: "ahp-session:/z", provider: "ghost" })).error.code, -32002);

    // Creation failure.
    const uri2 = "ahp-session:/client-chosen-2";
    const p2 = c.request("createSession", { channel: uri2, provider: "prov" });
    const cmd2 = await be.nextType("provider_command");
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: true });
    await p2;
    await c.request("subscribe", { channel: uri2 });
    be.send({ type: "session_creation_failed", session: uri2, creationToken: "bad", error: "nope" });
    assert.equal((await be.nextType("error")).code, "creation_claim_invalid");
    be.send({ type: "session_creation_failed", session: uri2, creationToken: cmd2.command.creationToken, error: "spawn failed" });
    const cf = await c.action((e) => e.channel === uri2 && e.action.type === "session/creationFailed");
    assert.equal(cf.action.error.message, "spawn failed");

    // Rejected creation drops the reservation; indeterminate keeps it.
    const p3 = c.request("createSession", { channel: "ahp-session:/c3", provider: "prov" });
    const cmd3 = await be.nextType("provider_command");
    be.send({ type: "command_result", commandId: cmd3.commandId, accepted: false, error: "full" });
    assert.equal((await p3).error.data.outcome, "rejected");
    assert.equal(h.state.creations.has("ahp-session:/c3"), false);

    // Dispose routes to the provider; rejection leaves the session intact.
    const d1 = c.request("disposeSession", { channel: uri });
    const dc = await be.nextType("provider_command");
    assert.deepEqual(dc.command, { type: "dispose_session", session: uri, sourceId: "rt" });
    be.send({ type: "command_result", commandId: dc.commandId, accepted: false, error: "busy" });
    assert.ok((await d1).error);
    assert.ok(h.state.sessions.has(uri));
    const d2 = c.request("disposeSession", { channel: uri });
    const dc2 = await be.nextType("provider_command");
    be.send({ type: "command_result", commandId: dc2.commandId, accepted: true });
    assert.equal((await d2).result, null);
    await c.note("root/sessionRemoved", (p) => p.session === uri);
    assert.equal(h.state.sessions.has(uri), false);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));

test("unregister_session while a disposal is pending only detaches the route; the accepted disposal removes the session", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h);
    const { be } = await FakeBackend.provider(h, 8, ["prov"]);
    regSession(be, "r1", { sourceId: "d" });
    const first = await be.next((f) => f.requestId === "r1");
    const uri = first.session as string;
    const disposed = c.request("disposeSession", { channel: uri });
    const dc = await be.nextType("provider_command");
    assert.equal(dc.command.type, "dispose_session");
    // The provider re-registers the session (a registration it sent before reading the disposal), then retires it.
    regSession(be, "r2", { sourceId: "d" });
    const second = await be.next((f) => f.requestId === "r2");
    assert.equal(second.type, "session_registered");
    assert.equal(second.session, uri);
    assert.notEqual(second.backendConnectionId, first.backendConnectionId);
    be.send({ type: "unregister_session", requestId: "u1", backendConnectionId: second.backendConnectionId });
    assert.deepEqual(await be.next((f) => f.requestId === "u1"), { type: "session_unregistered", requestId: "u1", session: uri, backendConnectionId: second.backendConnectionId });
    assert.equal(h.state.sessions.get(uri)?.route, undefined, "detached");
    const listed = (await c.request("listSessions", {})).result.items as Json[];
    assert.deepEqual(listed.map((s) => s.resource), [uri], "not removed by unregister_session: the disposal is still pending");
    be.send({ type: "command_result", commandId: dc.commandId, accepted: true });
    assert.equal((await disposed).result, null);
    await c.note("root/sessionRemoved", (p) => p.session === uri);
    assert.equal(h.state.sessions.has(uri), false);
    // A registration retired by the disposal itself: unregistering it again is refused, correlated.
    be.send({ type: "unregister_session", requestId: "u2", backendConnectionId: second.backendConnectionId });
    const late = await be.next((f) => f.requestId === "u2");
    assert.deepEqual([late.type, late.code], ["error", "unknown_session"]);
    assert.equal(be.closed, false);
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
  }));
