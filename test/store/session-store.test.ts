/** Session store: IDs, strict writes, tolerant reads, torn tails, leases, append lock, list, history. Real files. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir, hostname } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { SessionError, SessionStore, isValidSessionId } from "../../src/store/sessions/index.js";
import { SessionPaths } from "../../src/store/sessions/paths.js";
import { SessionLocks } from "../../src/store/sessions/locks.js";

function home(): string {
  return mkdtempSync(join(tmpdir(), "berth-store-"));
}

async function rejectsCode(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => e instanceof SessionError && e.code === code);
}

/** A pid that is certainly dead: a child that already exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
  return Number(r.stdout);
}

const UNSAFE = ["..", "../x", "a/b", "a\\b", "a\u0000b", "/abs", ".hidden", "x".repeat(129), "é", "a..b", "", " a", "a:b"];

// @req AS-SES-11
test("unsafe IDs are rejected before any path is built, by every operation", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  for (const id of UNSAFE) {
    assert.equal(isValidSessionId(id), false, JSON.stringify(id));
    assert.throws(() => store.paths.data(id), (e: unknown) => e instanceof SessionError && e.code === "invalid_id");
    await rejectsCode(store.acquire(id), "invalid_id");
    await rejectsCode(store.readWindow(id), "invalid_id");
    await rejectsCode(store.list(id, 5), "invalid_id");
  }
  assert.equal(isValidSessionId("x".repeat(128)), true);
  // Nothing was created for any of them.
  assert.deepEqual(readdirSync(h), []);
});

test("create writes the header durably; appends get increasing seq; strict write, tolerant read", async () => {
  const h = home();
  let t = 1_700_000_000_000;
  const store = new SessionStore({ home: h, clock: () => t++ });
  const s = await store.create("/work/proj");
  const raw = readFileSync(store.paths.data(s.id), "utf8");
  const header = JSON.parse(raw.split("\n")[0]!) as Record<string, unknown>;
  assert.deepEqual(header, { kind: "header", format: 1, session_id: s.id, created_at: header.created_at, cwd: "/work/proj" });
  const a = await s.writer.append({ kind: "user", turn_id: "t1", text: "héllo 🌍" });
  const b = await s.writer.append({ kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "ok" }, { sync: true });
  assert.equal(a.seq, 1);
  assert.equal(b.seq, 2);
  // Strict on write: unknown fields, ill-formed strings and bad enums are refused and nothing is written.
  const before = readFileSync(store.paths.data(s.id), "utf8");
  await rejectsCode(s.writer.append({ kind: "user", turn_id: "t1", text: "x", extra: 1 } as never), "invalid_record");
  await rejectsCode(s.writer.append({ kind: "user", turn_id: "t1", text: "bad \ud800 surrogate" }), "invalid_record");
  await rejectsCode(s.writer.append({ kind: "terminal", turn_id: "t1", status: "done", assistant_text: "" } as never), "invalid_record");
  await s.writer.flush();
  assert.equal(readFileSync(store.paths.data(s.id), "utf8"), before);
  const c = await s.writer.append({ kind: "user", turn_id: "t2", text: "next" });
  assert.equal(c.seq, 3, "a rejected record consumes no seq");
  await s.release();
  // Tolerant read: bad lines are counted, never silently dropped; unknown kinds are counted separately.
  appendFileSync(store.paths.data(s.id), "not json\n" + JSON.stringify({ seq: 9, at: "x", kind: "future_kind" }) + "\n{\"seq\":10}\n");
  const w = await store.readWindow(s.id);
  assert.ok(w !== "unchanged");
  assert.deepEqual(w.records.map((r) => r.seq), [1, 2, 3]);
  assert.equal(w.badLines, 2);
  assert.equal(w.unknownLines, 1);
  assert.equal(w.torn, false);
});

// @req AS-SES-21
test("torn last line: tolerated and reported, earlier records intact, next append starts on a fresh line", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t1", text: "first" }, { sync: true });
  await s.release();
  appendFileSync(store.paths.data(s.id), '{"seq":2,"at":"2024-01-01T00:00:00.000Z","kind":"user","turn_id":"t2","te');
  const w1 = await store.readWindow(s.id);
  assert.ok(w1 !== "unchanged");
  assert.equal(w1.torn, true);
  assert.deepEqual(w1.records.map((r) => r.seq), [1]);
  const again = await store.acquire(s.id);
  const r = await again.writer.append({ kind: "user", turn_id: "t3", text: "after crash" }, { sync: true });
  assert.equal(r.seq, 2, "seq continues after the last valid record");
  await again.release();
  const w2 = await store.readWindow(s.id);
  assert.ok(w2 !== "unchanged");
  assert.equal(w2.torn, false);
  assert.equal(w2.badLines, 1, "the torn fragment stays one isolated bad line");
  assert.deepEqual(w2.records.map((x) => [x.seq, x.kind === "user" ? x.text : ""]), [[1, "first"], [2, "after crash"]]);
});

// @req AS-SES-19
test("writer lease: exclusive; released lease can be re-taken; a dead holder's lease is recovered at once", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const s = await store.create("/");
  await rejectsCode(store.acquire(s.id), "busy");
  await rejectsCode(new SessionStore({ home: h }).acquire(s.id), "busy");
  await s.release();
  const s2 = await store.acquire(s.id);
  await s2.release();
  // Simulate a holder killed with SIGKILL: lease directory fresh, owner file naming a dead pid on this host.
  const paths = new SessionPaths(h);
  mkdirSync(paths.lease(s.id));
  writeFileSync(paths.owner(s.id), JSON.stringify({ pid: deadPid(), host: hostname(), token: "gone" }));
  // Recovered by the dead owner's pid, not by age: a store whose staleness window is an hour still takes it.
  const s3 = await new SessionStore({ home: h, locks: { staleMs: 3_600_000 } }).acquire(s.id);
  assert.equal(s3.lease.lost, false);
  await s3.release();
  assert.equal(existsSync(paths.lease(s.id)), false);
  assert.equal(existsSync(paths.owner(s.id)), false);
});

test("owner-less lease: busy while fresh, recovered once older than the stale threshold", async () => {
  const h = home();
  const store = new SessionStore({ home: h, locks: { staleMs: 5000 } });
  const s = await store.create("/");
  await s.release();
  const paths = new SessionPaths(h);
  mkdirSync(paths.lease(s.id));
  await rejectsCode(store.acquire(s.id), "busy");
  const old = new Date(Date.now() - 60_000);
  utimesSync(paths.lease(s.id), old, old);
  const s2 = await store.acquire(s.id);
  await s2.release();
});

test("a live foreign owner (other host) is never recovered while its lease is fresh", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const s = await store.create("/");
  await s.release();
  const paths = new SessionPaths(h);
  mkdirSync(paths.lease(s.id));
  writeFileSync(paths.owner(s.id), JSON.stringify({ pid: deadPid(), host: "another-host", token: "t" }));
  await rejectsCode(store.acquire(s.id), "busy");
});

// @req AS-SES-20
test("append lock: replay waits then reports busy on a live conflict; proceeds when the lease holder is dead", async () => {
  const h = home();
  const store = new SessionStore({ home: h, locks: { readerWaitMs: 50 } });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t", text: "x" }, { sync: true });
  const locks = new SessionLocks(store.paths);
  // A live holder of the lock: a reader (only the lease holder's writer takes a writer's lock, and `s` holds the
  // lease: a writer's lock held by anyone else is an abandoned one, removed at once; docs/sessions.md rule (b)).
  const release = await locks.acquireAppend(s.id, "reader");
  assert.ok(release);
  await rejectsCode(store.readWindow(s.id), "busy");
  // While the append lock is held, the writer's own batch waits (not fails) and lands after release.
  const pending = s.writer.append({ kind: "user", turn_id: "t", text: "y" });
  await release();
  await pending;
  const w = await store.readWindow(s.id);
  assert.ok(w !== "unchanged" && w.records.length === 2);
  await s.release();
  // Abandoned append lock of a dead holder: readers go ahead.
  const paths = store.paths;
  mkdirSync(paths.lease(s.id));
  writeFileSync(paths.owner(s.id), JSON.stringify({ pid: deadPid(), host: hostname(), token: "gone" }));
  mkdirSync(paths.append(s.id));
  const w2 = await store.readWindow(s.id);
  assert.ok(w2 !== "unchanged" && w2.records.length === 2);
});

// @req AS-SES-24
test("readWindow: byte window quantized, omitted flagged, header still validated; unchanged versions skip the read", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const s = await store.create("/");
  for (let i = 0; i < 200; i++) await s.writer.append({ kind: "user", turn_id: `t${i}`, text: "y".repeat(100) });
  await s.writer.flush();
  const full = await store.readWindow(s.id);
  assert.ok(full !== "unchanged" && full.records.length === 200 && !full.omitted);
  const small = await store.readWindow(s.id, { maxBytes: 4096, maxRecords: 1000, quantumBytes: 1024 });
  assert.ok(small !== "unchanged");
  assert.ok(small.omitted);
  assert.ok(small.records.length > 0 && small.records.length < 40);
  assert.equal(small.badLines, 0, "the partial first line of the window is dropped, not counted");
  assert.equal(small.records.at(-1)?.seq, 200);
  const byCount = await store.readWindow(s.id, { maxBytes: 1 << 20, maxRecords: 10, quantumBytes: 1 });
  assert.ok(byCount !== "unchanged" && byCount.omitted && byCount.records.length === 10);
  assert.equal(await store.readWindow(s.id, undefined, full.version), "unchanged");
  await s.release();
});

test("readHistory: full records after the last valid checkpoint; incomplete when the window cuts uncovered history", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const s = await store.create("/");
  const w = s.writer;
  await w.append({ kind: "user", turn_id: "t1", text: "old" });
  await w.append({ kind: "tool_call", turn_id: "t1", message_id: "m1", call_id: "c1", name: "read", arguments: { path: "a" } });
  await w.append({ kind: "tool_result", turn_id: "t1", call_id: "c1", name: "read", content: "data", is_error: false });
  const term = await w.append({ kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "done" });
  await w.append({ kind: "checkpoint", summary: "we read a", cutoff_seq: term.seq });
  await w.append({ kind: "checkpoint", summary: "invalid: cutoff after itself", cutoff_seq: 999 });
  await w.append({ kind: "user", turn_id: "t2", text: "new" }, { sync: true });
  const hist = await store.readHistory(s.id, { maxBytes: 1 << 20, maxRecords: 1000 });
  assert.equal(hist.checkpoint?.summary, "we read a");
  assert.deepEqual(hist.records.map((r) => r.kind), ["user"]);
  assert.equal(hist.complete, true);
  const tiny = await store.readHistory(s.id, { maxBytes: 1 << 20, maxRecords: 1 });
  assert.equal(tiny.checkpoint, null);
  assert.equal(tiny.complete, false);
  await s.release();
});

// @req AS-SES-08
test("list: ordered by ID, paged with after/next_after/truncated; unreadable candidates mark incomplete; scan budget", async () => {
  const h = home();
  const ids = ["a1", "b2", "c3", "d4", "e5"];
  let k = 0;
  const store = new SessionStore({ home: h, newId: () => ids[k++]!, maxScanEntries: 7 });
  for (let i = 0; i < 5; i++) {
    const s = await store.create("/");
    await s.writer.append({ kind: "user", turn_id: "t", text: `  Title\n${i}  api_key=sk-abcdefghijklmnopqrstuvwxyz ` }, { sync: true });
    await s.release();
  }
  const p1 = await store.list(null, 2);
  assert.deepEqual(p1.entries.map((e) => e.id), ["a1", "b2"]);
  assert.equal(p1.nextAfter, "b2");
  assert.equal(p1.truncated, true);
  assert.equal(p1.incomplete, false);
  assert.match(p1.entries[0]!.titleSource ?? "", /^ {2}Title\n0/);
  const p2 = await store.list("b2", 32);
  assert.deepEqual(p2.entries.map((e) => e.id), ["c3", "d4", "e5"]);
  assert.equal(p2.truncated, false);
  // A damaged header: examined (next_after moves past it) but not returned; incomplete.
  writeFileSync(store.paths.data("c3"), "garbage\n");
  const p3 = await store.list("b2", 2);
  assert.deepEqual(p3.entries.map((e) => e.id), ["d4"]);
  assert.equal(p3.nextAfter, "d4");
  assert.equal(p3.incomplete, true);
  // Non-session entries count toward the budget: 5 sessions + 2 others = 7 entries is fine, 8 is limit.
  writeFileSync(join(store.paths.sessionsDir, "notes.txt"), "");
  writeFileSync(join(store.paths.sessionsDir, "bad..name.jsonl"), "");
  const p4 = await store.list(null, 32);
  assert.equal(p4.incomplete, true, "an unrepresentable session file name marks incomplete");
  writeFileSync(join(store.paths.sessionsDir, "x"), "");
  await rejectsCode(store.list(null, 32), "limit");
  // Missing directory: empty page.
  const empty = await new SessionStore({ home: home() }).list(null, 32);
  assert.deepEqual(empty, { entries: [], nextAfter: null, truncated: false, incomplete: false });
});

test("a first user message longer than the metadata read still yields a title prefix", async () => {
  const h = home();
  const store = new SessionStore({ home: h });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t", text: "Long \"quoted\" prompt é " + "z".repeat(20000) }, { sync: true });
  await s.release();
  const p = await store.list(null, 1);
  assert.ok(p.entries[0]?.titleSource?.startsWith('Long "quoted" prompt é zzz'));
});

test("create: a sessions directory that cannot be made refuses with unavailable, and a later create succeeds", async () => {
  const h = home();
  // A regular file where the sessions directory belongs: mkdir fails.
  writeFileSync(join(h, "sessions"), "not a directory");
  const store = new SessionStore({ home: h });
  await rejectsCode(store.create("/"), "unavailable");
  // The failure is not remembered: once the obstacle is gone, the same store creates the directories and the session.
  rmSync(join(h, "sessions"));
  const s = await store.create("/");
  assert.equal(JSON.parse(readFileSync(new SessionPaths(h).data(s.id), "utf8").split("\n")[0]!).session_id, s.id);
  await rejectsCode(new SessionStore({ home: h }).acquire(s.id), "busy");
  await s.release();
});

test("create: an ID whose file exists is retried under a new one, and the lease taken for it is given back", async () => {
  const h = home();
  const first = await new SessionStore({ home: h }).create("/");
  await first.release();
  const fresh = "s00000000001-0123456789abcdef0123";
  const ids = [first.id, fresh];
  const store = new SessionStore({ home: h, newId: () => ids.shift() ?? "s00000000002-ffffffffffffffffffff" });
  const s = await store.create("/tmp");
  assert.equal(s.id, fresh);
  // The existing session's file is untouched and its lease free (the collision's lease was released).
  assert.equal(JSON.parse(readFileSync(new SessionPaths(h).data(first.id), "utf8").split("\n")[0]!).cwd, "/");
  const again = await new SessionStore({ home: h }).acquire(first.id);
  await again.release();
  // The new one is held from the moment create resolved.
  await rejectsCode(new SessionStore({ home: h }).acquire(fresh), "busy");
  await s.release();
});
