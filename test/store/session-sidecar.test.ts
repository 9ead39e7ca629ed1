/**
 * Store read paths added for replay performance: sidecars (keyed by file version, checksummed, atomic, never
 * trusted over the JSONL), records left out of a window (validated exactly like the others), and lock-free window
 * reads that still respect the append lock. Real files.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStore, type FileVersion, type WindowSnapshot } from "../../src/store/sessions/index.js";
import { SessionLocks } from "../../src/store/sessions/locks.js";
import { ABANDONED_TMP_MS, sweepAbandonedTemps } from "../../src/store/sessions/sidecar.js";

function newStore(): SessionStore {
  return new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-sidecar-")) });
}

async function snapshot(store: SessionStore, id: string, leaveOut?: ReadonlySet<"tool_call" | "tool_result">): Promise<WindowSnapshot> {
  const w = await store.readWindow(id, undefined, undefined, leaveOut);
  assert.ok(w !== "unchanged");
  return w;
}

test("sidecar: returned with its version only for the same session and format, with an intact checksum", async () => {
  const store = newStore();
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t", text: "hello" }, { sync: true });
  const v: FileVersion = (await snapshot(store, s.id)).version;
  const payload = Buffer.from("projection bytes é", "utf8");
  await store.writeSidecar(s.id, "fmt-1", v, payload);
  assert.deepEqual(await store.readSidecar(s.id, "fmt-1"), { version: v, payload });
  assert.deepEqual(readdirSync(store.paths.indexDir), [`${s.id}.proj`], "no temporary file left behind");
  // Other format, other session: ignored.
  assert.equal(await store.readSidecar(s.id, "fmt-2"), null);
  const other = await store.create("/");
  writeFileSync(store.paths.sidecar(other.id), readFileSync(store.paths.sidecar(s.id)));
  assert.equal(await store.readSidecar(other.id, "fmt-1"), null, "a sidecar copied to another session is foreign");
  // Damage anywhere (payload byte, truncation, garbage) is detected.
  const good = readFileSync(store.paths.sidecar(s.id));
  const flipped = Buffer.from(good);
  flipped[flipped.length - 40] = (flipped[flipped.length - 40] as number) ^ 1;
  writeFileSync(store.paths.sidecar(s.id), flipped);
  assert.equal(await store.readSidecar(s.id, "fmt-1"), null);
  writeFileSync(store.paths.sidecar(s.id), good.subarray(0, good.length - 1));
  assert.equal(await store.readSidecar(s.id, "fmt-1"), null);
  writeFileSync(store.paths.sidecar(s.id), "garbage");
  assert.equal(await store.readSidecar(s.id, "fmt-1"), null);
  // A rewrite replaces it atomically, with the new version; a missing index directory is simply "none".
  const v2 = { ...v, size: v.size + 10 };
  await store.writeSidecar(s.id, "fmt-1", v2, payload);
  assert.deepEqual(await store.readSidecar(s.id, "fmt-1"), { version: v2, payload });
  assert.equal(await newStore().readSidecar(s.id, "fmt-1"), null);
  await s.release();
  await other.release();
});

test("sidecar: a payload of several read chunks is returned whole, and damage in any chunk or at their seams is detected", async () => {
  const store = newStore();
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t", text: "hello" }, { sync: true });
  const v: FileVersion = (await snapshot(store, s.id)).version;
  // Over three 256 KiB read chunks, every byte position distinguishable.
  const payload = Buffer.alloc(3 * 256 * 1024 + 12345);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 131 + (i >>> 8)) & 0xff;
  await store.writeSidecar(s.id, "fmt-1", v, payload);
  assert.deepEqual(await store.readSidecar(s.id, "fmt-1"), { version: v, payload });
  const good = readFileSync(store.paths.sidecar(s.id));
  for (const at of [0, 100, 256 * 1024 - 1, 256 * 1024, 2 * 256 * 1024 + 7, good.length - 33, good.length - 32, good.length - 1]) {
    const bad = Buffer.from(good);
    bad[at] = (bad[at] as number) ^ 0x10;
    writeFileSync(store.paths.sidecar(s.id), bad);
    assert.equal(await store.readSidecar(s.id, "fmt-1"), null, `a flipped byte at ${at}`);
  }
  for (const len of [256 * 1024, 256 * 1024 + 1, good.length - 32, good.length - 1]) {
    writeFileSync(store.paths.sidecar(s.id), good.subarray(0, len));
    assert.equal(await store.readSidecar(s.id, "fmt-1"), null, `truncated to ${len} bytes`);
  }
  writeFileSync(store.paths.sidecar(s.id), good);
  assert.deepEqual(await store.readSidecar(s.id, "fmt-1"), { version: v, payload });
  await s.release();
});

test("left-out kinds are validated like every other record (bad lines, seq order, firstSeq) but not returned", async () => {
  const store = newStore();
  const s = await store.create("/");
  const w = s.writer;
  await w.append({ kind: "tool_result", turn_id: "t", call_id: "c0", name: "read", content: "first record is a tool é", is_error: false });
  await w.append({ kind: "user", turn_id: "t", text: "question 中" });
  await w.append({ kind: "tool_call", turn_id: "t", message_id: "m", call_id: "c", name: "read", arguments: { path: "ü/x" } });
  await w.append({ kind: "tool_result", turn_id: "t", call_id: "c", name: "read", content: "内容 \u2028 \"quoted\"", is_error: false });
  await w.append({ kind: "terminal", turn_id: "t", status: "completed", assistant_text: "answer" }, { sync: true });
  await s.release();
  const at = '"at":"2024-01-01T00:00:00.000Z"';
  appendFileSync(
    store.paths.data(s.id),
    [
      `{"seq":3,${at},"kind":"tool_call","turn_id":"t","message_id":"m","call_id":"c","name":"x","arguments":{}}`, // seq regression
      `{"seq":20,${at},"kind":"tool_result","turn_id":"t","call_id":"c","name":"x","content":5,"is_error":false}`, // bad type
      `{"seq":21,${at},"kind":"tool_result","turn_id":"t","call_id":"c","name":"x","content":"cut`, // malformed JSON
      `{"seq":22,${at},"kind":"tool_call","turn_id":"t","message_id":"m","call_id":"c","name":"x","arguments":{},"kind":"user","text":"dup"}`,
      `{"seq":23,${at},"kind":"tool_resultx","turn_id":"t"}`, // unknown kind
      `{"seq":24,${at},"kind":"tool_call","turn_id":"t","message_id":"m","call_id":"c","name":"\u00e9\u00ff","arguments":{"a":"\\u00e9"}}`,
      "",
    ].join("\n"),
  );
  const full = await snapshot(store, s.id);
  const lean = await snapshot(store, s.id, new Set(["tool_call", "tool_result"]));
  assert.deepEqual(lean.records, full.records.filter((r) => r.kind !== "tool_call" && r.kind !== "tool_result"));
  assert.deepEqual(
    lean.records.map((r) => r.kind),
    ["user", "terminal", "user"],
    "a line whose last `kind` is not left out is decoded normally",
  );
  assert.equal(lean.records[2]?.kind === "user" && lean.records[2].text, "dup");
  for (const k of ["badLines", "unknownLines", "torn", "omitted", "firstSeq"] as const) assert.equal(lean[k], full[k], k);
  assert.equal(full.badLines, 3);
  assert.equal(full.unknownLines, 1);
  assert.equal(lean.firstSeq, 1, "firstSeq counts a left-out first record");
});

test("lock-free reads never create the append lock, yet a held append lock still means busy", async () => {
  const store = new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-sidecar-")), locks: { readerWaitMs: 50 } });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t", text: "x" }, { sync: true });
  await snapshot(store, s.id);
  assert.equal(existsSync(store.paths.append(s.id)), false);
  // A live holder of the lock: a reader (`s` holds the lease, so a writer's lock held by anyone else is abandoned).
  const release = await new SessionLocks(store.paths).acquireAppend(s.id, "reader");
  await assert.rejects(store.readWindow(s.id), (e: unknown) => (e as { code?: string }).code === "busy");
  await release?.();
  // A torn tail is re-read under the lock (and reported torn, as nothing is appending).
  appendFileSync(store.paths.data(s.id), '{"seq":9,"at":"x","kind":"us');
  assert.equal((await snapshot(store, s.id)).torn, true);
  assert.equal(existsSync(store.paths.append(s.id)), false, "the lock taken for the re-read is released");
  await s.release();
});

test("sidecar: a killed writer's temporary file is removed by the next store's first write; a live one's kept", async () => {
  const store = newStore();
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t", text: "hello" }, { sync: true });
  const v: FileVersion = (await snapshot(store, s.id)).version;
  mkdirSync(store.paths.indexDir, { mode: 0o700 });
  const dead = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
  const deadTmp = `${s.id}.proj.${dead.stdout}-0123456789ab.tmp`;
  const liveTmp = `${s.id}.proj.${process.ppid}-0123456789ab.tmp`;
  const otherFile = `${s.id}.proj.notes.tmp`;
  for (const n of [deadTmp, liveTmp, otherFile]) writeFileSync(join(store.paths.indexDir, n), "half a sidecar");
  await store.writeSidecar(s.id, "fmt-1", v, Buffer.from("p"));
  assert.deepEqual(readdirSync(store.paths.indexDir).sort(), [`${s.id}.proj`, otherFile, liveTmp].sort(), "the dead writer's removed");
});

test("sidecar: a temporary file of a live pid (or this process's) is abandoned at ABANDONED_TMP_MS of age, not before", async () => {
  const dir = mkdtempSync(join(tmpdir(), "berth-sidecar-sweep-"));
  for (const pid of [process.pid, process.ppid]) {
    const name = join(dir, `s.proj.${pid}-0123456789ab.tmp`);
    writeFileSync(name, "x");
    const mtime = statSync(name).mtimeMs;
    await sweepAbandonedTemps(dir, mtime + ABANDONED_TMP_MS - 1);
    assert.ok(existsSync(name), `pid ${pid}: one ms before the bound, kept`);
    await sweepAbandonedTemps(dir, mtime + ABANDONED_TMP_MS);
    assert.ok(!existsSync(name), `pid ${pid}: at the bound, removed`);
  }
});
