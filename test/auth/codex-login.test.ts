import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { connect } from "node:net";
import { join } from "node:path";
import { AuthStore } from "../../src/store/auth/auth-store.js";
import { CodexLogin, type LoginEvent, type LoginTerminalState } from "../../src/runtime/auth/codex-login.js";
import { CODEX_CLIENT_ID, codexOAuthConfigFromEnv, type CodexOAuthConfig } from "../../src/runtime/auth/codex-oauth.js";
import { CodexTokenRefresher, codexCredentialSource, CredentialUnavailableError } from "../../src/runtime/auth/credentials.js";
import { FakeOAuthIssuer } from "../fakes/fake-oauth.js";

async function home(): Promise<string> {
  const dir = join(await mkdtemp(join(tmpdir(), "berth-login-")), "home");
  await mkdir(dir, { mode: 0o700 });
  return dir;
}

interface Harness {
  login: CodexLogin;
  events: LoginEvent[];
  store: AuthStore;
  issuer: FakeOAuthIssuer;
  /** Resolves with the authorization URL once emitted. */
  url: Promise<string>;
}

async function harness(opts: { timeoutMs?: number; issuer?: FakeOAuthIssuer; store?: AuthStore; now?: () => number } = {}): Promise<Harness> {
  const issuer = opts.issuer ?? (await FakeOAuthIssuer.start());
  const store = opts.store ?? new AuthStore(await home());
  const events: LoginEvent[] = [];
  let gotUrl!: (u: string) => void;
  const url = new Promise<string>((r) => (gotUrl = r));
  const oauth: CodexOAuthConfig = { issuer: issuer.url, clientId: CODEX_CLIENT_ID, timeoutMs: 5000 };
  const login = await CodexLogin.prepare({
    store,
    oauth,
    port: 0,
    callbackTimeoutMs: opts.timeoutMs ?? 60_000,
    ...(opts.now !== undefined ? { now: opts.now } : {}),
    onEvent: (e) => {
      events.push(e);
      if (e.type === "progress" && e.state === "authorization_url") gotUrl(e.url);
    },
  });
  return { login, events, store, issuer, url };
}

const states = (events: LoginEvent[]): string[] => events.map((e) => (e.type === "terminal" ? `terminal:${e.state}` : e.state));
const HAPPY = ["authorization_url", "waiting", "callback_received", "callback_accepted"];

function assertTerminal(events: LoginEvent[], state: LoginTerminalState): void {
  const terminals = events.filter((e) => e.type === "terminal");
  assert.equal(terminals.length, 1);
  assert.deepEqual(terminals[0], { type: "terminal", state, cleanup_complete: true });
  assert.equal(events.at(-1)?.type, "terminal");
}

test("config: issuer from BERTH_OPENAI_AUTH_ISSUER, default auth.openai.com", () => {
  assert.equal(codexOAuthConfigFromEnv({}).issuer, "https://auth.openai.com");
  assert.equal(codexOAuthConfigFromEnv({ BERTH_OPENAI_AUTH_ISSUER: "http://127.0.0.1:9" }).issuer, "http://127.0.0.1:9");
});

test("loopback listener path: events in order, record committed, listener closed", async () => {
  const h = await harness();
  const done = h.login.run();
  const url = await h.url;
  const u = new URL(url);
  assert.equal(u.searchParams.get("client_id"), CODEX_CLIENT_ID);
  assert.equal(u.searchParams.get("scope"), "openid profile email offline_access");
  assert.equal(u.searchParams.get("code_challenge_method"), "S256");
  assert.match(u.searchParams.get("redirect_uri") ?? "", /^http:\/\/localhost:\d+\/auth\/callback$/);
  const event0 = h.events[0];
  assert.ok(event0?.type === "progress" && event0.state === "authorization_url" && event0.open_browser === true);
  const redirect = await h.issuer.authorize(url);
  const page = await fetch(redirect);
  assert.equal(page.status, 200);
  assert.doesNotMatch(await page.text(), /SECRETMARKER/);
  assert.equal(await done, "exchange_succeeded");
  assert.deepEqual(states(h.events), [...HAPPY, "terminal:exchange_succeeded"]);
  assertTerminal(h.events, "exchange_succeeded");
  const rec = (await h.store.read()).codex;
  assert.equal(rec?.account_id, "acct-SECRETMARKER-1");
  assert.match(rec?.refresh ?? "", /^refresh-SECRETMARKER/);
  await assert.rejects(fetch(redirect), "listener is closed after the terminal");
  assert.equal(h.login.submit("late-code-SECRETMARKER"), "unknown_login");
  assert.equal(h.login.cancel(), "unknown_login");
  assert.doesNotMatch(JSON.stringify(h.events.slice(1)), /SECRETMARKER/);
  await h.issuer.close();
});

test("manual path: final redirect URL accepted once; second submission is auth_busy", async () => {
  const h = await harness();
  const done = h.login.run();
  const redirect = await h.issuer.authorize(await h.url);
  assert.equal(h.login.submit(redirect), "submitted");
  assert.equal(h.login.submit(redirect), "auth_busy");
  assert.equal(await done, "exchange_succeeded");
  assert.deepEqual(states(h.events), [...HAPPY, "terminal:exchange_succeeded"]);
  await h.issuer.close();
});

test("manual path: bare code (state check skipped, still PKCE-bound)", async () => {
  const h = await harness();
  const done = h.login.run();
  const code = new URL(await h.issuer.authorize(await h.url)).searchParams.get("code") ?? "";
  assert.equal(h.login.submit(`  ${code}\n`), "submitted");
  assert.equal(await done, "exchange_succeeded");
  await h.issuer.close();
});

test("manual input bounds: empty and over 4096 bytes are invalid and do not consume the attempt", async () => {
  const h = await harness();
  const done = h.login.run();
  await h.url;
  assert.equal(h.login.submit("   "), "invalid_input");
  assert.equal(h.login.submit("x".repeat(4097)), "invalid_input");
  assert.equal(h.login.submit("é".repeat(2049)), "invalid_input", "bytes, not characters");
  assert.equal(h.login.cancel(), "cancellation_requested");
  assert.equal(await done, "cancelled");
  await h.issuer.close();
});

test("state mismatch fails the callback; nothing is stored", async () => {
  const h = await harness();
  const done = h.login.run();
  const redirect = new URL(await h.issuer.authorize(await h.url));
  redirect.searchParams.set("state", "forged-state");
  assert.equal(h.login.submit(redirect.href), "submitted");
  assert.equal(await done, "callback_failed");
  assert.deepEqual(states(h.events), ["authorization_url", "waiting", "callback_received", "terminal:callback_failed"]);
  assert.equal((await h.store.read()).codex, null);
  assert.equal(h.issuer.tokenRequests, 0);
  await h.issuer.close();
});

test("token endpoint failure is exchange_failed", async () => {
  const h = await harness();
  h.issuer.behaviour.tokenStatus = 500;
  const done = h.login.run();
  assert.equal(h.login.submit(await h.issuer.authorize(await h.url)), "submitted");
  assert.equal(await done, "exchange_failed");
  assert.deepEqual(states(h.events), [...HAPPY, "terminal:exchange_failed"]);
  await h.issuer.close();
});

test("cancellation while waiting ends with cancelled and closes the listener", async () => {
  const h = await harness();
  const done = h.login.run();
  await h.url;
  assert.equal(h.login.cancel(), "cancellation_requested");
  assert.equal(h.login.cancel(), "cancellation_requested");
  assert.equal(await done, "cancelled");
  assert.deepEqual(states(h.events), ["authorization_url", "waiting", "terminal:cancelled"]);
  await h.issuer.close();
});

test("dispose (EOF) cancels and waits for the terminal", async () => {
  const h = await harness();
  void h.login.run();
  await h.url;
  assert.equal(await h.login.dispose(), "cancelled");
  assertTerminal(h.events, "cancelled");
  await h.issuer.close();
});

test("callback timeout (injected short)", async () => {
  const h = await harness({ timeoutMs: 50 });
  assert.equal(await h.login.run(), "callback_timeout");
  assert.deepEqual(states(h.events), ["authorization_url", "waiting", "terminal:callback_timeout"]);
  await h.issuer.close();
});

test("login racing a logout commits nothing: auth_changed", async () => {
  const h = await harness();
  const done = h.login.run();
  const redirect = await h.issuer.authorize(await h.url);
  await h.store.logout("openai-codex"); // advances the generation observed at start
  assert.equal(h.login.submit(redirect), "submitted");
  assert.equal(await done, "auth_changed");
  assert.equal((await h.store.read()).codex, null);
  await h.issuer.close();
});

test("cancel during the exchange: the exchange finishes, nothing is committed", async () => {
  const h = await harness();
  let open!: () => void;
  h.issuer.behaviour.gate = new Promise<void>((r) => (open = r));
  const done = h.login.run();
  assert.equal(h.login.submit(await h.issuer.authorize(await h.url)), "submitted");
  while (h.issuer.tokenRequests === 0 && !h.events.some((e) => e.type === "progress" && e.state === "callback_accepted")) {
    await new Promise((r) => setImmediate(r));
  }
  assert.equal(h.login.cancel(), "cancellation_requested");
  open();
  assert.equal(await done, "cancelled");
  assert.equal((await h.store.read()).codex, null);
  await h.issuer.close();
});

test("Codex credential source refreshes before expiry with generation checks", async () => {
  const issuer = await FakeOAuthIssuer.start();
  const store = new AuthStore(await home());
  const oauth: CodexOAuthConfig = { issuer: issuer.url, clientId: CODEX_CLIENT_ID, timeoutMs: 5000 };
  await store.commitOAuth("openai-codex", 0, {
    type: "oauth",
    access: "access-SECRETMARKER-old",
    refresh: issuer.mintRefreshToken(),
    expires_at: Date.now() + 60_000, // inside the 5-minute margin
    account_id: "acct-SECRETMARKER-old",
  });
  const refresher = new CodexTokenRefresher({ store, oauth });
  const source = codexCredentialSource(refresher);
  const [a, b] = await Promise.all([source(), source()]);
  assert.equal(issuer.refreshRequests, 1, "one refresh in flight per process");
  assert.equal(a?.kind, "bearer");
  assert.match(a?.value ?? "", /^access-SECRETMARKER-\d+$/);
  assert.deepEqual(a, b);
  assert.equal(a?.accountId, "acct-SECRETMARKER-1");
  const snap = await store.read();
  assert.equal(snap.generation("openai-codex"), 2);
  assert.equal(snap.codex?.access, a?.value);
  // Fresh token: no refresh.
  await source();
  assert.equal(issuer.refreshRequests, 1);
  // Rejected refresh on an expired token: credential unavailable, refresh token cleared → needs login.
  await store.commitOAuth("openai-codex", 2, { ...snap.codex, refresh: "refresh-SECRETMARKER-unknown", expires_at: Date.now() - 1 });
  await assert.rejects(source(), CredentialUnavailableError);
  assert.equal((await store.read()).codex?.refresh, null);
  await store.logout("openai-codex");
  await assert.rejects(source(), CredentialUnavailableError);
  await issuer.close();
});

/** One raw HTTP/1.1 request to the loopback listener; resolves with its status line (a request `fetch` cannot send). */
function rawGet(port: number, target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, "127.0.0.1", () => sock.write(`GET ${target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`));
    let got = "";
    sock.on("data", (d: Buffer) => (got += d.toString("latin1")));
    sock.on("end", () => resolve(got.split("\r\n")[0] ?? ""));
    sock.on("error", reject);
  });
}

test("a request target the URL parser refuses is answered 400; the process and the login survive it", async () => {
  const h = await harness();
  const done = h.login.run();
  const url = await h.url;
  const port = Number(new URL(new URL(url).searchParams.get("redirect_uri") ?? "").port);
  // Absolute-form targets node:http accepts but `new URL` throws on: an uncaught throw here ended the process.
  for (const target of ["http://[", "http://a:b:c/auth/callback", "//[/auth/callback"]) {
    assert.match(await rawGet(port, target), /^HTTP\/1\.1 400 /, target);
  }
  // Not consumed: the real callback still wins.
  const page = await fetch(await h.issuer.authorize(url));
  assert.equal(page.status, 200);
  assert.equal(await done, "exchange_succeeded");
  assert.deepEqual(states(h.events), [...HAPPY, "terminal:exchange_succeeded"]);
  await h.issuer.close();
});

test("a token answer's lifetime counts for at most 30 days: exactly 30 days is kept, anything longer is cut to it", async () => {
  const now = 1_700_000_000_000;
  const DAY_S = 86_400;
  for (const [expiresIn, expected] of [
    [30 * DAY_S, now + 30 * DAY_S * 1000],
    [30 * DAY_S + 1, now + 30 * DAY_S * 1000],
    // Not finite once in milliseconds: the commit refused it and the login ended `storage_failed`.
    [1e306, now + 30 * DAY_S * 1000],
  ] as Array<[number, number]>) {
    const h = await harness({ now: () => now });
    h.issuer.behaviour.expiresIn = expiresIn;
    const done = h.login.run();
    assert.equal(h.login.submit(await h.issuer.authorize(await h.url)), "submitted");
    assert.equal(await done, "exchange_succeeded", String(expiresIn));
    assert.equal((await h.store.read()).codex?.expires_at, expected, String(expiresIn));
    await h.issuer.close();
  }
});

test("an access token that cannot be sent in a header is refused: login exchange_failed, refresh keeps the old record", async () => {
  for (const bad of ["access-SECRETMARKER\r\nx-injected: 1", "access SECRETMARKER", "access-SECRETMARKER-\u00e9"]) {
    const h = await harness();
    h.issuer.behaviour.accessToken = bad;
    const done = h.login.run();
    assert.equal(h.login.submit(await h.issuer.authorize(await h.url)), "submitted");
    assert.equal(await done, "exchange_failed", JSON.stringify(bad));
    assert.equal((await h.store.read()).codex, null, "nothing stored");
    // A refresh answered with it: the stored (still valid) token is used, the store is unchanged.
    const old = { type: "oauth" as const, access: "access-SECRETMARKER-old", refresh: h.issuer.mintRefreshToken(), expires_at: Date.now() + 60_000, account_id: null };
    await h.store.commitOAuth("openai-codex", 0, old);
    const refresher = new CodexTokenRefresher({ store: h.store, oauth: { issuer: h.issuer.url, clientId: CODEX_CLIENT_ID, timeoutMs: 5000 } });
    assert.deepEqual(await refresher.current(), old);
    assert.equal(h.issuer.refreshRequests, 1);
    assert.deepEqual((await h.store.read()).codex, old);
    await h.issuer.close();
  }
});
