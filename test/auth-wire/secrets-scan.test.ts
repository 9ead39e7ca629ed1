/**
 * Secrets scan: one service session driven with marker credentials (every key, token, code and account ID
 * contains SECRETMARKER) through login (loopback and manual), status, catalogs, configuration, a turn when the
 * turn family is available, and logout. Fails if a marker appears in stdout, stderr or any file under
 * MC_HOME/sessions.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { FakeOAuthIssuer } from "../fakes/fake-oauth.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { loginService, progress, startLogin, terminal, waitFor } from "./wire-helpers.js";

const MARKER = "SECRETMARKER";

function filesUnder(dir: string, out: string[] = []): string[] {
  if (!existsSync(dir)) return out;
  for (const n of readdirSync(dir)) {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) filesUnder(p, out);
    else out.push(p);
  }
  return out;
}

test("no credential marker reaches stdout, stderr or session files", { timeout: 60_000 }, async () => {
  // @req AUTH-SECRETS-01
  const issuer = await FakeOAuthIssuer.start();
  const provider = await startFakeProvider();
  const svc = await loginService(issuer.url, {
    env: {
      ANTHROPIC_API_KEY: `sk-ant-${MARKER}-env`,
      ANTHROPIC_BASE_URL: provider.baseUrl,
      BERTH_OPENAI_CODEX_BASE_URL: provider.baseUrl,
    },
  });
  try {
    // Login through the loopback listener.
    let from = svc.lines.length;
    const first = await startLogin(svc, "login-1");
    const res = await fetch(await issuer.authorize(first.url));
    await res.text();
    assert.equal((await waitFor(svc, terminal, from)).payload.state, "exchange_succeeded");
    assert.ok(readFileSync(join(svc.home, "auth.json"), "utf8").includes(MARKER), "the store holds the marker tokens (scan is meaningful)");

    // Manual callback with the full redirect URL (it carries a marker code), then a repeated/unknown submission.
    from = svc.lines.length;
    const second = await startLogin(svc, "login-2");
    const redirect = await issuer.authorize(second.url);
    assert.ok(redirect.includes(MARKER));
    await svc.request("auth.login.callback", { login_id: second.loginId, input: redirect });
    await waitFor(svc, progress("callback_received"), from);
    assert.equal((await waitFor(svc, terminal, from)).payload.state, "exchange_succeeded");
    const unknown = await svc.request("auth.login.callback", { login_id: second.loginId, input: `code-${MARKER}-late` });
    assert.equal(unknown.error.code, "unknown_login");

    assert.equal((await svc.request("status", {})).payload.provider_auth_ready, true);
    await svc.request("auth.status", {});
    assert.equal((await svc.request("catalog.refresh", { provider_id: "anthropic" })).payload?.state, "fresh_cache");
    await svc.request("catalog.refresh", { provider_id: "openai-codex" });
    await svc.request("catalog.models", { provider_id: "anthropic" });
    await svc.request("catalog.providers", {});
    const set = await svc.request("config.set", { scope: "global", selection: { provider_id: "anthropic", model_id: "fake-model" } });
    assert.equal(set.payload?.persisted, true);
    await svc.request("config.get", {});

    // A turn, when the turn family is wired (it writes the session files scanned below).
    const created = await svc.request("session.create", {});
    const turn = await svc.request("turn.start", { prompt: "Say hello." }, { session_id: created.payload?.session_id });
    if (turn.error === null) await waitFor(svc, (m) => m.event === "turn.terminal");

    for (const provider_id of ["openai-codex", "anthropic"]) {
      const out = await svc.request("auth.logout", { provider_id, confirmed: true });
      assert.equal(out.payload.status, "logged_out");
    }
    svc.end();
    assert.equal((await svc.exited).code, 0);

    const leaks: string[] = [];
    svc.lines.forEach((l, i) => l.includes(MARKER) && leaks.push(`stdout line ${i + 1}`));
    if (svc.stderr.includes(MARKER)) leaks.push("stderr");
    for (const f of filesUnder(join(svc.home, "sessions"))) if (readFileSync(f).includes(MARKER)) leaks.push(f);
    assert.deepEqual(leaks, []);
  } finally {
    svc.kill();
    await issuer.close();
    await provider.close();
  }
});
