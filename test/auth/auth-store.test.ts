import { test } from "node:test";
import assert from "node:assert/strict";
import { runChild } from "../helpers/run-child.js";
import { chmod, mkdtemp, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuthStorageError, AuthStore, type OAuthRecord } from "../../src/store/auth/auth-store.js";
import { resolveHome } from "../../src/store/home.js";
import { authStatus, providerAuthReady } from "../../src/runtime/auth/readiness.js";
import { anthropicCredentialSource, customCredentialSource, CredentialUnavailableError } from "../../src/runtime/auth/credentials.js";

async function home(): Promise<string> {
  const dir = join(await mkdtemp(join(tmpdir(), "berth-auth-")), "home");
  await mkdir(dir, { mode: 0o700 });
  return dir;
}

const rec = (n: number, refresh: string | null = `refresh-SECRETMARKER-${n}`): OAuthRecord => ({
  type: "oauth",
  access: `access-SECRETMARKER-${n}`,
  refresh,
  expires_at: Date.now() + 3600_000,
  account_id: `acct-SECRETMARKER-${n}`,
});

test("resolveHome: MC_HOME, then BERTH_HOME, then ~/.berth", () => {
  assert.equal(resolveHome({ MC_HOME: "/a", BERTH_HOME: "/b" }), "/a");
  assert.equal(resolveHome({ MC_HOME: "", BERTH_HOME: "/b" }), "/b");
  assert.equal(resolveHome({}, () => "/h"), "/h/.berth");
});

test("auth file is 0600, home stays 0700; records and generations", async () => {
  const h = await home();
  const store = new AuthStore(h);
  assert.equal((await store.read()).generation("openai-codex"), 0);
  await store.setApiKey("anthropic", "sk-ant-SECRETMARKER-1");
  assert.equal((await stat(store.path)).mode & 0o777, 0o600);
  assert.equal((await stat(h)).mode & 0o777, 0o700);
  const snap = await store.read();
  assert.equal(snap.anthropic?.key, "sk-ant-SECRETMARKER-1");
  assert.equal(snap.generation("anthropic"), 1);
});

test("logout advances the generation even without a record and preserves other records", async () => {
  const store = new AuthStore(await home());
  await store.setApiKey("anthropic", "key-SECRETMARKER");
  assert.deepEqual(await store.logout("openai-codex"), { removed: false });
  assert.equal((await store.read()).generation("openai-codex"), 1);
  assert.equal((await store.read()).anthropic?.key, "key-SECRETMARKER");
  assert.deepEqual(await store.logout("anthropic"), { removed: true });
  assert.equal((await store.read()).anthropic, null);
});

test("commitOAuth only against the observed generation; fresh login replaces the whole record", async () => {
  const store = new AuthStore(await home());
  const g0 = (await store.read()).generation("openai-codex");
  assert.equal(await store.commitOAuth("openai-codex", g0, rec(1)), "committed");
  // a second login that observed g0 lost the race
  assert.equal(await store.commitOAuth("openai-codex", g0, rec(2)), "auth_changed");
  assert.equal((await store.read()).codex?.access, "access-SECRETMARKER-1");
  // login without refresh token: nothing inherited from the previous account
  assert.equal(await store.commitOAuth("openai-codex", g0 + 1, rec(3, null)), "committed");
  assert.equal((await store.read()).codex?.refresh, null);
  assert.equal((await store.read()).codex?.account_id, "acct-SECRETMARKER-3");
});

test("malformed or unreadable storage is a typed error without contents", async () => {
  const h = await home();
  const store = new AuthStore(h);
  await writeFile(store.path, "{ SECRETMARKER not json", { mode: 0o600 });
  await assert.rejects(store.read(), (e: unknown) => e instanceof AuthStorageError && !e.message.includes("SECRETMARKER") && !e.message.includes(h));
  await assert.rejects(store.logout("anthropic"), AuthStorageError);
  assert.equal(await readFile(store.path, "utf8"), "{ SECRETMARKER not json", "malformed store is never overwritten");
  await writeFile(store.path, JSON.stringify({ version: 1, generations: {}, records: { anthropic: { type: "oauth" } } }));
  await assert.rejects(store.read(), AuthStorageError);
  if (process.getuid?.() !== 0) {
    await writeFile(store.path, JSON.stringify({ version: 1, generations: {}, records: {} }));
    await chmod(store.path, 0o000);
    await assert.rejects(store.read(), (e: unknown) => e instanceof AuthStorageError && e.reason === "unreadable");
  }
});

test("readiness: codex oauth, anthropic env vs store, custom env/none; never values or names", async () => {
  const store = new AuthStore(await home());
  const settings = {
    providers: {
      ollama: { api: "openai-chat" as const, base_url: "http://127.0.0.1:1/v1", auth: "none" as const, models: [] },
      keyed: { api: "openai-chat" as const, base_url: "http://127.0.0.1:1/v1", api_key_env: "KEYED_KEY", models: [] },
    },
  };
  let st = await authStatus(store, settings, {});
  assert.deepEqual(st.map((p) => [p.provider_id, p.auth_method, p.source, p.readiness, p.ready]), [
    ["anthropic", "api_key", "none", "missing", false],
    ["keyed", "api_key", "none", "missing", false],
    ["ollama", "none", "none", "ready", true],
    ["openai-codex", "oauth", "none", "missing", false],
  ]);
  await store.setApiKey("anthropic", "key-SECRETMARKER-store");
  await store.commitOAuth("openai-codex", 0, { ...rec(1, null), expires_at: Date.now() - 1000 });
  st = await authStatus(store, settings, { ANTHROPIC_API_KEY: "key-SECRETMARKER-env", KEYED_KEY: "key-SECRETMARKER-k" });
  assert.deepEqual(st.map((p) => [p.provider_id, p.source, p.readiness]), [
    ["anthropic", "environment", "ready"],
    ["keyed", "environment", "ready"],
    ["ollama", "none", "ready"],
    ["openai-codex", "shared_store", "needs_login"],
  ]);
  assert.doesNotMatch(JSON.stringify(st), /SECRETMARKER|KEYED_KEY|ANTHROPIC_API_KEY/);
  assert.equal(await providerAuthReady(store, settings, {}, "anthropic"), true);
  assert.equal(await providerAuthReady(store, settings, {}, "openai-codex"), false);
  assert.equal(await providerAuthReady(store, settings, {}, "unknown-provider"), false);
  await store.commitOAuth("openai-codex", 1, { ...rec(2), expires_at: Date.now() - 1000 });
  assert.equal(await providerAuthReady(store, settings, {}, "openai-codex"), true, "refreshable counts as ready");
});

test("credential sources: env wins and is re-read per request; store after logout; custom env/none", async () => {
  const store = new AuthStore(await home());
  const env: Record<string, string | undefined> = {};
  const src = anthropicCredentialSource(env, store);
  await assert.rejects(src(), CredentialUnavailableError);
  await store.setApiKey("anthropic", "key-SECRETMARKER-store");
  assert.deepEqual(await src(), { kind: "api_key", value: "key-SECRETMARKER-store" });
  env["ANTHROPIC_API_KEY"] = "key-SECRETMARKER-env";
  assert.deepEqual(await src(), { kind: "api_key", value: "key-SECRETMARKER-env" });
  env["ANTHROPIC_API_KEY"] = "";
  await store.logout("anthropic");
  await assert.rejects(src(), CredentialUnavailableError);
  const none = customCredentialSource({ api: "openai-chat", base_url: "http://127.0.0.1:1", auth: "none", models: [] }, env);
  assert.equal(await none(), null);
  const keyed = customCredentialSource({ api: "openai-chat", base_url: "http://127.0.0.1:1", api_key_env: "X_KEY", models: [] }, env);
  await assert.rejects(keyed(), CredentialUnavailableError);
  env["X_KEY"] = "key-SECRETMARKER-x";
  assert.deepEqual(await keyed(), { kind: "api_key", value: "key-SECRETMARKER-x" });
});

const storeModule = new URL("../../src/store/auth/auth-store.js", import.meta.url).href;


test("two processes writing auth concurrently lose nothing", async () => {
  const h = await home();
  const script = `
    const { AuthStore } = await import(${JSON.stringify(storeModule)});
    const [home, tag] = process.argv.slice(1);
    const store = new AuthStore(home);
    for (let i = 0; i < 15; i++) {
      await store.setApiKey(tag + "-" + i, "key-SECRETMARKER-" + tag + i);
      await store.logout("shared");
    }`;
  await Promise.all([runChild(script, [h, "p1"]), runChild(script, [h, "p2"])]);
  const store = new AuthStore(h);
  const snap = await store.read();
  assert.equal(snap.generation("shared"), 30);
  for (const tag of ["p1", "p2"]) for (let i = 0; i < 15; i++) assert.ok(snap.has(`${tag}-${i}`), `${tag}-${i} kept`);
  assert.equal((await stat(store.path)).mode & 0o777, 0o600);
});

test("status readiness follows the reloaded effective provider", async () => {
  const h = await home();
  const { SettingsStore } = await import("../../src/store/settings/settings-store.js");
  const { statusProviderAuthReady } = await import("../../src/runtime/auth/readiness.js");
  const env: Record<string, string | undefined> = {};
  const settings = new SettingsStore({ home: h, projectDir: h, env });
  const store = new AuthStore(h);
  assert.equal(await statusProviderAuthReady(settings, store, env), false);
  env["ANTHROPIC_API_KEY"] = "key-SECRETMARKER";
  assert.equal(await statusProviderAuthReady(settings, store, env), true);
  env["MC_PROVIDER"] = "openai-codex";
  assert.equal(await statusProviderAuthReady(settings, store, env), false);
  await writeFile(join(h, "settings.json"), "{bad");
  await assert.rejects(statusProviderAuthReady(settings, store, env));
});
