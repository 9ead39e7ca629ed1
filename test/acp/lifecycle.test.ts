/**
 * `berth acp` handshake and session-independent methods, driven by the SDK client over stdio with every frame
 * schema-checked: version negotiation, the initialization gate, parse errors, authenticate/logout, session/list.
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { FakeOAuthIssuer } from "../fakes/fake-oauth.js";
import { BERTH_BIN } from "../helpers/paths.js";
import { AcpAgentProcess, type AcpRig, type Frame, withAcpRig } from "./harness.js";

let rig: AcpRig;
withAcpRig((r) => (rig = r));

it("berth acp --help exits 0 and prints usage on stdout", () => {
  const r = spawnSync(process.execPath, [BERTH_BIN, "acp", "--help"], { encoding: "utf8" });
  assert.equal(r.status, 0);
  assert.match(r.stdout, /usage: berth acp/);
  const bad = spawnSync(process.execPath, [BERTH_BIN, "acp", "--bogus"], { encoding: "utf8" });
  assert.equal(bad.status, 2);
  assert.equal(bad.stdout, "");
});

it("answers protocolVersion 1 to a client asking for 1 or 2, and advertises what it implements", async () => {
  for (const asked of [1, 2]) {
    const p = rig.spawn();
    const init = await p.agent.request("initialize", { protocolVersion: asked, clientCapabilities: {} });
    assert.equal(init.protocolVersion, 1);
    assert.equal(init.agentCapabilities?.loadSession, true);
    assert.deepEqual(init.agentCapabilities?.sessionCapabilities, { list: {}, resume: {}, close: {} });
    assert.deepEqual(init.agentCapabilities?.mcpCapabilities, { http: false, sse: false });
    assert.equal(init.agentInfo?.name, "berth");
    assert.deepEqual(init.authMethods?.map((m) => m.id), ["openai-codex"]);
    assert.deepEqual(p.invalid, []);
    assert.deepEqual(await p.end(), { code: 0, signal: null });
  }
});

it("rejects requests before initialize with -32600 and unparsable lines with -32700, then keeps serving", async () => {
  const p = rig.spawn();
  await assert.rejects(p.agent.request("session/list", {}), (e: acp.RequestError) => e.code === -32600);
  p.child.stdin.write("{not json\n");
  await p.until(() => p.received.some((f) => f["error"]?.code === -32700 && f["id"] === null), "-32700");
  const init = await p.initialize();
  assert.equal(init.protocolVersion, 1);
  const listed = await p.agent.request("session/list", {});
  assert.deepEqual(listed.sessions, []);
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("requests pipelined behind initialize in one write are answered after it, not refused", async () => {
  const p = rig.spawn();
  const lines = [
    { jsonrpc: "2.0", id: 101, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } },
    { jsonrpc: "2.0", id: 102, method: "session/new", params: { cwd: p.cwd, mcpServers: [] } },
    { jsonrpc: "2.0", id: 103, method: "session/list", params: {} },
  ];
  p.child.stdin.write(lines.map((l) => JSON.stringify(l) + "\n").join(""));
  const answer = (id: number): Frame | undefined => p.received.find((f) => f["id"] === id && f["method"] === undefined);
  await p.until(() => answer(101) !== undefined && answer(102) !== undefined && answer(103) !== undefined, "three answers");
  assert.equal(answer(101)!["result"]?.protocolVersion, 1, JSON.stringify(answer(101)));
  const sessionId = answer(102)!["result"]?.sessionId as string | undefined;
  assert.equal(typeof sessionId, "string", JSON.stringify(answer(102)));
  assert.ok(Array.isArray(answer(103)!["result"]?.sessions), JSON.stringify(answer(103)));
  // initialize is answered first; the others in whatever order they finish (JSON-RPC lets a server answer so).
  assert.equal(p.received.find((f) => [101, 102, 103].includes(f["id"] as number) && f["method"] === undefined)?.["id"], 101);
  // Written raw, these requests are unknown to the harness's SDK client: only that may be reported about them.
  assert.deepEqual(p.invalid.filter((x) => !x.startsWith("response to unknown id")), []);
  await p.end();
});

it("authenticate refuses an unknown method; logout removes the credentials Berth stored", async () => {
  const p = rig.spawn();
  await p.initialize();
  await assert.rejects(p.agent.request("authenticate", { methodId: "nope" }), (e: acp.RequestError) => e.code === -32602);
  const authFile = join(rig.home, "auth.json");
  writeFileSync(authFile, JSON.stringify({ version: 1, generations: {}, records: { anthropic: { type: "api_key", key: "sk-test-logout" } } }), { mode: 0o600 });
  assert.deepEqual(await p.agent.request("logout", {}), {});
  assert.doesNotMatch(readFileSync(authFile, "utf8"), /sk-test-logout/);
  assert.deepEqual(p.invalid, []);
  await p.end();
});

it("authenticate runs the ChatGPT sign-in: the URL goes to stderr, the login lands in the auth store", async () => {
  const issuer = await FakeOAuthIssuer.start();
  const home = mkdtempSync(join(tmpdir(), "berth-acp-auth-"));
  try {
    const p = new AcpAgentProcess({ home, env: { BERTH_OPENAI_AUTH_ISSUER: issuer.url, BERTH_OPENAI_AUTH_CALLBACK_PORT: "0" } });
    await p.initialize();
    const auth = p.agent.request("authenticate", { methodId: "openai-codex" });
    const url = await p.until(() => /sign in at (\S+)/.exec(p.stderr)?.[1], "the sign-in URL");
    // The user's browser: the fake issuer consents at once and redirects to Berth's loopback callback.
    const browser = await fetch(url);
    assert.equal(browser.status, 200);
    assert.deepEqual(await auth, {});
    const stored = readFileSync(join(home, "auth.json"), "utf8");
    assert.match(stored, /openai-codex/);
    assert.doesNotMatch(p.stderr, /SECRETMARKER/, "no token or code reaches stderr");
    assert.deepEqual(p.invalid, []);
    await p.end();
  } finally {
    await issuer.close();
  }
});
