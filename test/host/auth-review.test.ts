/**
 * Protected-resource authentication review (spec section of that name): `paratenic/authContext`
 * and the root `authenticate` command against a v6 backend whose MCP server asks for auth.
 * Credentials here are synthetic; no authorization service is contacted.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { AhpClient, FakeBackend, tempHome, withHost, type Json } from "./helpers.js";
import { TOOLS_SERVER } from "./mcp-helpers.js";
import { startHost, type HostHandle } from "../../src/protocols/host/host.js";
import { MAX_TOKEN_BYTES } from "../../src/protocols/host/auth-review.js";

const RESOURCE = "https://mcp.example.invalid/";
const authRequired = (scopes?: string[]) => ({
  kind: "authRequired",
  reason: "required",
  resource: { resource: RESOURCE, authorization_servers: ["https://as.example.invalid"] },
  ...(scopes ? { requiredScopes: scopes } : {}),
});

async function challenged(h: HostHandle, sourceId = "auth", scopes?: string[], version = 6): Promise<{ be: FakeBackend; reg: Json; target: Json }> {
  const { be, reg } = await FakeBackend.session(h, { protocolVersion: version, sourceId, mcpServers: [TOOLS_SERVER] });
  assert.equal(reg.type, "registered");
  be.send({ type: "event", session: reg.session, event: { type: "resource_action", action: { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state: authRequired(scopes) } } });
  be.send({ type: "ping", id: "state" });
  await be.next((f) => f.type === "pong" && f.id === "state");
  return { be, reg, target: { type: "mcp_server", session: reg.session, serverId: TOOLS_SERVER.id } };
}

async function review(c: AhpClient, target: Json): Promise<Json> {
  const r = await c.request("paratenic/authContext", { channel: "ahp-root://", resource: RESOURCE, target });
  assert.equal(r.error, undefined, JSON.stringify(r.error));
  return r.result;
}

test("authContext: review and required scopes (null, empty and nonempty are distinct)", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h);
    const none = await challenged(h, "none");
    const empty = await challenged(h, "empty", []);
    const some = await challenged(h, "some", ["read", "write"]);
    assert.equal((await review(c, none.target)).required_scopes, null);
    assert.deepEqual((await review(c, empty.target)).required_scopes, []);
    const r = await review(c, some.target);
    assert.deepEqual(r.required_scopes, ["read", "write"]);
    assert.match(r.review, /^v1\.[A-Za-z0-9_-]{43}$/);
    assert.equal((await review(c, some.target)).review, r.review, "stable while nothing changed");
    const other = await c.request("paratenic/authContext", { channel: "ahp-root://", resource: "https://elsewhere.invalid/", target: some.target });
    assert.equal(other.error.code, -32008);
    const tool = await c.request("paratenic/authContext", { channel: "ahp-root://", resource: RESOURCE, target: { type: "tool_call", session: some.reg.session, chat: some.reg.chat, turnId: "t", toolCallId: "x" } });
    assert.equal(tool.error.code, -32008);
    const bad = await c.request("paratenic/authContext", { channel: "ahp-root://", resource: RESOURCE, target: { type: "mcp_server", session: some.reg.session } });
    assert.equal(bad.error.code, -32602);
    assert.deepEqual(c.invalid, []);
    c.close();
    for (const x of [none, empty, some]) x.be.close();
  }));

test("reviewed authenticate: reviewed target and granted scopes reach the owner only; no state is synthesized", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h);
    const { be, reg, target } = await challenged(h, "a", ["read"]);
    const bystander = await challenged(h, "b", ["read"]);
    const { review: rv } = await review(c, target);
    const call = c.request("authenticate", { channel: "ahp-root://", resource: RESOURCE, token: "synthetic-token-1", scopes: ["read"], _meta: { paratenicAuth: { review: rv, target } } });
    const cmd = await be.nextType("command");
    assert.equal(cmd.session, reg.session);
    assert.deepEqual(cmd.command, { type: "authenticate", resource: RESOURCE, token: "synthetic-token-1", target, scopes: ["read"] });
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.deepEqual((await call).result, {});
    assert.equal(bystander.be.frames.filter((f) => f.type === "command").length, 0, "never distributed to another target");
    const snap = await c.request("subscribe", { channel: reg.session });
    assert.equal(snap.result.snapshot.state.customizations[0].state.kind, "authRequired", "acceptance does not synthesize Ready");
    // Without granted scopes the command carries none (required scopes are never invented).
    const call2 = c.request("authenticate", { resource: RESOURCE, token: "synthetic-token-2", _meta: { paratenicAuth: { review: rv, target } } });
    const cmd2 = await be.nextType("command");
    assert.equal(cmd2.command.scopes, undefined);
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: true });
    assert.deepEqual((await call2).result, {});
    assert.deepEqual(c.invalid, []);
    c.close();
    be.close();
    bystander.be.close();
  }));

test(`token bound: exactly ${MAX_TOKEN_BYTES} bytes is sent, one more is refused before delivery`, () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h);
    const { be, target } = await challenged(h);
    const { review: rv } = await review(c, target);
    const meta = { paratenicAuth: { review: rv, target } };
    const over = await c.request("authenticate", { resource: RESOURCE, token: "é".repeat(MAX_TOKEN_BYTES / 2) + "x", _meta: meta });
    assert.equal(over.error.code, -32602);
    assert.match(over.error.message, /64 KiB/);
    assert.ok(!JSON.stringify(over).includes("éé"), "the token is not echoed");
    const at = c.request("authenticate", { resource: RESOURCE, token: "é".repeat(MAX_TOKEN_BYTES / 2), _meta: meta });
    const cmd = await be.nextType("command");
    assert.equal(Buffer.byteLength(cmd.command.token as string), MAX_TOKEN_BYTES);
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.deepEqual((await at).result, {});
    assert.equal(be.frames.filter((f) => f.type === "command").length, 0, "the over-limit token was never sent");
    c.close();
    be.close();
  }));

test("a changed challenge or registration is refused before delivery", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h);
    const first = await challenged(h, "chg", ["read"]);
    const { review: rv } = await review(c, first.target);
    // Changed scopes.
    first.be.send({ type: "event", session: first.reg.session, event: { type: "resource_action", action: { type: "session/mcpServerStateChanged", id: TOOLS_SERVER.id, state: authRequired(["read", "admin"]) } } });
    first.be.send({ type: "ping", id: "p" });
    await first.be.next((f) => f.type === "pong");
    const r1 = await c.request("authenticate", { resource: RESOURCE, token: "t", _meta: { paratenicAuth: { review: rv, target: first.target } } });
    assert.equal(r1.error.data.reason, "review_changed");
    // Same challenge again, but a new registration (the backend reconnected).
    const { review: rv2 } = await review(c, first.target);
    first.be.close();
    const again = await challenged(h, "chg", ["read", "admin"]);
    assert.equal(again.reg.session, first.reg.session);
    const r2 = await c.request("authenticate", { resource: RESOURCE, token: "t", _meta: { paratenicAuth: { review: rv2, target: first.target } } });
    assert.equal(r2.error.data.reason, "review_changed");
    // A review for a different target is refused too.
    const r3 = await c.request("authenticate", { resource: RESOURCE, token: "t", _meta: { paratenicAuth: { review: rv2, target: { ...first.target, serverId: "other" } } } });
    assert.equal(r3.error.data.reason, "review_changed");
    assert.equal(again.be.frames.filter((f) => f.type === "command").length, 0);
    c.close();
    again.be.close();
  }));

test("legacy authenticate: one unambiguous target only; never the first match", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h);
    const none = await c.request("authenticate", { resource: RESOURCE, token: "t" });
    assert.equal(none.error.code, -32602);
    const one = await challenged(h, "one");
    const call = c.request("authenticate", { resource: RESOURCE, token: "legacy-token" });
    const cmd = await one.be.nextType("command");
    assert.deepEqual(cmd.command.target, { type: "mcp_server", session: one.reg.session, serverId: TOOLS_SERVER.id });
    one.be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.deepEqual((await call).result, {});
    const two = await challenged(h, "two");
    const amb = await c.request("authenticate", { resource: RESOURCE, token: "t" });
    assert.equal(amb.error.code, -32602);
    assert.match(amb.error.message, /several targets/);
    assert.equal(one.be.frames.filter((f) => f.type === "command").length + two.be.frames.filter((f) => f.type === "command").length, 0);
    c.close();
    one.be.close();
    two.be.close();
  }));

test("after admission: refusal is fixed text; loss is indeterminate with the command ID, never retried", () =>
  withHost(async (h) => {
    const { c } = await AhpClient.init(h);
    const { be, target } = await challenged(h, "out");
    const meta = async () => ({ paratenicAuth: { review: (await review(c, target)).review, target } });
    const refused = c.request("authenticate", { resource: RESOURCE, token: "t1", _meta: await meta() });
    const cmd = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: false, error: "upstream said: invalid_grant for user alice" });
    const r = await refused;
    assert.equal(r.error.message, "the backend refused the credential");
    assert.equal(r.error.data.outcome, "rejected");
    assert.ok(!JSON.stringify(r).includes("alice"));
    const lost = c.request("authenticate", { resource: RESOURCE, token: "t2", _meta: await meta() });
    const cmd2 = await be.nextType("command");
    be.close();
    const l = await lost;
    assert.deepEqual(l.error.data, { outcome: "indeterminate", commandId: cmd2.commandId });
    const back = await challenged(h, "out");
    const probe = await c.request("ping");
    assert.equal(probe.result, null);
    assert.equal(back.be.frames.filter((f) => f.type === "command").length, 0, "not retried after reconnection");
    c.close();
    back.be.close();
  }));

test("no token in the host checkpoint, logs or receipts", async () => {
  const home = tempHome();
  const logs: string[] = [];
  const h = await startHost({ home, log: (m) => logs.push(m) });
  const secret = "synthetic-SECRET-7f3a9c";
  try {
    const { c } = await AhpClient.init(h);
    const { be, target } = await challenged(h, "secret");
    const { review: rv } = await review(c, target);
    assert.ok(!rv.includes(secret));
    const call = c.request("authenticate", { resource: RESOURCE, token: secret, _meta: { paratenicAuth: { review: rv, target } } });
    const cmd = await be.nextType("command");
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    const res = await call;
    assert.ok(!JSON.stringify(res).includes(secret));
    const lost = c.request("authenticate", { resource: RESOURCE, token: secret, _meta: { paratenicAuth: { review: rv, target } } });
    await be.nextType("command");
    be.close();
    assert.ok(!JSON.stringify(await lost).includes(secret));
    assert.ok(!c.notes.some((n) => JSON.stringify(n).includes(secret)));
    c.close();
  } finally {
    await h.close();
  }
  for (const f of readdirSync(join(home, "host"))) {
    if (f.endsWith(".sock") || f.endsWith(".lock")) continue;
    let bytes: Buffer;
    try {
      bytes = readFileSync(join(home, "host", f));
    } catch {
      continue; // a directory
    }
    assert.ok(!bytes.includes(secret), `token found in host/${f}`);
  }
  assert.ok(!logs.some((l) => l.includes(secret)), "token found in the log");
});

test("provider targets: static protected resources on v6 provider_hello, reviewed and sent as a provider command", () =>
  withHost(async (h) => {
    const PROV_RES = "https://api.provider.invalid";
    const protectedResources = [{ resource: PROV_RES, resource_name: "Provider API", authorization_servers: ["https://as.example.invalid"], required: true }];
    const old = await FakeBackend.provider(h, 5, ["old"], { providers: [{ id: "old", protectedResources }] });
    assert.equal(old.reg.code, "validation_error");
    const { be } = await FakeBackend.provider(h, 6, ["prov"], { providers: [{ id: "prov", displayName: "Prov", protectedResources }] });
    const { c, result } = await AhpClient.init(h);
    const agent = (result.snapshots[0].state.agents as Json[]).find((a) => a.provider === "prov")!;
    assert.deepEqual(agent.protectedResources, protectedResources);
    const target = { type: "provider", provider: "prov" };
    const ctx = await c.request("paratenic/authContext", { channel: "ahp-root://", resource: PROV_RES, target });
    assert.equal(ctx.result.required_scopes, null);
    const call = c.request("authenticate", { resource: PROV_RES, token: "prov-token", scopes: ["read:user"], _meta: { paratenicAuth: { review: ctx.result.review, target } } });
    const cmd = await be.nextType("provider_command");
    assert.equal(cmd.provider, "prov");
    assert.deepEqual(cmd.command, { type: "authenticate", resource: PROV_RES, token: "prov-token", target, scopes: ["read:user"] });
    be.send({ type: "command_result", commandId: cmd.commandId, accepted: true });
    assert.deepEqual((await call).result, {});
    // Legacy: the one provider advertising it.
    const legacy = c.request("authenticate", { resource: PROV_RES, token: "legacy" });
    const cmd2 = await be.nextType("provider_command");
    assert.deepEqual(cmd2.command.target, target);
    be.send({ type: "command_result", commandId: cmd2.commandId, accepted: true });
    assert.deepEqual((await legacy).result, {});
    // A newer provider connection is a new registration: the old review no longer holds.
    const { be: be2 } = await FakeBackend.provider(h, 6, ["prov"], { providers: [{ id: "prov", displayName: "Prov", protectedResources }] });
    const stale = await c.request("authenticate", { resource: PROV_RES, token: "t", _meta: { paratenicAuth: { review: ctx.result.review, target } } });
    assert.equal(stale.error.data.reason, "review_changed");
    assert.equal(be2.frames.filter((f) => f.type === "provider_command").length, 0);
    assert.deepEqual(c.invalid, []);
    c.close();
    be2.close();
  }));
