import { test } from "node:test";
import assert from "node:assert/strict";
import { runChild } from "../helpers/run-child.js";
import { mkdtemp, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CatalogCache } from "../../src/store/catalog/cache.js";
import { providerFingerprint, findProvider } from "../../src/store/catalog/providers.js";
import { ConfigService, parseConfigSet } from "../../src/store/settings/config.js";
import { SettingsError, SettingsStore } from "../../src/store/settings/settings-store.js";
import { explainSettings } from "../../src/cli/chat/preflight.js";

interface World {
  env: Record<string, string | undefined>;
  settings: SettingsStore;
  cache: CatalogCache;
  config: ConfigService;
  clock: { now: number };
  home: string;
}

async function world(): Promise<World> {
  const root = await mkdtemp(join(tmpdir(), "berth-cfg-"));
  const home = join(root, "home");
  await mkdir(home, { mode: 0o700 });
  await mkdir(join(root, "proj"));
  const env: Record<string, string | undefined> = {};
  const clock = { now: Date.now() };
  const settings = new SettingsStore({ home, projectDir: join(root, "proj"), env });
  const cache = new CatalogCache({ home, now: () => clock.now, ttlMs: 60_000 });
  return { env, settings, cache, clock, home, config: new ConfigService({ settings, cache, env }) };
}

const model = (id: string, levels: string[] = ["default", "high"], disabled = false) => ({
  model_id: id,
  label: id,
  context_window: null,
  max_output_tokens: null,
  available_thinking_levels: levels as ("default" | "high")[],
  disabled,
});

async function seedAnthropic(w: World): Promise<void> {
  const entry = findProvider({}, "anthropic");
  assert.ok(entry);
  await w.cache.write("anthropic", providerFingerprint(entry, w.env), [
    model("claude-example", ["default", "high"]),
    model("claude-off", ["default"], true),
    model("claude-sonnet-4-5", ["default", "low", "medium", "high", "max"]),
  ]);
}

test("config.get defaults: anthropic + claude-sonnet-4-5, default reasoning, fast false", async () => {
  const w = await world();
  const got = await w.config.get();
  assert.deepEqual(got, {
    ok: true,
    value: {
      selection: { provider_id: "anthropic", model_id: "claude-sonnet-4-5" },
      thinking_level: "default",
      configured_thinking_level: "default",
      available_thinking_levels: ["default", "low", "medium", "high", "max"],
      fast: false,
      precedence: ["environment", "project", "global"],
      writable_scopes: ["global", "project"],
      global_only: ["fast"],
    },
  });
});

test("layers: env > project > global; model pairs only with its provider; project fast ignored", async () => {
  const w = await world();
  await writeFile(w.settings.globalPath, JSON.stringify({ provider: "anthropic", model: "claude-opus-4-1", thinking_level: "high", fast: true }));
  let g = await w.config.get();
  assert.ok(g.ok);
  assert.deepEqual(g.value.selection, { provider_id: "anthropic", model_id: "claude-opus-4-1" });
  assert.equal(g.value.thinking_level, "high");
  await mkdir(join(w.settings.projectPath, ".."), { recursive: true });
  await writeFile(w.settings.projectPath, JSON.stringify({ model: "claude-sonnet-4-5", thinking_level: "x_high", fast: false }));
  g = await w.config.get();
  assert.ok(g.ok);
  assert.equal(g.value.selection.model_id, "claude-sonnet-4-5");
  assert.equal(g.value.configured_thinking_level, "x_high");
  assert.equal(g.value.thinking_level, "default", "unsupported configured level resolves to default");
  assert.equal(g.value.fast, true);
  w.env["MC_PROVIDER"] = "openai-codex";
  g = await w.config.get();
  assert.ok(g.ok);
  assert.deepEqual(g.value.selection, { provider_id: "openai-codex", model_id: "gpt-5-codex" });
  w.env["MC_MODEL"] = "gpt-5.1-codex";
  g = await w.config.get();
  assert.ok(g.ok && g.value.selection.model_id === "gpt-5.1-codex");
  w.env["MC_MODEL"] = "sk-SECRETMARKER-oops";
  assert.deepEqual(await w.config.get(), { ok: false, code: "configuration_unavailable" });
});

test("config.set payload and scope errors", async () => {
  const w = await world();
  await seedAnthropic(w);
  const cases: [unknown, string][] = [
    [null, "invalid_payload"],
    [{}, "invalid_payload"],
    [{ scope: "global" }, "invalid_payload"],
    [{ scope: "global", fast: null }, "invalid_payload"],
    [{ scope: "global", fast: 1 }, "invalid_payload"],
    [{ scope: "global", thinking_level: null }, "invalid_payload"],
    [{ scope: "global", thinking_level: "ultra" }, "invalid_payload"],
    [{ scope: "global", selection: { provider_id: "anthropic" } }, "invalid_payload"],
    [{ scope: "global", selection: { provider_id: "anthropic", model_id: "claude-example", x: 1 } }, "invalid_payload"],
    [{ scope: "global", fast: true, extra: 1 }, "invalid_payload"],
    [{ fast: true }, "invalid_payload"],
    [{ scope: "session", fast: true }, "invalid_scope"],
    [{ scope: "project", fast: false }, "invalid_scope"],
    [{ scope: "project", fast: false, thinking_level: "high" }, "invalid_scope"],
  ];
  for (const [payload, code] of cases) {
    const parsed = parseConfigSet(payload);
    const outcome = parsed.ok ? await w.config.set(parsed.value) : parsed;
    assert.deepEqual(outcome, { ok: false, code }, JSON.stringify(payload));
  }
  await assert.rejects(stat(w.settings.projectPath), "nothing written");
  await assert.rejects(stat(w.settings.globalPath), "nothing written");
});

test("config.set selection: catalog rules, unsupported reasoning, reset to default, unknown fields preserved", async () => {
  const w = await world();
  const sel = (model_id: string, provider_id = "anthropic") => ({ provider_id, model_id });
  assert.deepEqual(await w.config.set({ scope: "global", selection: sel("claude-example") }), { ok: false, code: "catalog_unavailable" });
  assert.deepEqual(await w.config.set({ scope: "global", selection: sel("m", "nope") }), { ok: false, code: "invalid_selection" });
  assert.deepEqual(await w.config.set({ scope: "global", selection: sel("sk-SECRETMARKER-x") }), { ok: false, code: "invalid_selection" });
  await seedAnthropic(w);
  assert.deepEqual(await w.config.set({ scope: "global", selection: sel("claude-off") }), { ok: false, code: "invalid_selection" });
  assert.deepEqual(await w.config.set({ scope: "global", selection: sel("claude-unknown") }), { ok: false, code: "invalid_selection" });
  assert.deepEqual(await w.config.set({ scope: "global", selection: sel("claude-example"), thinking_level: "max" }), { ok: false, code: "unsupported_reasoning" });

  await writeFile(w.settings.globalPath, JSON.stringify({ theme: "dark", thinking_level: "high", custom: { keep: [1, 2] } }));
  const ok = await w.config.set({ scope: "global", selection: sel("claude-example") });
  assert.ok(ok.ok);
  assert.equal(ok.value.persisted, true);
  assert.equal(ok.value.scope, "global");
  assert.deepEqual(ok.value.effective.selection, sel("claude-example"));
  assert.equal(ok.value.effective.configured_thinking_level, "default", "selection resets reasoning");
  assert.deepEqual(ok.value.effective.available_thinking_levels, ["default", "high"]);
  const doc = JSON.parse(await readFile(w.settings.globalPath, "utf8")) as Record<string, unknown>;
  assert.deepEqual(doc, { theme: "dark", thinking_level: "default", custom: { keep: [1, 2] }, provider: "anthropic", model: "claude-example" });
  assert.equal((await stat(w.settings.globalPath)).mode & 0o777, 0o600);

  // reasoning-only change is validated against the effective selection
  assert.deepEqual(await w.config.set({ scope: "project", thinking_level: "max" }), { ok: false, code: "unsupported_reasoning" });
  const tl = await w.config.set({ scope: "project", thinking_level: "high" });
  assert.ok(tl.ok && tl.value.effective.thinking_level === "high");
  assert.equal((await stat(join(w.settings.projectPath, ".."))).mode & 0o777, 0o700);
  assert.deepEqual(JSON.parse(await readFile(w.settings.projectPath, "utf8")), { thinking_level: "high" });

  // env override changes the effective selection that reasoning-only writes validate against
  w.env["MC_MODEL"] = "claude-off";
  assert.deepEqual(await w.config.set({ scope: "global", thinking_level: "high" }), { ok: false, code: "invalid_selection" });
  delete w.env["MC_MODEL"];

  // stale catalog
  w.clock.now += 61_000;
  assert.deepEqual(await w.config.set({ scope: "global", selection: sel("claude-example") }), { ok: false, code: "catalog_stale" });
  assert.deepEqual(await w.config.set({ scope: "global", thinking_level: "high" }), { ok: false, code: "catalog_stale" });
  // fast-only needs no catalog
  const fast = await w.config.set({ scope: "global", fast: true });
  assert.ok(fast.ok && fast.value.effective.fast === true);
});

test("malformed settings: config.get unavailable, config.set fails without overwriting", async () => {
  const w = await world();
  await writeFile(w.settings.globalPath, "{nope");
  assert.deepEqual(await w.config.get(), { ok: false, code: "configuration_unavailable" });
  assert.deepEqual(await w.config.set({ scope: "global", fast: true }), { ok: false, code: "settings_write_failed" });
  assert.equal(await readFile(w.settings.globalPath, "utf8"), "{nope");
});

test("a settings file that is not UTF-8 is refused by name, never rewritten with replacement characters", async () => {
  const w = await world();
  // "café" saved as Latin-1 (0xE9), as an editor set to another encoding writes it.
  const bytes = Buffer.concat([Buffer.from('{"note":"caf'), Buffer.from([0xe9]), Buffer.from('","fast":false}')]);
  await writeFile(w.settings.globalPath, bytes);
  await assert.rejects(w.settings.load(), (e: unknown) => e instanceof SettingsError && e.scope === "global" && e.reason === "not_utf8");
  assert.deepEqual(await w.config.set({ scope: "global", fast: true }), { ok: false, code: "settings_write_failed" });
  assert.deepEqual(await readFile(w.settings.globalPath), bytes, "the file's bytes are untouched");
  assert.equal(await explainSettings(w.settings.globalPath), `${w.settings.globalPath}: is not UTF-8 text (line 1, column 13); save it as UTF-8`);
  // A byte order mark and valid multi-byte text stay accepted.
  await writeFile(w.settings.globalPath, `\uFEFF{"note":"café ✓","fast":false}`);
  assert.equal((await w.settings.load()).global["note"], "café ✓");
});

const settingsModule = new URL("../../src/store/settings/settings-store.js", import.meta.url).href;


test("two processes writing settings concurrently lose nothing", async () => {
  const w = await world();
  const script = `
    const { SettingsStore } = await import(${JSON.stringify(settingsModule)});
    const [home, proj, tag] = process.argv.slice(1);
    const s = new SettingsStore({ home, projectDir: proj, env: {} });
    for (let i = 0; i < 15; i++) {
      await s.update("global", (doc) => { doc[tag + "_" + i] = i; doc.counter = (doc.counter ?? 0) + 1; });
    }`;
  const proj = join(w.settings.projectPath, "..", "..");
  await Promise.all([runChild(script, [w.home, proj, "a"]), runChild(script, [w.home, proj, "b"])]);
  const doc = JSON.parse(await readFile(w.settings.globalPath, "utf8")) as Record<string, unknown>;
  assert.equal(doc["counter"], 30);
  for (const t of ["a", "b"]) for (let i = 0; i < 15; i++) assert.equal(doc[`${t}_${i}`], i);
});

test("settings nested past 64 levels are refused as too deep (not as invalid JSON); 64 levels load", async () => {
  const w = await world();
  // Depth counts containers: the settings object is level 1, each array inside it one more.
  const nested = (levels: number): string => `{"x":${"[".repeat(levels - 1)}${"]".repeat(levels - 1)}}`;
  await writeFile(w.settings.globalPath, nested(64));
  assert.ok(Array.isArray((await w.settings.load()).global["x"]));
  assert.equal((await w.config.set({ scope: "global", fast: true })).ok, true);
  for (const levels of [65, 5000]) {
    await writeFile(w.settings.globalPath, nested(levels));
    await assert.rejects(w.settings.load(), (e: unknown) => e instanceof SettingsError && e.scope === "global" && e.reason === "too_deep");
    await assert.rejects(w.settings.loadShared(), (e: unknown) => e instanceof SettingsError && e.reason === "too_deep");
    assert.deepEqual(await w.config.set({ scope: "global", fast: true }), { ok: false, code: "settings_write_failed" });
    assert.equal(
      await explainSettings(w.settings.globalPath),
      `${w.settings.globalPath}: nests values deeper than settings may (64 levels of objects and arrays); flatten it or remove the deep value`,
    );
  }
});
