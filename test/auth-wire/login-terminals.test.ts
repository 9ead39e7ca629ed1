/**
 * Login rules without an earlier test (issue 20 §4): the `storage_failed` and `internal_error` terminals, a taken
 * loopback port with manual submission, and a storage commit that wins the race against cancel. The first three
 * run through the spawned service (`internal_error` through the test-only fault seam `BERTH_OPENAI_AUTH_TEST_FAULT`);
 * the race runs in-process, where the commit can be held at a known point.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CodexLogin, type LoginEvent } from "../../src/runtime/auth/codex-login.js";
import { codexOAuthConfigFromEnv } from "../../src/runtime/auth/codex-oauth.js";
import { AuthStore, type OAuthRecord } from "../../src/store/auth/auth-store.js";
import { FakeOAuthIssuer } from "../fakes/fake-oauth.js";
import { loginService, progress, startLogin, terminal, waitFor } from "./wire-helpers.js";

test("a storage commit that fails ends the login storage_failed and commits nothing @req AUTH-LOGIN-09", async () => {
  const fake = await FakeOAuthIssuer.start();
  let open!: () => void;
  fake.behaviour.gate = new Promise<void>((r) => (open = r));
  const svc = await loginService(fake.url);
  try {
    const { loginId, url } = await startLogin(svc, "start-1");
    const redirect = await fake.authorize(url);
    const from = svc.lines.length;
    assert.equal((await svc.request("auth.login.callback", { login_id: loginId, input: redirect })).payload.status, "submitted");
    await waitFor(svc, progress("callback_accepted"), from);
    // While the token exchange is held, the shared store becomes unreadable.
    writeFileSync(join(svc.home, "auth.json"), "{ not json", { mode: 0o600 });
    open();
    const end = await waitFor(svc, terminal, from);
    assert.deepEqual(end.payload, { login_id: loginId, provider_id: "openai-codex", state: "storage_failed", cleanup_complete: true });
    assert.equal(readFileSync(join(svc.home, "auth.json"), "utf8"), "{ not json", "nothing was written over it");
    assert.ok(!svc.lines.join("\n").includes("SECRETMARKER") && !svc.stderr.includes("SECRETMARKER"));
    // The start ID is free again.
    assert.equal((await svc.request("capabilities", {}, {}, "start-1")).error, null);
  } finally {
    open();
    svc.kill();
    await fake.close();
  }
});

test("an unexpected fault inside the login ends it internal_error, fixed and quiet, and the service goes on @req AUTH-LOGIN-12", async () => {
  const fake = await FakeOAuthIssuer.start();
  const svc = await loginService(fake.url, { env: { BERTH_OPENAI_AUTH_TEST_FAULT: "after_exchange" } });
  try {
    const { loginId, url } = await startLogin(svc, "start-1");
    const redirect = await fake.authorize(url);
    const from = svc.lines.length;
    assert.equal((await svc.request("auth.login.callback", { login_id: loginId, input: redirect })).payload.status, "submitted");
    const end = await waitFor(svc, terminal, from);
    assert.deepEqual(end.payload, { login_id: loginId, provider_id: "openai-codex", state: "internal_error", cleanup_complete: true });
    // The fault came after a real token exchange: the worker held live tokens when it failed.
    assert.ok(fake.tokenRequests > 0, "the token exchange ran");
    const after = svc.lines.slice(from).map((l) => JSON.parse(l) as Record<string, any>);
    assert.deepEqual(
      after.filter((m) => m.event === "auth.login.progress").map((m) => m.payload.state),
      ["callback_received", "callback_accepted"],
    );
    assert.equal(after.filter(terminal).length, 1, "exactly one terminal");
    const wire = svc.lines.join("\n");
    assert.ok(!/injected|token exchange/i.test(wire), "no exception text on the wire");
    assert.ok(!wire.includes("SECRETMARKER") && !svc.stderr.includes("SECRETMARKER"), "no code or token on stdout/stderr");
    assert.ok(!/injected|token exchange/i.test(svc.stderr), "no exception text on stderr");
    // Nothing was committed, and the service keeps serving: the start ID is free, status answers, a new login starts.
    const st = await svc.request("auth.status", {});
    assert.equal(st.payload.providers.find((p: { provider_id: string }) => p.provider_id === "openai-codex").ready, false);
    assert.equal((await svc.request("capabilities", {}, {}, "start-1")).error, null);
    const again = await startLogin(svc, "start-2");
    assert.notEqual(again.loginId, loginId);
    const cancelFrom = svc.lines.length;
    assert.equal((await svc.request("auth.login.cancel", { login_id: again.loginId })).payload.status, "cancellation_requested");
    assert.equal((await waitFor(svc, terminal, cancelFrom)).payload.state, "cancelled");
  } finally {
    svc.kill();
    await fake.close();
  }
});

test("the loopback port taken: the login still starts and manual submission completes it @req AUTH-LOGIN-10", async () => {
  const fake = await FakeOAuthIssuer.start();
  const squatter = createServer((_q, res) => res.end("someone else"));
  await new Promise<void>((r) => squatter.listen(0, "127.0.0.1", r));
  const port = (squatter.address() as AddressInfo).port;
  const svc = await loginService(fake.url, { env: { BERTH_OPENAI_AUTH_CALLBACK_PORT: String(port) } });
  try {
    const { loginId, url } = await startLogin(svc, "start-1");
    assert.equal(new URL(url).searchParams.get("redirect_uri"), `http://localhost:${port}/auth/callback`);
    const redirect = await fake.authorize(url); // the browser would land on the squatter: the user pastes the URL
    const from = svc.lines.length;
    assert.equal((await svc.request("auth.login.callback", { login_id: loginId, input: redirect })).payload.status, "submitted");
    const end = await waitFor(svc, terminal, from);
    assert.equal(end.payload.state, "exchange_succeeded");
    const st = await svc.request("auth.status", {});
    assert.equal(st.payload.providers.find((p: { provider_id: string }) => p.provider_id === "openai-codex").ready, true);
  } finally {
    svc.kill();
    squatter.close();
    await fake.close();
  }
});

test("a storage commit that started before cancel finishes successfully @req AUTH-LOGIN-11", async () => {
  const fake = await FakeOAuthIssuer.start();
  const home = mkdtempSync(join(tmpdir(), "berth-race-"));
  let commitStarted!: () => void;
  const started = new Promise<void>((r) => (commitStarted = r));
  let releaseCommit!: () => void;
  const held = new Promise<void>((r) => (releaseCommit = r));
  class HeldStore extends AuthStore {
    override async commitOAuth(providerId: string, generation: number, record: OAuthRecord) {
      commitStarted();
      await held;
      return super.commitOAuth(providerId, generation, record);
    }
  }
  const store = new HeldStore(home);
  const events: LoginEvent[] = [];
  let urlSeen!: (u: string) => void;
  const urlP = new Promise<string>((r) => (urlSeen = r));
  const login = await CodexLogin.prepare({
    store,
    oauth: codexOAuthConfigFromEnv({ BERTH_OPENAI_AUTH_ISSUER: fake.url }),
    port: 0,
    onEvent: (e) => {
      events.push(e);
      if (e.type === "progress" && e.state === "authorization_url") urlSeen(e.url);
    },
  });
  try {
    const done = login.run();
    const redirect = await fake.authorize(await urlP);
    assert.equal(login.submit(redirect), "submitted");
    await started; // the exchange succeeded and the commit is under way
    assert.equal(login.cancel(), "cancellation_requested");
    releaseCommit();
    assert.equal(await done, "exchange_succeeded");
    assert.deepEqual(events.at(-1), { type: "terminal", state: "exchange_succeeded", cleanup_complete: true });
    assert.notEqual((await new AuthStore(home).read()).codex, null, "the credential was committed");
  } finally {
    releaseCommit();
    await login.dispose();
    await fake.close();
  }
});
