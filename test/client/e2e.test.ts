/**
 * The client against the real spawned `berth service` and the loopback fake provider (no credentials, loopback only).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceError, spawnService, type ServiceHandle } from "../../src/client/app-service/index.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN } from "../helpers/paths.js";

export function isolatedEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("MC_") && !k.startsWith("BERTH_") && !k.includes("API_KEY")) env[k] = v;
  return { ...env, MC_HOME: home, BERTH_OPENAI_AUTH_CALLBACK_PORT: "0", ...extra };
}

export function fakeHome(port: number): string {
  const home = mkdtempSync(join(tmpdir(), "berth-client-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `http://127.0.0.1:${port}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }));
  return home;
}

describe("client e2e against berth service", () => {
  let fake: FakeProvider;
  let svc: ServiceHandle;
  before(async () => {
    fake = await startFakeProvider();
    const home = fakeHome(fake.port);
    svc = spawnService({ bin: BERTH_BIN, env: isolatedEnv(home, { MC_PROVIDER: "fake", MC_MODEL: "fake-model" }), cwd: mkdtempSync(join(tmpdir(), "berth-cwd-")) });
    await svc.client.initialize();
  });
  after(async () => {
    await svc.close();
    await fake.close();
  });

  it("preflight accepts the real advertisement; status reports a ready provider", async () => {
    const p = svc.client.profile!;
    assert.equal(p.protocolVersion, 1);
    assert.equal(p.limits.max_record_bytes, 65536);
    assert.deepEqual(await svc.client.status(), { service: "ready", provider_auth_ready: true });
  });

  it("sessions: create, open, list, replay, close", async () => {
    const s = await svc.client.createSession();
    assert.equal(s.status, "open");
    assert.ok(svc.client.attached.has(s.session_id));
    assert.equal((await svc.client.openSession(s.session_id)).status, "open");
    const page = await svc.client.listSessions({ limit: 32 });
    assert.ok(page.sessions.some((x) => x.session_id === s.session_id));
    const pages = [];
    for await (const p of svc.client.replay(s.session_id)) pages.push(p);
    assert.equal(pages.length, 1);
    assert.deepEqual(pages[0]!.events, []);
    assert.equal((await svc.client.closeSession(s.session_id)).status, "closed");
    assert.ok(!svc.client.attached.has(s.session_id));
    await assert.rejects(svc.client.openSession("../etc"), (e: unknown) => e instanceof ServiceError);
  });

  it("a turn streams deltas and settles on the terminal's assistant_text; replay holds the conversation", async () => {
    const turn = await svc.client.startTurn({ prompt: "hello client" });
    let live = "";
    for await (const u of turn) if (u.type === "delta") live += u.text;
    const t = await turn.result;
    assert.equal(t.status, "completed");
    assert.equal(t.assistant_text, "echo: hello client");
    assert.equal(live, t.assistant_text);
    const items = [];
    for await (const p of svc.client.replay(turn.sessionId)) items.push(...p.events);
    assert.deepEqual(items.map((e) => (e.kind === "message" ? `${e.role}:${e.text}` : e.kind)), ["user:hello client", "assistant:echo: hello client", "terminal"]);
    // Resume: a second turn on the same session.
    const again = await svc.client.startTurn({ prompt: "second", sessionId: turn.sessionId });
    assert.equal((await again.result).assistant_text, "echo: second");
  });

  it("cancelTurn ends a running turn as cancelled with its partial text", async () => {
    fake.script([{ steps: [{ text: "partial answer" }, { waitForAbort: true }] }]);
    const turn = await svc.client.startTurn({ prompt: "slow please" });
    const it0 = turn[Symbol.asyncIterator]();
    let first = await it0.next();
    while (!first.done && first.value.type !== "delta") first = await it0.next();
    assert.equal((await turn.cancel() as { status: string }).status, "cancellation_requested");
    while (!(await it0.next()).done);
    const t = await turn.result;
    assert.equal(t.status, "cancelled");
    assert.equal(t.assistant_text, "partial answer");
    await assert.rejects(svc.client.cancelTurn(turn.turnId), (e: unknown) => e instanceof ServiceError && e.code === "unknown_turn");
  });

  it("catalogs and config: refresh, list models, select with config.set", async () => {
    const providers = await svc.client.catalogProviders();
    assert.ok(providers.entries.some((e) => e.provider_id === "fake"));
    assert.equal((await svc.client.catalogRefresh("fake")).state, "fresh_cache");
    const models = await svc.client.catalogModels("fake");
    assert.deepEqual(models.entries.map((m) => m.model_id), ["fake-model"]);
    const set = await svc.client.configSet({ scope: "project", selection: { provider_id: "fake", model_id: "fake-model" } });
    assert.equal(set.persisted, true);
    assert.deepEqual((await svc.client.configGet()).selection, { provider_id: "fake", model_id: "fake-model" });
  });

  it("auth: status, login progress with the authorization URL then cancel, logout", async () => {
    const st = await svc.client.authStatus();
    assert.equal(st.providers.find((p) => p.provider_id === "fake")?.ready, true);
    const login = await svc.client.startLogin("openai-codex");
    const it0 = login[Symbol.asyncIterator]();
    const first = await it0.next();
    assert.equal(first.done, false);
    assert.equal(first.value.state, "authorization_url");
    assert.match((first.value as { url: string }).url, /^https?:\/\//);
    await login.cancel();
    while (!(await it0.next()).done);
    const t = await login.result;
    assert.equal(t.state, "cancelled");
    assert.equal(t.cleanup_complete, true);
    const out = await svc.client.logout("anthropic");
    assert.equal(out.status, "logged_out");
  });
});
