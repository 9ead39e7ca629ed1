/**
 * Replay projection over real session files: allowlist, parts, page bounds, cursors, resync, gap.
 * Includes the property test: for random histories (multi-byte and long text), paging from every accepted
 * cursor reconstructs exactly the projection suffix, with no item twice and none missed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStore, type NewRecord, type SessionHandle } from "../../src/store/sessions/index.js";
import { cursorAt, projectSnapshot, replayPage, type Projection, type ReplayItem } from "../../src/protocols/app-service/replay.js";
import { sanitizeText } from "../../src/protocols/app-service/replay-text.js";
import { prng } from "../helpers/prng.js";

function newStore(): SessionStore {
  return new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-replay-")) });
}

async function project(store: SessionStore, id: string): Promise<Projection> {
  const snap = await store.readWindow(id);
  assert.ok(snap !== "unchanged");
  return projectSnapshot(id, snap);
}

type Event = ReplayItem & { cursor: string };

/** Pages from `after` to the end; checks every page bound; returns events and every cursor seen. */
function pageAll(p: Projection, after: string | null, limit: number): { events: Event[]; cursors: string[] } {
  const events: Event[] = [];
  const cursors: string[] = [];
  let cur = after;
  for (let guard = 0; guard < 100_000; guard++) {
    const page = replayPage(p, cur, limit);
    assert.equal(page.resync_required, false);
    assert.ok(Buffer.byteLength(JSON.stringify(page)) <= 16384, "page payload ≤ 16 KiB");
    assert.ok(page.events.length <= limit);
    assert.equal(page.snapshot_cursor, cursorAt(p, p.items.length));
    for (const e of page.events as Event[]) {
      events.push(e);
      cursors.push(e.cursor);
    }
    cursors.push(page.next_cursor);
    if (!page.truncated) {
      assert.equal(page.next_cursor, page.snapshot_cursor, "at the end next_cursor equals snapshot_cursor");
      return { events, cursors };
    }
    assert.ok(page.events.length > 0, "a truncated page makes progress");
    cur = page.next_cursor;
  }
  throw new Error("paging did not end");
}

function strip(e: Event): ReplayItem {
  const { cursor: _c, ...rest } = e;
  return rest;
}

/** Joins parts back into whole texts, checking part numbering and the 2,048-byte bound. */
function joinParts(items: ReplayItem[]): string[] {
  const out: string[] = [];
  let acc: string | null = null;
  let expectPart = 0;
  for (const it of items) {
    if (it.kind === "terminal") {
      assert.equal(acc, null, "terminal never splits a message");
      out.push(`terminal:${it.status}`);
      continue;
    }
    assert.ok(Buffer.byteLength(it.text) <= 2048, "part ≤ 2,048 bytes");
    assert.equal(it.part, expectPart);
    acc = (acc ?? "") + it.text;
    expectPart++;
    if (it.last_part) {
      out.push(`${it.kind === "summary" ? "summary" : it.role}:${acc}`);
      acc = null;
      expectPart = 0;
    }
  }
  assert.equal(acc, null, "every text ends with last_part");
  return out;
}

test("allowlisted projection: user, partial assistant and terminal for a cancelled turn; tools and thinking never appear", async () => {
  const store = newStore();
  const s = await store.create("/");
  const w = s.writer;
  await w.append({ kind: "user", turn_id: "t1", text: "Question" });
  await w.append({ kind: "assistant", turn_id: "t1", message_id: "m1", text: "Let me look", partial: false, thinking: [{ text: "secret thoughts", signature: "sig" }] });
  await w.append({ kind: "tool_call", turn_id: "t1", message_id: "m1", call_id: "c", name: "bash", arguments: { cmd: "cat /etc/passwd" } });
  await w.append({ kind: "tool_result", turn_id: "t1", call_id: "c", name: "bash", content: "root:x:0:0", is_error: false });
  await w.append({ kind: "assistant", turn_id: "t1", message_id: "m2", text: "Partial ans", partial: true });
  const p0 = await project(store, s.id);
  assert.deepEqual(joinParts(p0.items), ["user:Question", "assistant:Let me lookPartial ans"], "in progress: assembled so far");
  await w.append({ kind: "terminal", turn_id: "t1", status: "cancelled", assistant_text: "Let me look. Partial answer" }, { sync: true });
  const p = await project(store, s.id);
  assert.deepEqual(joinParts(p.items), ["user:Question", "assistant:Let me look. Partial answer", "terminal:cancelled"]);
  const json = JSON.stringify(replayPage(p, null, 32));
  for (const banned of ["secret thoughts", "passwd", "root:x", "bash", "sig", "tool"]) assert.ok(!json.includes(banned), banned);
  // The in-progress prefix was regrouped as the turn settled: a cursor inside it is now stale.
  const stale = replayPage(p, cursorAt(p0, 2), 32);
  assert.equal(stale.resync_required, true);
  assert.deepEqual(stale.events, []);
  assert.equal(stale.next_cursor, cursorAt(p, 0));
  await s.release();
});

test("compaction: summary first, then only the conversation after the cutoff; older cursors resync", async () => {
  const store = newStore();
  const s = await store.create("/");
  const w = s.writer;
  await w.append({ kind: "user", turn_id: "t1", text: "old question" });
  const t = await w.append({ kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "old answer" });
  const before = await project(store, s.id);
  const oldCursor = cursorAt(before, 2);
  await w.append({ kind: "user", turn_id: "t2", text: "kept question" });
  await w.append({ kind: "terminal", turn_id: "t2", status: "compaction_required", assistant_text: "" });
  await w.append({ kind: "checkpoint", summary: "Earlier: asked old question.", cutoff_seq: t.seq });
  await w.flush();
  const p = await project(store, s.id);
  assert.deepEqual(joinParts(p.items), ["summary:Earlier: asked old question.", "user:kept question", "terminal:compaction_required"]);
  assert.equal(p.gap, false);
  const page = replayPage(p, null, 32);
  assert.deepEqual(Object.keys(page.events[0]!), ["cursor", "kind", "text", "part", "last_part"], "summary has no role");
  assert.equal(replayPage(p, oldCursor, 32).resync_required, true);
  await s.release();
});

test("resync_required for malformed, foreign and beyond-end cursors, with the current start in next_cursor", async () => {
  const store = newStore();
  const a = await store.create("/");
  const b = await store.create("/");
  await a.writer.append({ kind: "user", turn_id: "t", text: "same text" }, { sync: true });
  await b.writer.append({ kind: "user", turn_id: "t", text: "same text" }, { sync: true });
  const pa = await project(store, a.id);
  const pb = await project(store, b.id);
  for (const bad of ["garbage", "", "c1.00000000.0.0000000000000000", cursorAt(pa, 1), cursorAt(pa, 0), cursorAt(pb, 1).replace(/\.1\./, ".2.")]) {
    const r = replayPage(pb, bad, 32);
    assert.equal(r.resync_required, true, bad);
    assert.deepEqual(r.events, []);
    assert.equal(r.next_cursor, cursorAt(pb, 0));
    assert.equal(r.truncated, true);
  }
  // The start cursor is accepted and replays from the beginning.
  assert.equal(replayPage(pb, cursorAt(pb, 0), 32).events.length, 1);
  await a.release();
  await b.release();
});

test("gap: torn tail and malformed lines are flagged; a usable cursor coexists with the gap", async () => {
  const store = newStore();
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t", text: "hello" }, { sync: true });
  await s.release();
  const clean = await project(store, s.id);
  assert.equal(clean.gap, false);
  const c = cursorAt(clean, 1);
  appendFileSync(store.paths.data(s.id), '{"seq":2,"at":"x","kind":"us');
  const torn = await project(store, s.id);
  assert.equal(torn.gap, true);
  const r = replayPage(torn, c, 32);
  assert.equal(r.resync_required, false);
  assert.equal(r.gap, true);
});

// @req AS-SES-24 @req AS-SES-16
test("a bounded window that omits older history reports gap; with a covering checkpoint it does not", async () => {
  const store = newStore();
  const s = await store.create("/");
  for (let i = 0; i < 30; i++) await s.writer.append({ kind: "user", turn_id: `t${i}`, text: "q".repeat(200) });
  await s.writer.flush();
  const snap = await store.readWindow(s.id, { maxBytes: 2048, maxRecords: 100, quantumBytes: 256 });
  assert.ok(snap !== "unchanged");
  assert.equal(projectSnapshot(s.id, snap).gap, true);
  const last = await s.writer.append({ kind: "user", turn_id: "tz", text: "z" });
  await s.writer.append({ kind: "checkpoint", summary: "all of it", cutoff_seq: last.seq - 1 }, { sync: true });
  const snap2 = await store.readWindow(s.id, { maxBytes: 2048, maxRecords: 100, quantumBytes: 256 });
  assert.ok(snap2 !== "unchanged");
  const p = projectSnapshot(s.id, snap2);
  assert.equal(p.gap, false);
  assert.deepEqual(joinParts(p.items), ["summary:all of it", "user:z"]);
  await s.release();
});

test("worst-case escaping still yields pages within 16 KiB and at least one item per page", async () => {
  const store = newStore();
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t", text: '"\\'.repeat(6000) + "\n".repeat(3000) + "\u2028".repeat(2000) }, { sync: true });
  const p = await project(store, s.id);
  const { events } = pageAll(p, null, 32);
  assert.equal(events.length, p.items.length);
  await s.release();
});

// ------------------------------------------------------------------ property test


const ALPHABET = ["a", "b", " ", "é", "中", "🌍", "\n", '"', "\\", "\u0001", "\r\n", "ß", "\u2028", "𝄞"];

function randomText(rnd: () => number): string {
  const long = rnd() < 0.15;
  const n = long ? 1000 + Math.floor(rnd() * 5000) : Math.floor(rnd() * 40);
  let s = "";
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(rnd() * ALPHABET.length)];
  return s;
}

async function randomHistory(w: SessionHandle["writer"], rnd: () => number): Promise<string[]> {
  const expected: string[] = [];
  const turns = 1 + Math.floor(rnd() * 8);
  for (let t = 0; t < turns; t++) {
    const turnId = `t${t}`;
    const user = randomText(rnd);
    await w.append({ kind: "user", turn_id: turnId, text: user });
    expected.push(`user:${sanitizeText(user)}`);
    let assembled = "";
    const msgs = Math.floor(rnd() * 3);
    for (let m = 0; m < msgs; m++) {
      const text = randomText(rnd);
      assembled += text;
      const rec: NewRecord = { kind: "assistant", turn_id: turnId, message_id: `m${m}`, text, partial: false };
      await w.append(rec);
      if (rnd() < 0.5) await w.append({ kind: "tool_call", turn_id: turnId, message_id: `m${m}`, call_id: `c${m}`, name: "read", arguments: { p: randomText(rnd) } });
    }
    const status = (["completed", "cancelled", "failed", "compaction_required"] as const)[Math.floor(rnd() * 4)]!;
    const aText = sanitizeText(assembled);
    if (aText !== "") expected.push(`assistant:${aText}`);
    await w.append({ kind: "terminal", turn_id: turnId, status, assistant_text: assembled });
    expected.push(`terminal:${status}`);
  }
  await w.flush();
  return expected;
}

// @req AS-SES-22 @req AS-SES-18
test("property: paging from every accepted cursor reconstructs exactly the projection (random histories)", async () => {
  const store = newStore();
  for (let seed = 1; seed <= 25; seed++) {
    const rnd = prng(seed * 7919);
    const s = await store.create("/");
    const expected = await randomHistory(s.writer, rnd);
    const p = await project(store, s.id);
    assert.equal(p.gap, false);
    const limit = 1 + Math.floor(rnd() * 32);
    const full = pageAll(p, null, limit);
    const items = full.events.map(strip);
    assert.deepEqual(items, p.items, `seed ${seed}: pages concatenate to the projection`);
    assert.deepEqual(joinParts(items), expected, `seed ${seed}: texts and order match the history`);
    // Every accepted cursor resumes exactly after its item: no item twice, none missed.
    for (const [k, c] of full.cursors.entries()) {
      const from = pageAll(p, c, 1 + ((k * 13) % 32));
      const n = k < full.events.length ? full.events.findIndex((e) => e.cursor === c) + 1 : -1;
      const startAt = n > 0 ? n : p.items.length - from.events.length;
      assert.deepEqual(from.events.map(strip), p.items.slice(startAt), `seed ${seed}: suffix after cursor ${k}`);
      assert.deepEqual(from.events.map((e) => e.cursor), full.events.slice(startAt).map((e) => e.cursor));
    }
    // Cursors survive a restart (fresh store, fresh projection) and append-only growth of settled history.
    await s.release();
    const again = new SessionStore({ home: store.paths.sessionsDir.replace(/\/sessions$/, "") });
    const h = await again.acquire(s.id);
    await h.writer.append({ kind: "user", turn_id: "later", text: "more" }, { sync: true });
    await h.release();
    const p2 = await project(again, s.id);
    for (const c of full.cursors) {
      const r = replayPage(p2, c, 32);
      assert.equal(r.resync_required, false, `seed ${seed}: cursor survives restart + append`);
    }
    const tail = pageAll(p2, full.cursors.at(-1)!, 32);
    assert.deepEqual(joinParts(tail.events.map(strip)), ["user:more"]);
  }
});
