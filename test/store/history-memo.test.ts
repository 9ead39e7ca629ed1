/**
 * `readHistory` with the session's writer keeps the window in memory between turns (store.ts): what it returns must
 * always equal a fresh read of the file, and anything written by someone else (an append, a replaced file) must show.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStore, type History } from "../../src/store/sessions/index.js";

const bounds = { maxBytes: 1 << 20, maxRecords: 1000 };
const home = (): string => mkdtempSync(join(tmpdir(), "berth-hmemo-"));

/** What a process without any memo reads now. */
async function fresh(h: string, id: string, b = bounds): Promise<History> {
  return new SessionStore({ home: h }).readHistory(id, b);
}

test("the kept history follows the writer's own appends and equals a fresh read, checkpoints included", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const s = await store.create("/");
  const w = s.writer;
  await w.append({ kind: "user", turn_id: "t1", text: "one" });
  await w.append({ kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "a1" }, { sync: true });
  assert.deepEqual(await store.readHistory(s.id, bounds, w), await fresh(h, s.id));
  await w.append({ kind: "user", turn_id: "t2", text: "two" }, { sync: true });
  await w.append({ kind: "assistant", turn_id: "t2", message_id: "m1.0", text: "a2", partial: false });
  await w.append({ kind: "terminal", turn_id: "t2", status: "completed", assistant_text: "a2" }, { sync: true });
  const second = await store.readHistory(s.id, bounds, w);
  assert.deepEqual(second.records.map((r) => r.kind), ["user", "terminal", "user", "assistant", "terminal"]);
  assert.deepEqual(second, await fresh(h, s.id));
  // A checkpoint written by the writer (session.clear) empties the context.
  await w.append({ kind: "checkpoint", summary: "", cutoff_seq: w.peekNextSeq - 1 }, { sync: true });
  const cleared = await store.readHistory(s.id, bounds, w);
  assert.deepEqual(cleared.records, []);
  assert.equal(cleared.checkpoint?.summary, "");
  assert.deepEqual(cleared, await fresh(h, s.id));
  await w.append({ kind: "user", turn_id: "t3", text: "three" }, { sync: true });
  assert.deepEqual(await store.readHistory(s.id, bounds, w), await fresh(h, s.id));
  // At the record bound the kept window is not used: the result is the fresh read's (incomplete).
  const small = { maxBytes: 1 << 20, maxRecords: 3 };
  assert.deepEqual(await store.readHistory(s.id, small, w), await fresh(h, s.id, small));
  await s.release();
});

test("a record appended by another process is in the next history", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const s = await store.create("/");
  const w = s.writer;
  await w.append({ kind: "user", turn_id: "t1", text: "mine" }, { sync: true });
  const before = await store.readHistory(s.id, bounds, w);
  assert.deepEqual(before.records.map((r) => r.kind === "user" && r.text), ["mine"]);
  // Another process appends a whole record (it does not go through this writer).
  const seq = w.peekNextSeq;
  appendFileSync(store.paths.data(s.id), JSON.stringify({ seq, at: new Date().toISOString(), kind: "user", turn_id: "x1", text: "theirs" }) + "\n");
  const after = await store.readHistory(s.id, bounds, w);
  assert.deepEqual(after.records.map((r) => r.kind === "user" && r.text), ["mine", "theirs"]);
  assert.deepEqual(after, await fresh(h, s.id));
  await s.release();
});

test("a session file replaced by another process is read again", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const s = await store.create("/");
  const w = s.writer;
  await w.append({ kind: "user", turn_id: "t1", text: "first" }, { sync: true });
  await store.readHistory(s.id, bounds, w);
  // Same header, another first record, written to a new file renamed over the session's (another inode).
  const path = store.paths.data(s.id);
  const header = readFileSync(path, "utf8").split("\n")[0] ?? "";
  const tmp = join(h, "replacement");
  writeFileSync(tmp, `${header}\n${JSON.stringify({ seq: 1, at: new Date().toISOString(), kind: "user", turn_id: "r1", text: "replaced" })}\n`);
  renameSync(tmp, path);
  const again = await store.readHistory(s.id, bounds, w);
  assert.deepEqual(again.records.map((r) => r.kind === "user" && r.text), ["replaced"]);
  await s.release();
});

test("a session this store created starts with its empty history kept; another process's append still shows", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const s = await store.create("/");
  // Kept from the create (nothing read): equal to a fresh read, under any bounds.
  const small = { maxBytes: 1 << 20, maxRecords: 1 };
  assert.deepEqual(await store.readHistory(s.id, small, s.writer), await fresh(h, s.id, small));
  assert.deepEqual(await store.readHistory(s.id, bounds, s.writer), await fresh(h, s.id));
  const other = await store.create("/");
  // Another process appends right after the create, before the first turn reads.
  appendFileSync(store.paths.data(other.id), JSON.stringify({ seq: 1, at: new Date().toISOString(), kind: "user", turn_id: "x1", text: "theirs" }) + "\n");
  const seen = await store.readHistory(other.id, bounds, other.writer);
  assert.deepEqual(seen.records.map((r) => r.kind === "user" && r.text), ["theirs"]);
  assert.deepEqual(seen, await fresh(h, other.id));
  // The writer's own first record follows the kept empty window.
  const third = await store.create("/");
  await third.writer.append({ kind: "user", turn_id: "t1", text: "mine" }, { sync: true });
  assert.deepEqual((await store.readHistory(third.id, bounds, third.writer)).records.map((r) => r.kind === "user" && r.text), ["mine"]);
  assert.deepEqual(await store.readHistory(third.id, bounds, third.writer), await fresh(h, third.id));
  await Promise.all([s.release(), other.release(), third.release()]);
});
