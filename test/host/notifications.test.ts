/**
 * Backend protocol v6 `notification` frames (root/progress, otlp/export*, auth/required) and
 * provider `root_action`, relayed to AHP clients through real sockets (spec "Events").
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost, type Json } from "./helpers.js";
import { otlpChannel } from "../../src/protocols/host/notifications.js";

const ROOT = "ahp-root://";

test("root/progress reaches only the creating client, for its provider, monotonically until total", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 6, ["prov"]);
    const { be: other } = await FakeBackend.provider(h, 6, ["other"]);
    const { c } = await AhpClient.init(h, [ROOT], "creator");
    const { c: watcher } = await AhpClient.init(h, [ROOT], "watcher");
    const created = c.request("createSession", { channel: "ahp-session:/p1", provider: "prov", progressToken: "tok-1" });
    const cmd = await be.nextType("provider_command");
    assert.equal(cmd.command.progressToken, "tok-1");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.equal((await created).result, null);
    const progress = (p: Json, to = be, extra: Json = {}) => to.send({ type: "notification", method: "root/progress", params: { channel: ROOT, progressToken: "tok-1", ...p }, ...extra });
    progress({ progress: 10, total: 100 });
    assert.deepEqual(await c.note("root/progress"), { channel: ROOT, progressToken: "tok-1", progress: 10, total: 100 });
    progress({ progress: 5 });
    assert.match((await be.nextType("error")).message, /must not decrease/);
    progress({ progress: 20 }, other);
    assert.equal((await other.nextType("error")).code, "authority_error", "a foreign provider cannot use the token");
    progress({ progress: 20 }, be, { channel: "ahp-session:/x" });
    assert.match((await be.nextType("error")).message, /disagree/);
    be.send({ type: "notification", method: "root/progress", params: { channel: ROOT, progressToken: "never", progress: 1 } });
    assert.equal((await be.nextType("error")).code, "authority_error");
    progress({ progress: 100, total: 100, message: "done" });
    await until(() => c.notes.filter((n) => n.method === "root/progress").length === 2, 3000, "final frame");
    progress({ progress: 100, total: 100 });
    assert.equal((await be.nextType("error")).code, "authority_error", "the final frame retired the token");
    assert.equal(watcher.notes.filter((n) => n.method === "root/progress").length, 0, "only the creating client hears it");
    assert.deepEqual(c.invalid, []);
    const { be: old } = await FakeBackend.provider(h, 5, ["old"]);
    old.send({ type: "notification", method: "root/progress", params: { channel: ROOT, progressToken: "x", progress: 1 } });
    assert.equal((await old.nextType("error")).code, "unsupported_version");
    for (const x of [c, watcher]) x.close();
    for (const x of [be, other, old]) x.close();
  }));

test("otlp exports: advertised in provider_hello, offered at initialize, relayed to channel subscribers", () =>
  withHost(async (h) => {
    const refused = await FakeBackend.provider(h, 5, ["p5"], { telemetry: { logs: true } });
    assert.equal(refused.reg.code, "validation_error");
    const { c: before, result: none } = await AhpClient.init(h, [ROOT], "before");
    assert.equal(none.telemetry, undefined, "no provider exports telemetry yet");
    const { be } = await FakeBackend.provider(h, 6, ["tel"], { telemetry: { logs: true, metrics: false } });
    const { c, result } = await AhpClient.init(h, [ROOT], "tel-client");
    assert.deepEqual(result.telemetry, { logs: otlpChannel("logs") });
    const { c: quiet } = await AhpClient.init(h, [ROOT], "quiet");
    assert.deepEqual((await c.request("subscribe", { channel: otlpChannel("logs") })).result, {});
    const payload = { resourceLogs: [{ scopeLogs: [{ logRecords: [{ severityNumber: 9, body: { stringValue: "tool call started" } }] }] }] };
    be.send({ type: "notification", method: "otlp/exportLogs", params: { channel: otlpChannel("logs"), payload } });
    assert.deepEqual(await c.note("otlp/exportLogs"), { channel: otlpChannel("logs"), payload });
    be.send({ type: "notification", method: "otlp/exportMetrics", params: { channel: otlpChannel("metrics"), payload: {} } });
    assert.match((await be.nextType("error")).message, /not advertised/);
    be.send({ type: "notification", method: "otlp/exportLogs", params: { channel: "ahp-otlp://elsewhere", payload } });
    assert.match((await be.nextType("error")).message, /host's channel/);
    be.send({ type: "notification", method: "otlp/exportLogs", params: { channel: otlpChannel("logs") } });
    assert.equal((await be.nextType("error")).code, "validation_error");
    be.send({ type: "ping", id: "end" });
    await be.next((f) => f.type === "pong");
    assert.equal(quiet.notes.filter((n) => n.method === "otlp/exportLogs").length, 0, "unsubscribed clients hear nothing");
    assert.equal(c.notes.filter((n) => n.method === "otlp/exportLogs").length, 1);
    assert.deepEqual(c.invalid, []);
    for (const x of [before, c, quiet]) x.close();
    be.close();
  }));

test("auth/required only for channels and providers the sender owns", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "ar" });
    const { be: stranger, reg: sreg } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "stranger" });
    const { be: prov } = await FakeBackend.provider(h, 8, ["prov"]);
    prov.send({ type: "register_session", requestId: "r", hello: { protocolVersion: 6, instanceId: "i", provider: "prov", sourceId: "routed" } });
    const routed = await prov.next((f) => f.requestId === "r");
    const { c } = await AhpClient.init(h, [ROOT, reg.session, reg.chat, routed.session], "auth-watch");
    const resource = { resource: "https://api.example.invalid", authorization_servers: ["https://as.example.invalid"] };
    be.send({ type: "notification", method: "auth/required", params: { channel: reg.session, resource, reason: "expired" } });
    assert.deepEqual(await c.note("auth/required", (p) => p.channel === reg.session), { channel: reg.session, resource, reason: "expired" });
    be.send({ type: "notification", method: "auth/required", params: { channel: reg.chat, resource } });
    await c.note("auth/required", (p) => p.channel === reg.chat);
    be.send({ type: "notification", method: "auth/required", params: { channel: sreg.session, resource } });
    assert.equal((await be.nextType("error")).code, "authority_error");
    be.send({ type: "notification", method: "auth/required", params: { channel: ROOT, resource } });
    assert.equal((await be.nextType("error")).code, "authority_error", "a session connection owns no provider");
    prov.send({ type: "notification", method: "auth/required", params: { channel: ROOT, resource } });
    await c.note("auth/required", (p) => p.channel === ROOT);
    prov.send({ type: "notification", method: "auth/required", params: { channel: routed.session, resource } });
    await c.note("auth/required", (p) => p.channel === routed.session);
    prov.send({ type: "notification", method: "auth/required", params: { channel: reg.session, resource } });
    assert.equal((await prov.nextType("error")).code, "authority_error");
    be.send({ type: "notification", method: "auth/required", params: { channel: reg.session, resource: { name: "no resource" } } });
    assert.equal((await be.nextType("error")).code, "validation_error");
    be.send({ type: "notification", method: "session/whatever", params: { channel: reg.session } });
    assert.equal((await be.nextType("error")).code, "validation_error");
    assert.equal(be.closed || prov.closed || stranger.closed, false);
    assert.deepEqual(c.invalid, []);
    c.close();
    for (const x of [be, stranger, prov]) x.close();
  }));

test("root_action: only root/configChanged from a v6 provider; merged or replaced into root config", () =>
  withHost(async (h) => {
    const { be } = await FakeBackend.provider(h, 6, ["cfg"]);
    const { c } = await AhpClient.init(h, [ROOT], "cfg-client");
    be.send({ type: "root_action", action: { type: "root/configChanged", config: { theme: "dark" } } });
    const a1 = await c.action((e) => e.action.type === "root/configChanged");
    assert.deepEqual(a1.action, { type: "root/configChanged", config: { theme: "dark" } });
    be.send({ type: "root_action", action: { type: "root/configChanged", config: { limit: 3 } } });
    await c.action((e) => e.action.type === "root/configChanged" && e.action.config.limit === 3);
    let snap = await c.request("subscribe", { channel: ROOT });
    assert.deepEqual(snap.result.snapshot.state.config.values, { theme: "dark", limit: 3 });
    be.send({ type: "root_action", action: { type: "root/configChanged", config: { only: true }, replace: true } });
    await c.action((e) => e.action.replace === true);
    snap = await c.request("subscribe", { channel: ROOT });
    assert.deepEqual(snap.result.snapshot.state.config.values, { only: true });
    be.send({ type: "root_action", action: { type: "root/agentsChanged", agents: [] } });
    assert.equal((await be.nextType("error")).code, "validation_error");
    const { be: s } = await FakeBackend.session(h, { protocolVersion: 6, sourceId: "x" });
    s.send({ type: "root_action", action: { type: "root/configChanged", config: {} } });
    assert.equal((await s.nextType("error")).code, "protocol_error");
    const { be: old } = await FakeBackend.provider(h, 5, ["old"]);
    old.send({ type: "root_action", action: { type: "root/configChanged", config: {} } });
    assert.equal((await old.nextType("error")).code, "unsupported_version");
    assert.deepEqual(c.invalid, []);
    c.close();
    for (const x of [be, s, old]) x.close();
  }));
