/** The read-side JSON memo re-reads exactly when the file changes (replaced, rewritten in place, removed). */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JsonFileMemo } from "../../src/store/settings/locked-json.js";

it("follows replacement, in-place rewrites of the same size and removal; returns copies", async () => {
  const dir = mkdtempSync(join(tmpdir(), "berth-memo-"));
  const file = join(dir, "s.json");
  let decodes = 0;
  const memo = new JsonFileMemo(file, (raw) => {
    decodes++;
    return (raw ?? { v: "none" }) as { v: string };
  });
  assert.deepEqual(await memo.read(), { v: "none" });
  writeFileSync(file, '{"v":"aa"}');
  assert.deepEqual(await memo.read(), { v: "aa" });
  const copy = await memo.read();
  copy.v = "mutated";
  assert.deepEqual(await memo.read(), { v: "aa" }, "callers cannot alter the memo");
  writeFileSync(file, '{"v":"ab"}'); // same size, in place, within one timestamp tick
  assert.deepEqual(await memo.read(), { v: "ab" }, "a just-modified file is not trusted to the memo");
  await new Promise((r) => setTimeout(r, 150));
  const before = decodes;
  await memo.read();
  await memo.read();
  assert.equal(decodes, before + 1, "a stable, unchanged file is decoded once and then remembered");
  writeFileSync(file, '{"v":"bb"}'); // same size, in place
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
