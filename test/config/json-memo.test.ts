/** The read-side JSON memo re-reads exactly when the file changes (replaced, rewritten in place, removed). */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JsonFileMemo, STABLE_AFTER_MS, SYNC_READ_MAX_BYTES } from "../../src/store/settings/locked-json.js";
import { SettingsStore } from "../../src/store/settings/settings-store.js";
import { settled } from "../helpers/settled.js";

/** When the file last changed (ms), as the memo reads it: the later of its modification and change times. */
function changedAt(file: string): number {
  const st = statSync(file, { bigint: true });
  return Number((st.mtimeNs > st.ctimeNs ? st.mtimeNs : st.ctimeNs) / 1_000_000n);
}

/** Waits until the filesystem's timestamp clock has moved past `ms` (an awaited condition, not a fixed sleep). */
async function fsClockPast(dir: string, ms: number): Promise<void> {
  const probe = join(dir, "probe");
  for (;;) {
    writeFileSync(probe, "x");
    if (changedAt(probe) > ms) return;
    await new Promise((r) => setImmediate(r));
  }
}

it("follows replacement, in-place rewrites of the same size and removal; returns copies", async () => {
  const dir = mkdtempSync(join(tmpdir(), "berth-memo-"));
  const file = join(dir, "s.json");
  let decodes = 0;
  let now = 0; // the memo's clock: set from the file's own change time below
  const memo = new JsonFileMemo(
    file,
    (raw) => {
      decodes++;
      return (raw ?? { v: "none" }) as { v: string };
    },
    () => now,
  );
  assert.deepEqual(await memo.read(), { v: "none" });
  writeFileSync(file, '{"v":"aa"}');
  now = changedAt(file); // read at once after the write
  assert.deepEqual(await memo.read(), { v: "aa" });
  const copy = await memo.read();
  copy.v = "mutated";
  assert.deepEqual(await memo.read(), { v: "aa" }, "callers cannot alter the memo");
  writeFileSync(file, '{"v":"ab"}'); // same size, in place, possibly within one timestamp tick
  assert.deepEqual(await memo.read(), { v: "ab" }, "a just-modified file is not trusted to the memo");
  now = changedAt(file) + STABLE_AFTER_MS + 1; // the file has been left alone for longer than the window
  const before = decodes;
  await memo.read();
  await memo.read();
  assert.equal(decodes, before + 1, "a stable, unchanged file is decoded once and then remembered");
  await fsClockPast(dir, changedAt(file)); // as it would have, that long after the last change
  writeFileSync(file, '{"v":"bb"}'); // same size, in place
  now = changedAt(file);
  assert.deepEqual(await memo.read(), { v: "bb" });
  writeFileSync(join(dir, "tmp"), '{"v":"cc"}');
  renameSync(join(dir, "tmp"), file); // atomic replacement
  assert.deepEqual(await memo.read(), { v: "cc" });
  rmSync(file);
  assert.deepEqual(await memo.read(), { v: "none" });
});

it("does not remember a failed decode", async () => {
  const dir = mkdtempSync(join(tmpdir(), "berth-memo-"));
  const file = join(dir, "s.json");
  writeFileSync(file, "{not json");
  const memo = new JsonFileMemo(file, (raw) => raw);
  await assert.rejects(memo.read());
  await assert.rejects(memo.read());
  writeFileSync(file, '{"ok":1}');
  assert.deepEqual(await memo.read(), { ok: 1 });
});

it("concurrent reads of an unchanged file share one read and decode; each caller gets its own copy", async () => {
  const dir = mkdtempSync(join(tmpdir(), "berth-memo-"));
  const file = join(dir, "s.json");
  writeFileSync(file, '{"v":"aa"}');
  let decodes = 0;
  const memo = new JsonFileMemo(file, (raw) => (decodes++, raw as { v: string }), () => changedAt(file)); // never stable
  const [a, b, c] = await Promise.all([memo.read(), memo.read(), memo.read()]);
  assert.equal(decodes, 1);
  assert.deepEqual([a, b, c], [{ v: "aa" }, { v: "aa" }, { v: "aa" }]);
  a.v = "mutated";
  assert.deepEqual(b, { v: "aa" });
  // Not remembered (just modified): the next read reads again, and sees a replacement.
  writeFileSync(join(dir, "tmp"), '{"v":"bb"}');
  renameSync(join(dir, "tmp"), file);
  assert.deepEqual(await memo.read(), { v: "bb" });
  assert.equal(decodes, 2);
  // A failed read is shared too, and not remembered.
  writeFileSync(file, "{broken");
  const failed = await Promise.allSettled([memo.read(), memo.read()]);
  assert.deepEqual(failed.map((r) => r.status), ["rejected", "rejected"]);
  writeFileSync(file, '{"v":"cc"}');
  assert.deepEqual(await memo.read(), { v: "cc" });
});

it("settings stores of one process share the file's memo, and each sees another's write and an outside replacement", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-memo-home-"));
  const project = mkdtempSync(join(tmpdir(), "berth-memo-proj-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ approval_policy: "always" }));
  const a = new SettingsStore({ home, projectDir: project, env: {} });
  const b = new SettingsStore({ home, projectDir: project, env: {} });
  const [la, lb] = await Promise.all([a.load(), b.load()]);
  assert.equal(la.global.approval_policy, "always");
  assert.equal(lb.global.approval_policy, "always");
  (la.global as Record<string, unknown>)["approval_policy"] = "mutated";
  assert.equal((await b.load()).global.approval_policy, "always", "one store's copy is its own");
  await a.update("global", (doc) => void (doc["approval_policy"] = "never"));
  assert.equal((await b.load()).global.approval_policy, "never", "a write through one store is seen by the other");
  writeFileSync(join(home, "tmp"), JSON.stringify({ approval_policy: "on-risk" }));
  renameSync(join(home, "tmp"), join(home, "settings.json"));
  const c = new SettingsStore({ home, projectDir: project, env: {} });
  assert.equal((await c.load()).global.approval_policy, "on-risk");
  assert.equal((await a.load()).global.approval_policy, "on-risk");
});

it("reads a file past the synchronous-read bound like a small one: same value, same errors", async () => {
  const dir = mkdtempSync(join(tmpdir(), "berth-memo-big-"));
  try {
    const big = join(dir, "big.json");
    const small = join(dir, "small.json");
    const doc = { pad: "x".repeat(SYNC_READ_MAX_BYTES), v: 1 };
    writeFileSync(big, JSON.stringify(doc));
    writeFileSync(small, JSON.stringify({ v: 2 }));
    assert.ok(statSync(big).size > SYNC_READ_MAX_BYTES && statSync(small).size <= SYNC_READ_MAX_BYTES);
    const memo = <T>(f: string) => new JsonFileMemo<T>(f, (raw) => raw as T);
    assert.deepEqual(await memo<typeof doc>(big).read(), doc);
    assert.deepEqual(await memo<{ v: number }>(small).read(), { v: 2 });
    // Malformed on either path: the same JsonFileError, as a rejection (never a synchronous throw).
    writeFileSync(big, "{" + " ".repeat(SYNC_READ_MAX_BYTES + 1));
    writeFileSync(small, "{");
    for (const f of [big, small]) {
      const read = memo<unknown>(f).read();
      await assert.rejects(read, (e: Error) => e.name === "JsonFileError" && /malformed/.test(e.message));
    }
    // Missing on either path: the decoder sees undefined.
    assert.equal(await memo<unknown>(join(dir, "none.json")).read(), undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it("loadShared: the same frozen layers while nothing changed; new ones after an edit or an environment change", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-memo-home-"));
  const project = mkdtempSync(join(tmpdir(), "berth-memo-proj-"));
  const file = join(home, "settings.json");
  writeFileSync(file, JSON.stringify({ approval_policy: "always" }));
  const env: Record<string, string | undefined> = {};
  const s = new SettingsStore({ home, projectDir: project, env });
  // Left alone past the stability window (an awaited condition), so the memo remembers the file.
  await settled(file);
  const first = await s.loadShared();
  assert.equal(first.global.approval_policy, "always");
  assert.equal(await s.loadShared(), first, "unchanged: the very same object");
  assert.ok(Object.isFrozen(first) && Object.isFrozen(first.global) && Object.isFrozen(first.env));
  assert.throws(() => ((first.global as Record<string, unknown>)["approval_policy"] = "never"));
  assert.equal((await s.load()).global.approval_policy, "always", "load() still returns copies of the same content");
  env["MC_MODEL"] = "other";
  const second = await s.loadShared();
  assert.notEqual(second, first);
  assert.equal(second.env.model, "other");
  assert.equal(second.global, first.global, "the unchanged file's layer is kept");
  writeFileSync(join(home, "tmp"), JSON.stringify({ approval_policy: "never" }));
  renameSync(join(home, "tmp"), file);
  const third = await s.loadShared();
  assert.notEqual(third, second);
  assert.equal(third.global.approval_policy, "never", "an edit is seen by the next call");
});
