/**
 * A session created with its records (`SessionStore.createWith`, create-whole.ts: the copy a fork makes) appears whole
 * or not at all: written under a temporary name, fsynced, then linked into place. A refused record or write leaves
 * nothing; a temporary file is never listed, is left alone while its creator lives (it holds the new ID's lease) and
 * is removed by `list` once that lease is free. The crash itself: crash-fork.test.ts.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { linkSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionError, SessionStore, type NewRecord } from "../../src/store/sessions/index.js";
import { DEFAULT_LOCK_TUNING, SessionLocks } from "../../src/store/sessions/locks.js";
import { syncData } from "../../src/store/sessions/fdio.js";
import { fileRecords } from "./crash-rig.js";

const errno = (code: string): NodeJS.ErrnoException => Object.assign(new Error(`${code}: write '/secret/path'`), { code });
const home = (): string => mkdtempSync(join(tmpdir(), "berth-whole-"));
const TURN: NewRecord[] = [
  { kind: "user", turn_id: "t1", text: "the question" },
  { kind: "assistant", turn_id: "t1", message_id: "m1", text: `the answer ${"x".repeat(1_500_000)}`, partial: false },
  { kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "the answer" },
  { kind: "checkpoint", summary: "a summary", cutoff_seq: 3 },
];
const ids = async (store: SessionStore): Promise<string[]> => (await store.list(null, 32)).entries.map((e) => e.id);

test("createWith: every record, seqs from 1 in order, each stamped; durable and listed; nothing held after", async () => {
  const h = home();
  let now = Date.parse("2026-12-04T10:00:00Z");
  const syncs: number[] = [];
  const store = new SessionStore({ home: h, clock: () => (now += 1000), syncData: (fd) => (syncs.push(fd), syncData(fd)) });
  const id = await store.createWith("/work", TURN);
  assert.equal(syncs.length, 1, "the copy is fsynced (the directory too, before it resolves)");
  const { records, bad } = fileRecords(h, id);
  assert.deepEqual(bad, []);
  assert.deepEqual(records.map(({ at: _a, ...r }) => r), TURN.map((r, i) => ({ seq: i + 1, ...r })));
  assert.deepEqual(records.map((r) => r.at), ["2026-12-04T10:00:03.000Z", "2026-12-04T10:00:04.000Z", "2026-12-04T10:00:05.000Z", "2026-12-04T10:00:06.000Z"]);
  assert.deepEqual(readdirSync(join(h, "sessions")), [`${id}.jsonl`]);
  assert.deepEqual(readdirSync(join(h, "session-locks")), [], "its lease is released");
  assert.deepEqual(await ids(store), [id]);
  // A writer opened on it continues the seqs.
  const w = await store.acquire(id);
  assert.equal((await w.writer.append({ kind: "user", turn_id: "t2", text: "next" })).seq, 5);
  await w.release();
});

test("createWith: an invalid record, or a write the disk refuses, fails it whole and leaves nothing", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const invalid = [...TURN.slice(0, 2), { kind: "terminal", turn_id: "t1", status: "interrupted", assistant_text: "" } as unknown as NewRecord];
  await assert.rejects(store.createWith("/", invalid), (e: unknown) => e instanceof SessionError && e.code === "invalid_record");
  const big: NewRecord = { kind: "user", turn_id: "t1", text: "x".repeat(4 * 1024 * 1024) };
  await assert.rejects(store.createWith("/", [big]), (e: unknown) => e instanceof SessionError && e.code === "invalid_record");
  const full = new SessionStore({ home: h, syncData: () => Promise.reject(errno("ENOSPC")) });
  await assert.rejects(full.createWith("/", TURN), (e: unknown) => e instanceof SessionError && e.code === "unavailable" && e.storage === "ENOSPC");
  assert.deepEqual(readdirSync(join(h, "sessions")), []);
  assert.deepEqual(readdirSync(join(h, "session-locks")), []);
});

test("a temporary copy is never listed; list removes it once its creator's lease is free, never while held", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const kept = await store.createWith("/", TURN);
  const id = "s0000000000-abandoned";
  const tmp = join(h, "sessions", `${id}.jsonl.tmp`);
  // A creator at work: another lock owner of this process holds the ID's lease.
  const creator = await new SessionLocks(store.paths, DEFAULT_LOCK_TUNING).acquireLease(id);
  writeFileSync(tmp, fileRecords(h, kept).text.replace(kept, id));
  assert.deepEqual(await ids(store), [kept], "a temporary copy is not a session");
  assert.ok(readdirSync(join(h, "sessions")).includes(`${id}.jsonl.tmp`), "kept while its creator holds the lease");
  await creator.release();
  assert.deepEqual(await ids(store), [kept]);
  assert.deepEqual(readdirSync(join(h, "sessions")), [`${kept}.jsonl`], "removed once the lease is free");
  assert.deepEqual(readdirSync(join(h, "session-locks")), []);

  // Killed between the link and the removal of the temporary name: the session is whole, the name is debris.
  linkSync(join(h, "sessions", `${kept}.jsonl`), join(h, "sessions", `${kept}.jsonl.tmp`));
  assert.deepEqual(await ids(store), [kept]);
  assert.deepEqual(readdirSync(join(h, "sessions")), [`${kept}.jsonl`]);
  assert.equal(fileRecords(h, kept).records.length, TURN.length, "the session itself is untouched");
});
