/**
 * The Codex login's loopback callback listener ignores callbacks that are not this sign-in's: any local process can
 * request the callback URL, so a wrong or missing `state`, or a request carrying neither a code nor an error, is
 * answered 400 naming the cause and consumes nothing; the real redirect still completes the login (the login's own
 * time limit still applies). Real HTTP requests to the real listener, a loopback fake issuer behind it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuthStore } from "../../src/store/auth/auth-store.js";
import { CodexLogin, type LoginEvent } from "../../src/runtime/auth/codex-login.js";
import { CODEX_CLIENT_ID } from "../../src/runtime/auth/codex-oauth.js";
import { FakeOAuthIssuer } from "../fakes/fake-oauth.js";

async function start(timeoutMs = 60_000): Promise<{ login: CodexLogin; events: LoginEvent[]; issuer: FakeOAuthIssuer; store: AuthStore; url: string; done: Promise<string> }> {
  const issuer = await FakeOAuthIssuer.start();
  const dir = join(await mkdtemp(join(tmpdir(), "berth-login-")), "home");
  await mkdir(dir, { mode: 0o700 });
  const store = new AuthStore(dir);
  const events: LoginEvent[] = [];
  let gotUrl!: (u: string) => void;
  const url = new Promise<string>((r) => (gotUrl = r));
  const login = await CodexLogin.prepare({
    store,
    oauth: { issuer: issuer.url, clientId: CODEX_CLIENT_ID, timeoutMs: 5000 },
    port: 0,
    callbackTimeoutMs: timeoutMs,
    onEvent: (e) => {
      events.push(e);
      if (e.type === "progress" && e.state === "authorization_url") gotUrl(e.url);
    },
  });
  const done = login.run();
  return { login, events, issuer, store, url: await url, done };
}

const callbackBase = (authUrl: string): string => new URL(authUrl).searchParams.get("redirect_uri")!;

test("a callback with a wrong or missing state, or without a code, is answered 400 and the real one still wins", async () => {
  const h = await start();
  const base = callbackBase(h.url);
  const state = new URL(h.url).searchParams.get("state")!;
  const cases: Array<[string, RegExp]> = [
    [`?code=bogus-code&state=bogus-state`, /state does not match this sign-in/],
    [`?code=bogus-code&state=${state}x`, /state does not match this sign-in/],
    [`?code=bogus-code`, /has no state/],
    [`?error=access_denied&state=bogus`, /state does not match this sign-in/],
    [`?state=${state}`, /has neither a code nor an error/],
  ];
  for (const [query, cause] of cases) {
    const res = await fetch(base + query);
    assert.equal(res.status, 400, query);
    const body = await res.text();
    assert.match(body, cause, query);
    assert.match(body, /still waiting/, query);
    assert.ok(!body.includes(state), "the expected state is never echoed");
  }
  assert.equal(h.login.finished, false);
  assert.deepEqual(h.events.map((e) => (e.type === "progress" ? e.state : e.type)), ["authorization_url", "waiting"], "nothing consumed");
  // The browser's real redirect completes the login.
  const page = await fetch(await h.issuer.authorize(h.url));
  assert.equal(page.status, 200);
  assert.equal(await h.done, "exchange_succeeded");
  assert.equal((await h.store.read()).codex?.account_id, "acct-SECRETMARKER-1");
  await h.issuer.close();
});

test("the authorization server's own error (this sign-in's state) ends the login as callback_failed", async () => {
  const h = await start();
  const state = new URL(h.url).searchParams.get("state")!;
  const res = await fetch(`${callbackBase(h.url)}?error=access_denied&state=${state}`);
  assert.equal(res.status, 200);
  assert.equal(await h.done, "callback_failed");
  await h.issuer.close();
});

test("ignored callbacks do not extend the login's time limit", async () => {
  const h = await start(2000);
  assert.equal((await fetch(`${callbackBase(h.url)}?code=x&state=y`)).status, 400);
  assert.equal(await h.done, "callback_timeout");
  await h.issuer.close();
});
