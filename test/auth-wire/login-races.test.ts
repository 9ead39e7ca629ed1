/**
 * Login races through the spawned service against the loopback fake issuer, with the token endpoint held
 * (a gate) so the login is provably mid-exchange: repeated callback, logout from another process, cancel.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeOAuthIssuer } from "../fakes/fake-oauth.js";
import { loginService, progress, startLogin, terminal, waitFor } from "./wire-helpers.js";
import { ServiceProcess } from "../helpers/service-process.js";

function gate(fake: FakeOAuthIssuer): () => void {
  let open!: () => void;
  fake.behaviour.gate = new Promise<void>((r) => (open = r));
  return open;
}

test("repeated callback is auth_busy; a logout in another process makes the login end auth_changed", async () => {
  // @req AUTH-BUSY-02 @req AUTH-RACE-01
  const fake = await FakeOAuthIssuer.start();
  const release = gate(fake);
  const a = await loginService(fake.url);
  let b: ServiceProcess | null = null;
  try {
    const { loginId, url } = await startLogin(a, "start-1");
    const redirect = await fake.authorize(url);
    const from = a.lines.length;
    const cb = await a.request("auth.login.callback", { login_id: loginId, input: redirect });
    assert.deepEqual(cb.payload, { login_id: loginId, status: "submitted" });
    await waitFor(a, progress("callback_accepted"), from);
    const again = await a.request("auth.login.callback", { login_id: loginId, input: redirect });
    assert.equal(again.error.code, "auth_busy");
    assert.ok(!JSON.stringify(again).includes("code-"), "callback input is never echoed");

    b = new ServiceProcess({ home: a.home, env: { BERTH_OPENAI_AUTH_ISSUER: fake.url } });
    await b.initialize();
    const out = await b.request("auth.logout", { provider_id: "openai-codex", confirmed: true });
    assert.deepEqual(out.payload, { provider_id: "openai-codex", status: "logged_out", removed: false, environment_unchanged: true });
    release();
    const end = await waitFor(a, terminal, from);
    assert.deepEqual(end.payload, { login_id: loginId, provider_id: "openai-codex", state: "auth_changed", cleanup_complete: true });
    assert.equal(end.request_id, "start-1");
    const st = await a.request("auth.status", {});
    assert.equal(st.payload.providers.find((p: any) => p.provider_id === "openai-codex").readiness, "missing");
  } finally {
    release();
    a.kill();
    b?.kill();
    await fake.close();
  }
});

test("cancel during the token exchange ends cancelled and commits nothing", async () => {
  // @req AUTH-CANCEL-01
  const fake = await FakeOAuthIssuer.start();
  const release = gate(fake);
  const svc = await loginService(fake.url);
  try {
    const { loginId, url } = await startLogin(svc, "start-1");
    const redirect = await fake.authorize(url);
    const from = svc.lines.length;
    await svc.request("auth.login.callback", { login_id: loginId, input: redirect });
    await waitFor(svc, progress("callback_accepted"), from);
    const c = await svc.request("auth.login.cancel", { login_id: loginId });
    assert.deepEqual(c.payload, { login_id: loginId, status: "cancellation_requested" });
    release();
    const end = await waitFor(svc, terminal, from);
    assert.equal(end.payload.state, "cancelled");
    const st = await svc.request("auth.status", {});
    assert.equal(st.payload.providers.find((p: any) => p.provider_id === "openai-codex").readiness, "missing");
    svc.end();
    assert.equal((await svc.exited).code, 0);
  } finally {
    release();
    svc.kill();
    await fake.close();
  }
});
