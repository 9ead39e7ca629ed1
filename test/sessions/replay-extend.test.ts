/**
 * Incremental projections: after appends, extending the previous projection (read only after its resume point)
 * gives exactly the projection of the whole window — items, cursors, gap and extension state — or declines.
 * Also the store's resume-point checks (rewritten file, moved window, record bound).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, renameSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStore, type WindowBounds, type WindowSnapshot } from "../../src/store/sessions/index.js";
import {
  UNPROJECTED_KINDS,
  decodeProjection,
  encodeProjection,
  extendProjection,
  projectSnapshot,
  type Projection,
} from "../../src/protocols/app-service/replay.js";
import { prng } from "../helpers/prng.js";


const ALPHABET = ["a", "b", " ", "é", "中", "🌍", "\n", '"', "\\", "\u0001", "\r\n", "\u2028", "sk-"];

async function full(store: SessionStore, id: string, bounds: WindowBounds): Promise<WindowSnapshot> {
  const w = await store.readWindow(id, bounds, undefined, UNPROJECTED_KINDS);
  assert.ok(w !== "unchanged");
  return w;
}

async function after(store: SessionStore, id: string, bounds: WindowBounds, p: Projection): Promise<WindowSnapshot> {
  const w = await store.readWindow(id, bounds, () => p.state?.point ?? false, UNPROJECTED_KINDS);
  assert.ok(w !== "unchanged");
  return w;
}

// @req AS-SES-22
test("property: extending after appends equals projecting the whole window (or declines)", async () => {
  const store = new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-extend-")) });
  let extended = 0;
  let declined = 0;
  for (let seed = 1; seed <= 30; seed++) {
    const rnd = prng(seed * 6151);
    const text = (long = 0.1) => {
      const n = rnd() < long ? 500 + Math.floor(rnd() * 3000) : Math.floor(rnd() * 25);
      let s = "";
      for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(rnd() * ALPHABET.length)];
      return s;
    };
    const small = seed % 3 === 0;
    const bounds: WindowBounds = small ? { maxBytes: 6000, maxRecords: 40, quantumBytes: 512 } : { maxBytes: 2 << 20, maxRecords: 100_000, quantumBytes: 65536 };
    const s = await store.create("/");
    const w = s.writer;
    let turn = 0;
    let open = false;
    let p: Projection | null = null;
    for (let step = 0; step < 14; step++) {
      const ops = 1 + Math.floor(rnd() * 4);
      for (let k = 0; k < ops; k++) {
        const r = rnd();
        if (!open || r < 0.25) {
          turn++;
          open = true;
          await w.append({ kind: "user", turn_id: `t${turn}`, text: text() });
        } else if (r < 0.55) {
          await w.append({ kind: "assistant", turn_id: `t${turn}`, message_id: `m${Math.floor(rnd() * 3)}`, text: text(0.2), partial: rnd() < 0.7 });
        } else if (r < 0.65) {
          await w.append({ kind: "tool_result", turn_id: `t${turn}`, call_id: "c", name: "read", content: text(0.5), is_error: false });
        } else if (r < 0.85) {
          await w.append({ kind: "terminal", turn_id: `t${turn}`, status: "completed", assistant_text: text() });
          open = false;
        } else if (r < 0.9 && turn > 1) {
          await w.append({ kind: "user", turn_id: `t${turn - 1}`, text: "late record for an earlier turn" });
        } else if (r < 0.95) {
          await w.append({ kind: "checkpoint", summary: text(), cutoff_seq: Math.max(0, w.peekNextSeq - 3) });
        } else {
          await w.flush();
          appendFileSync(store.paths.data(s.id), "not a record\n");
        }
      }
      await w.flush();
      const whole = projectSnapshot(s.id, await full(store, s.id, bounds));
      let next = whole;
      if (p !== null) {
        const delta = await after(store, s.id, bounds, p);
        const ext: Projection | null = delta.since !== null ? extendProjection(p, delta) : null;
        if (ext === null) declined++;
        else {
          extended++;
          assert.deepEqual(ext.items, whole.items, `seed ${seed} step ${step}: items`);
          assert.deepEqual([...ext.prefix], [...whole.prefix], `seed ${seed} step ${step}: cursors`);
          assert.equal(ext.gap, whole.gap, `seed ${seed} step ${step}: gap`);
          assert.deepEqual(ext.state, whole.state, `seed ${seed} step ${step}: state`);
          if (rnd() < 0.6) next = ext;
        }
      }
      // Continue from the whole or the extended projection (chains of extensions), or from its sidecar encoding.
      p = rnd() < 0.5 ? next : decodeProjection(s.id, encodeProjection(next));
      assert.ok(p !== null);
    }
    await s.release();
  }
  assert.ok(extended > 150, `extensions exercised (${extended})`);
  assert.ok(declined > 10, `fallbacks exercised (${declined})`);
});

test("a resume point is refused when the bytes before it changed, the file was replaced, or the window moved", async () => {
  const store = new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-extend-")) });
  const bounds: WindowBounds = { maxBytes: 2 << 20, maxRecords: 100_000, quantumBytes: 65536 };
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t1", text: "hello" });
  await s.writer.append({ kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "hi" }, { sync: true });
  const p = projectSnapshot(s.id, await full(store, s.id, bounds));
  await s.writer.append({ kind: "user", turn_id: "t2", text: "next" }, { sync: true });
  const ok = await after(store, s.id, bounds, p);
  assert.ok(ok.since !== null);
  assert.deepEqual(ok.records.map((r) => r.kind), ["user"], "only the appended record is read");
  await s.release();
  const path = store.paths.data(s.id);
  // Same inode, bytes before the point rewritten (same length): full read.
  const raw = readFileSync(path, "utf8");
  writeFileSync(path, raw.replace('"hi"', '"HI"'));
  assert.equal((await after(store, s.id, bounds, p)).since, null);
  // Another inode with the original bytes: full read.
  writeFileSync(path + ".new", raw);
  renameSync(path + ".new", path);
  assert.equal((await after(store, s.id, bounds, p)).since, null);
  // The window start moves (tiny window): full read.
  const tiny: WindowBounds = { maxBytes: 64, maxRecords: 100, quantumBytes: 16 };
  const q = projectSnapshot(s.id, await full(store, s.id, tiny));
  assert.ok(q.state !== null);
  appendFileSync(path, JSON.stringify({ seq: 99, at: "x", kind: "user", turn_id: "t9", text: "y".repeat(100) }) + "\n");
  assert.equal((await after(store, s.id, tiny, q)).since, null);
  // The record bound would be exceeded: full read.
  const few: WindowBounds = { maxBytes: 1 << 20, maxRecords: 4, quantumBytes: 1 };
  const r = projectSnapshot(s.id, await full(store, s.id, few));
  assert.ok(r.state !== null);
  appendFileSync(path, JSON.stringify({ seq: 100, at: "x", kind: "user", turn_id: "t9", text: "z" }) + "\n");
  assert.equal((await after(store, s.id, few, r)).since, null);
});
