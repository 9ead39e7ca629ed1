/**
 * A settings.json that is a symbolic link (a dotfiles set-up: the file lives in a dotfiles repository and the Berth
 * home links to it) is written through: the link stays, its target is replaced atomically in its own directory with
 * its own mode, and the lock is taken beside the target. A dangling link's target is created (docs/auth-config.md).
 */
import assert from "node:assert/strict";
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { CatalogCache } from "../../src/store/catalog/cache.js";
import { ConfigService } from "../../src/store/settings/config.js";
import { SettingsStore } from "../../src/store/settings/settings-store.js";
import { AuthStore } from "../../src/store/auth/auth-store.js";
import { withFileLock } from "../../src/store/settings/locked-json.js";

function dotfiles(): { home: string; repo: string; proj: string; config: ConfigService; settings: SettingsStore } {
  const root = mkdtempSync(join(tmpdir(), "berth-dotfiles-"));
  const home = join(root, "home");
  const repo = join(root, "dotfiles", "berth");
  const proj = join(root, "proj");
  mkdirSync(home, { mode: 0o700 });
  mkdirSync(repo, { recursive: true });
  mkdirSync(proj);
  const env = {};
  const settings = new SettingsStore({ home, projectDir: proj, env });
  return { home, repo, proj, settings, config: new ConfigService({ settings, cache: new CatalogCache({ home }), env }) };
}

test("config.set through a symlinked settings.json writes the target, keeps the link and the target's mode", async () => {
  const w = dotfiles();
  const target = join(w.repo, "settings.json");
  writeFileSync(target, JSON.stringify({ fast: false, note: "from dotfiles" }));
  chmodSync(target, 0o644);
  // A relative link, as dotfiles managers (stow) make them.
  symlinkSync("../dotfiles/berth/settings.json", join(w.home, "settings.json"));
  const r = await w.config.set({ scope: "global", fast: true });
  assert.equal(r.ok, true, JSON.stringify(r));
  assert.ok(lstatSync(join(w.home, "settings.json")).isSymbolicLink(), "the link is still a link");
  assert.equal(readlinkSync(join(w.home, "settings.json")), "../dotfiles/berth/settings.json");
  assert.deepEqual(JSON.parse(readFileSync(target, "utf8")), { fast: true, note: "from dotfiles" });
  assert.equal(statSync(target).mode & 0o777, 0o644, "the target keeps its mode");
  assert.equal((await w.settings.load()).global.fast, true);
  // Nothing is left beside the link or the target: no temp file, lock or owner record.
  assert.deepEqual(readdirSync(w.home), ["settings.json"]);
  assert.deepEqual(readdirSync(w.repo), ["settings.json"]);
});

test("the write's lock is taken beside the link's target, so writers through two links serialize", async () => {
  const w = dotfiles();
  const target = join(w.repo, "settings.json");
  writeFileSync(target, "{}");
  symlinkSync(target, join(w.home, "settings.json"));
  const seen: string[] = [];
  await withFileLock(join(w.home, "settings.json"), async () => {
    seen.push(...readdirSync(w.repo).sort());
    assert.deepEqual(readdirSync(w.home), ["settings.json"], "no lock beside the link");
    return Promise.resolve();
  });
  assert.deepEqual(seen, ["settings.json", "settings.json.lock", "settings.json.lock.owner"]);
});

test("a project's symlinked .berth/settings.json, a chain of links and a dangling link are written through", async () => {
  const w = dotfiles();
  // A chain: home/settings.json → repo/link.json → repo/settings.json.
  const target = join(w.repo, "settings.json");
  writeFileSync(target, "{}", { mode: 0o600 });
  symlinkSync("settings.json", join(w.repo, "link.json"));
  symlinkSync(join(w.repo, "link.json"), join(w.home, "settings.json"));
  assert.equal((await w.config.set({ scope: "global", fast: true })).ok, true);
  assert.ok(lstatSync(join(w.repo, "link.json")).isSymbolicLink());
  assert.deepEqual(JSON.parse(readFileSync(target, "utf8")), { fast: true });
  // The project layer: the same rule for a target inside the project.
  mkdirSync(join(w.proj, ".berth"));
  const projTarget = join(w.proj, "shared", "berth.json");
  mkdirSync(join(w.proj, "shared"));
  writeFileSync(projTarget, "{}");
  symlinkSync("../shared/berth.json", join(w.proj, ".berth", "settings.json"));
  assert.equal((await w.config.set({ scope: "project", fast: false })).ok, true);
  assert.ok(lstatSync(join(w.proj, ".berth", "settings.json")).isSymbolicLink());
  assert.deepEqual(JSON.parse(readFileSync(projTarget, "utf8")), { fast: false });
  // Dangling (the dotfiles file was deleted, its directory is there): the target is created, 0600, the link kept.
  const w2 = dotfiles();
  symlinkSync(join(w2.repo, "settings.json"), join(w2.home, "settings.json"));
  assert.equal((await w2.config.set({ scope: "global", fast: true })).ok, true);
  assert.ok(lstatSync(join(w2.home, "settings.json")).isSymbolicLink());
  assert.deepEqual(JSON.parse(readFileSync(join(w2.repo, "settings.json"), "utf8")), { fast: true });
  assert.equal(statSync(join(w2.repo, "settings.json")).mode & 0o777, 0o600);
  // Dangling into a directory that does not exist (the dotfiles repository is not checked out): refused, nothing made.
  const w3 = dotfiles();
  symlinkSync(join(w3.repo, "gone", "settings.json"), join(w3.home, "settings.json"));
  assert.deepEqual(await w3.config.set({ scope: "global", fast: true }), { ok: false, code: "settings_write_failed" });
  assert.ok(lstatSync(join(w3.home, "settings.json")).isSymbolicLink());
  assert.deepEqual(readdirSync(w3.home), ["settings.json"]);
});

test("a symlinked auth.json is written through but stays 0600 whatever the target's mode (it holds credentials)", async () => {
  const w = dotfiles();
  const target = join(w.repo, "auth.json");
  writeFileSync(target, JSON.stringify({ version: 1, generations: {}, records: {} }));
  chmodSync(target, 0o644);
  symlinkSync(target, join(w.home, "auth.json"));
  await new AuthStore(w.home).logout("anthropic");
  assert.ok(lstatSync(join(w.home, "auth.json")).isSymbolicLink());
  assert.equal(statSync(target).mode & 0o777, 0o600);
  assert.equal((JSON.parse(readFileSync(target, "utf8")) as { generations: Record<string, number> }).generations["anthropic"], 1);
});

test("a project's .berth/settings.json linking outside the project (a cloned repository's) is replaced, its target untouched", async () => {
  const w = dotfiles();
  // One of the user's own JSON files, which a hostile repository's link names.
  const victim = join(w.repo, "victim.json");
  writeFileSync(victim, JSON.stringify({ keep: "me" }));
  mkdirSync(join(w.proj, ".berth"));
  symlinkSync(victim, join(w.proj, ".berth", "settings.json"));
  assert.equal((await w.config.set({ scope: "project", fast: true })).ok, true);
  assert.deepEqual(JSON.parse(readFileSync(victim, "utf8")), { keep: "me" }, "the link's target is not written");
  assert.deepEqual(readdirSync(w.repo).sort(), ["victim.json"], "no lock or temp file beside it");
  const file = join(w.proj, ".berth", "settings.json");
  assert.ok(!lstatSync(file).isSymbolicLink(), "the link is replaced by a regular file");
  assert.equal(statSync(file).mode & 0o777, 0o600);
  // Reads went through the link, so the new file carries what the layer held, plus the change.
  assert.deepEqual(JSON.parse(readFileSync(file, "utf8")), { keep: "me", fast: true });
});
