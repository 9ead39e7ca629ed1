import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, mkdir, readdir, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuthStore } from "../../src/store/auth/auth-store.js";
import { CatalogCache, page } from "../../src/store/catalog/cache.js";
import { CatalogReader } from "../../src/store/catalog/catalog-reader.js";
import { isSafeId, looksSecret, sanitizeLabel } from "../../src/store/catalog/ids.js";
import { SECRET_SHAPES } from "../../src/core/text-policy.js";
import { SettingsStore } from "../../src/store/settings/settings-store.js";
import { CatalogRefresher } from "../../src/runtime/auth/catalog-refresh.js";
import { CODEX_CLIENT_ID } from "../../src/runtime/auth/codex-oauth.js";
import { CodexTokenRefresher } from "../../src/runtime/auth/credentials.js";
import { FakeModelsServer } from "../fakes/fake-models.js";

interface World {
  home: string;
  env: Record<string, string | undefined>;
  settings: SettingsStore;
  cache: CatalogCache;
  store: AuthStore;
  reader: CatalogReader;
  refresher: CatalogRefresher;
  /** The same refresher with a short deadline, for the refresh that must time out (a loaded machine gets `refresher`'s long one). */
  quickRefresher: CatalogRefresher;
  clock: { now: number };
}

async function world(env: Record<string, string | undefined> = {}, timeoutMs = 60_000): Promise<World> {
  const root = await mkdtemp(join(tmpdir(), "berth-cat-"));
  const home = join(root, "home");
  await mkdir(home, { mode: 0o700 });
  await mkdir(join(root, "proj"));
  const clock = { now: Date.now() };
  const settings = new SettingsStore({ home, projectDir: join(root, "proj"), env });
  const cache = new CatalogCache({ home, now: () => clock.now, ttlMs: 60_000 });
  const store = new AuthStore(home);
  const codex = new CodexTokenRefresher({ store, oauth: { issuer: "http://127.0.0.1:9", clientId: CODEX_CLIENT_ID, timeoutMs: 1000 } });
  return {
    home, env, settings, cache, store, clock,
    reader: new CatalogReader({ settings, cache, env }),
    refresher: new CatalogRefresher({ settings, cache, store, codex, env, timeoutMs }),
    quickRefresher: new CatalogRefresher({ settings, cache, store, codex, env, timeoutMs: 400 }),
  };
}

test("ID and label sanitizing", () => {
  assert.ok(isSafeId("claude-sonnet-4-5-20250929"));
  assert.ok(isSafeId("llama3.1:8b-instruct-q4_K_M"));
  assert.ok(isSafeId("meta/llama-3"));
  assert.ok(!isSafeId(""));
  assert.ok(!isSafeId("a".repeat(257)));
  assert.ok(!isSafeId("has space"));
  assert.ok(!isSafeId("mödel"));
  assert.ok(!isSafeId("sk-ant-api03-abc"));
  assert.ok(!isSafeId("model-SECRETMARKER"));
  assert.ok(!isSafeId("x-a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6"));
  assert.equal(sanitizeLabel("Nice\u0007 \u202emodel\n", "m"), "Nice model");
  assert.equal(sanitizeLabel("", "m-1"), "m-1");
  assert.equal(sanitizeLabel("token sk-SECRETMARKER", "m-1"), "m-1");
  assert.ok(Buffer.byteLength(sanitizeLabel("é".repeat(200), "m")) <= 128);
  assert.deepEqual(page([1, 2, 3], 0, 2), { entries: [1, 2], next_offset: 2 });
  assert.deepEqual(page([1, 2, 3], 2, 2), { entries: [3], next_offset: null });
  assert.deepEqual(page([1, 2, 3], 50, 2), { entries: [], next_offset: null });
});

test("secret-looking IDs: the combined prefix checks flag exactly what each shape's own prefix flags", () => {
  // looksSecret tests the core table's prefixes as one alternation per flag set; the reference tests them one by one.
  const prefixes = SECRET_SHAPES.flatMap((s) => (s.prefix !== null ? [s.prefix] : []));
  const reference = (v: string): boolean =>
    /(secret|passw|api[-_.]?key|bearer|token|credential|private[-_.]?key)/i.test(v) ||
    v.split(/[/:.\s-]+/).some((seg) => prefixes.some((re) => re.test(seg)) || (seg.length >= 32 && /[A-Za-z]/.test(seg) && /[0-9]/.test(seg))) ||
    prefixes.some((re) => re.test(v));
  const ids = [
    "sk-x", "SK_x", "pk-live", "rk_test", "skx", "ghp_a", "GHO_a", "ghx_a", "github_pat_a", "GITHUB_PAT_a", "xoxb-1", "XOXP-1", "xoxc-1",
    "AKIAABCDEFGH", "akiaabcdefgh", "AKIAabcdefgh", "AIza0123456789", "aiza0123456789", "AIza01234567", "eyJabcdefgh", "EYJabcdefgh",
    "glpat-x", "GLPAT-x", "model/sk-x", "m:ghp_a", "a.xoxb-1", "gpt-4o", "claude-sonnet-4-5", "fake-model", "llama3.1:8b", "skip", "eyJ",
  ];
  for (const id of ids) assert.equal(looksSecret(id), reference(id), id);
  assert.ok(ids.some((id) => looksSecret(id)) && ids.some((id) => !looksSecret(id)));
  assert.ok(!looksSecret("akiaabcdefgh") && looksSecret("AKIAABCDEFGH"), "case-sensitive shapes stay case-sensitive");
  assert.ok(looksSecret("GLPAT-x") && looksSecret("GITHUB_PAT_a"), "case-insensitive shapes stay case-insensitive");
});

test("providers: built-ins plus global custom ones, sorted, unsafe and built-in clashes omitted", async () => {
  const w = await world();
  await writeFile(w.settings.globalPath, JSON.stringify({
    providers: {
      zeta: { api: "openai-chat", base_url: "http://127.0.0.1:1/v1", auth: "none", label: "Zeta\u0000 local" },
      anthropic: { api: "openai-chat", base_url: "http://127.0.0.1:1/v1", auth: "none" },
      "bad id": { api: "openai-chat", base_url: "http://127.0.0.1:1/v1", auth: "none" },
      alpha: { api: "anthropic", base_url: "http://127.0.0.1:1", api_key_env: "ALPHA_KEY" },
    },
  }));
  assert.deepEqual(await w.reader.providers(), [
    { provider_id: "alpha", label: "alpha" },
    { provider_id: "anthropic", label: "anthropic" },
    { provider_id: "openai-codex", label: "openai-codex" },
    { provider_id: "zeta", label: "Zeta local" },
  ]);
  assert.equal(await w.reader.models("nope"), null);
});

test("anthropic refresh: fresh cache, seven fields, order + dedup, unsafe omitted, bundled levels, then stale", async () => {
  const fake = await FakeModelsServer.start();
  const w = await world({ ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "key-SECRETMARKER-a" });
  assert.deepEqual(await w.reader.models("anthropic"), { state: "unavailable", entries: [] });
  fake.models = [
    { id: "claude-sonnet-4-5-20250929", display_name: "Claude Sonnet 4.5", type: "model" },
    { id: "sk-ant-SECRETMARKER-leak", display_name: "bad" },
    { id: "claude-3-5-haiku-20241022", display_name: "Claude Haiku 3.5" },
    { id: "claude-sonnet-4-5-20250929", display_name: "dup" },
    { id: "mystery-model", display_name: "Mystery\u202e" },
  ];
  const out = await w.refresher.refresh("anthropic");
  assert.deepEqual(out, { ok: true, provider_id: "anthropic", state: "fresh_cache" });
  assert.equal(fake.requests[0]?.path, "/v1/models");
  assert.equal(fake.requests[0]?.apiKey, "key-SECRETMARKER-a");
  const models = await w.reader.models("anthropic");
  assert.equal(models?.state, "fresh_cache");
  assert.deepEqual(models?.entries.map((m) => m.model_id), ["claude-sonnet-4-5-20250929", "claude-3-5-haiku-20241022", "mystery-model"]);
  assert.deepEqual(models?.entries[0], {
    provider_id: "anthropic",
    model_id: "claude-sonnet-4-5-20250929",
    label: "Claude Sonnet 4.5",
    available: true,
    context_window: 200000,
    max_output_tokens: 64000,
    available_thinking_levels: ["default", "low", "medium", "high", "max"],
  });
  assert.deepEqual(models?.entries[2]?.available_thinking_levels, ["default"]);
  assert.equal(models?.entries[2]?.context_window, null);
  assert.equal(models?.entries[2]?.label, "Mystery");
  const files = await readdir(join(w.home, "catalog"));
  assert.equal((await stat(join(w.home, "catalog"))).mode & 0o777, 0o700);
  assert.equal((await stat(join(w.home, "catalog", files[0] ?? ""))).mode & 0o777, 0o600);
  w.clock.now += 61_000;
  const stale = await w.reader.models("anthropic");
  assert.equal(stale?.state, "stale");
  assert.ok(stale?.entries.every((m) => !m.available));
  // Failing, malformed and slow refreshes keep the stale cache and report failure.
  for (const mode of ["failing", "malformed", "slow"] as const) {
    fake.mode = mode;
    assert.deepEqual(await (mode === "slow" ? w.quickRefresher : w.refresher).refresh("anthropic"), { ok: false, code: "catalog_refresh_failed" });
    assert.equal((await w.reader.models("anthropic"))?.state, "stale");
  }
  await fake.close();
});

test("no credential: refresh fails without network; configuration mismatch makes the cache unavailable", async () => {
  const fake = await FakeModelsServer.start();
  fake.models = [{ id: "claude-opus-4-1" }];
  const w = await world({ ANTHROPIC_BASE_URL: fake.url });
  assert.deepEqual(await w.refresher.refresh("anthropic"), { ok: false, code: "catalog_refresh_failed" });
  assert.equal(fake.requests.length, 0);
  await w.store.setApiKey("anthropic", "key-SECRETMARKER-s");
  assert.equal((await w.refresher.refresh("anthropic")).ok, true);
  assert.equal(fake.requests[0]?.apiKey, "key-SECRETMARKER-s");
  w.env["ANTHROPIC_BASE_URL"] = fake.url + "/other";
  assert.deepEqual(await w.reader.models("anthropic"), { state: "unavailable", entries: [] });
  await fake.close();
});

test("custom provider: static models first (metadata wins, disabled kept), discovery appended; static survives failed discovery", async () => {
  const fake = await FakeModelsServer.start();
  const w = await world({ LOCAL_KEY: "key-SECRETMARKER-l" });
  await writeFile(w.settings.globalPath, JSON.stringify({
    providers: {
      local: {
        api: "openai-chat",
        base_url: fake.url + "/v1",
        api_key_env: "LOCAL_KEY",
        models: [
          { id: "qwen3:8b", label: "Qwen 3", context_window: 32768, thinking_levels: ["low", "high"] },
          { id: "old-model", disabled: true },
        ],
      },
    },
  }));
  fake.models = [{ id: "llama3.1:8b" }, { id: "qwen3:8b", context_length: 4096 }];
  assert.equal((await w.refresher.refresh("local")).ok, true);
  assert.equal(fake.requests[0]?.path, "/v1/models");
  assert.equal(fake.requests[0]?.auth, "Bearer key-SECRETMARKER-l");
  let m = await w.reader.models("local");
  assert.deepEqual(m?.entries.map((e) => [e.model_id, e.available, e.context_window]), [
    ["qwen3:8b", true, 32768],
    ["old-model", false, null],
    ["llama3.1:8b", true, null],
  ]);
  assert.deepEqual(m?.entries[0]?.available_thinking_levels, ["default", "low", "high"]);
  fake.mode = "failing";
  assert.deepEqual(await w.refresher.refresh("local"), { ok: true, provider_id: "local", state: "fresh_cache" });
  m = await w.reader.models("local");
  assert.deepEqual(m?.entries.map((e) => e.model_id), ["qwen3:8b", "old-model"]);
  await fake.close();
});

test("malformed cache files are unavailable, never errors", async () => {
  const fake = await FakeModelsServer.start();
  fake.models = [{ id: "claude-opus-4-1" }];
  const w = await world({ ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "key-SECRETMARKER" });
  assert.equal((await w.refresher.refresh("anthropic")).ok, true);
  const [file] = await readdir(join(w.home, "catalog"));
  await writeFile(join(w.home, "catalog", file ?? ""), "{broken");
  assert.deepEqual(await w.reader.models("anthropic"), { state: "unavailable", entries: [] });
  await fake.close();
});
