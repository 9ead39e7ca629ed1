/** The read-side JSON memo re-reads exactly when the file changes (replaced, rewritten in place, removed). */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JsonFileMemo, STABLE_AFTER_MS } from "../../src/store/settings/locked-json.js";

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
