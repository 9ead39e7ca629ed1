/**
 * Paging a stored session's whole history, older than any read window (`pageHistory`: cursors carry the byte offset
 * of their turn's prompt record), and side-chat sessions (`sideChatSession`), against a real session store.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import { pageHistory, readTurns, sideChatSession } from "../../src/runtime/session/transcript.js";

function rig(): { manager: SessionManager; cwd: string; home: string } {
  const home = mkdtempSync(join(tmpdir(), "hp-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "hp-cwd-"));
  return { manager: new SessionManager(new SessionStore({ home })), cwd, home };
}

/** A session of `n` completed turns t0…t(n-1), each about `pad` bytes; the last `open` of them without a terminal. */
async function session(manager: SessionManager, cwd: string, n: number, pad: number, open = 0): Promise<string> {
  const h = await manager.store.create(cwd);
  for (let i = 0; i < n; i++) {
    await h.writer.append({ kind: "user", turn_id: `t${i}`, text: `q${i} ${"x".repeat(pad)}` });
    if (i === 1) await h.writer.append({ kind: "user", turn_id: "t1", text: "a steering message" });
    if (i < n - open) await h.writer.append({ kind: "terminal", turn_id: `t${i}`, status: "completed", assistant_text: `a${i}` });
  }
  await h.release();
  return h.id;
}

/** Every page from the newest back, as turn IDs per page. */
async function walk(manager: SessionManager, id: string, limit: number, maxBytes: number): Promise<{ pages: string[][]; cursors: string[] }> {
  const pages: string[][] = [];
  const cursors: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 1000; i++) {
    const p = await pageHistory(manager, id, cursor, limit, maxBytes);
    assert.ok(p, `page after ${String(cursor)}`);
    pages.push(p.turns.map((t) => t.id));
    if (p.next === null) break;
    cursors.push(p.next);
    cursor = p.next;
  }
  return { pages, cursors };
}

test("pageHistory walks a session far longer than its read window, every turn exactly once and in order", async () => {
  const { manager, cwd } = rig();
  const id = await session(manager, cwd, 60, 900); // ~60 KiB of records
  const window = 8 * 1024; // a handful of turns per read
  assert.ok((await readTurns(manager, id, { maxBytes: window, maxRecords: 1_000_000, quantumBytes: 1 })).length < 60, "the window alone cannot reach the oldest turns");
  const { pages, cursors } = await walk(manager, id, 5, window);
  const all = pages.slice().reverse().flat();
  assert.deepEqual(all, Array.from({ length: 60 }, (_, i) => `t${i}`));
  for (const p of pages) assert.ok(p.length <= 5 && p.length > 0);
  for (const c of cursors) assert.match(c, /^before:t\d+@\d+$/);
  // Turns keep their content across pages; the steering message stays part of its turn.
  const oldest = await pageHistory(manager, id, cursors[cursors.length - 1]!, 5, window);
  const t1 = oldest!.turns.find((t) => t.id === "t1")!;
  assert.equal(t1.responseText, "a1");
  assert.match(t1.userText, /^q1 /);
  // With the default window the same history pages identically.
  assert.deepEqual((await walk(manager, id, 5, 64 * 1024 * 1024)).pages.reverse().flat(), all);
});

test("pageHistory: the newest page, legacy cursors within the window, and refused cursors", async () => {
  const { manager, cwd } = rig();
  const id = await session(manager, cwd, 6, 10, 1);
  const newest = (await pageHistory(manager, id, null, 4))!;
  assert.deepEqual(newest.turns.map((t) => [t.id, t.ended]), [["t2", true], ["t3", true], ["t4", true], ["t5", false]]);
  assert.match(newest.next!, /^before:t2@\d+$/);
  const legacy = (await pageHistory(manager, id, "before:t2", 4))!;
  assert.deepEqual(legacy.turns.map((t) => t.id), ["t0", "t1"]);
  assert.equal(legacy.next, null);
  assert.deepEqual((await pageHistory(manager, id, newest.next, 4))!.turns.map((t) => t.id), ["t0", "t1"]);
  assert.equal((await pageHistory(manager, id, null, 6))!.next, null, "a page holding every turn has no cursor");
  // Refused: unknown legacy turn, an offset that is not a line start, past the end, a foreign prefix.
  const off = Number(/@(\d+)$/.exec(newest.next!)![1]);
  assert.equal(await pageHistory(manager, id, "before:gone", 4), null);
  assert.equal(await pageHistory(manager, id, `before:t2@${off + 1}`, 4), null);
  assert.equal(await pageHistory(manager, id, `before:t2@${1_000_000_000}`, 4), null);
  assert.equal(await pageHistory(manager, id, "t2", 4), null);
});

test("pageHistory: a torn last line (a crash mid-append) is not a turn; cursors taken before an append stay valid", async () => {
  const { manager, cwd, home } = rig();
  const id = await session(manager, cwd, 4, 10);
  const first = (await pageHistory(manager, id, null, 2))!;
  const h = await manager.store.acquire(id);
  await h.writer.append({ kind: "user", turn_id: "t4", text: "later" });
  await h.writer.append({ kind: "terminal", turn_id: "t4", status: "completed", assistant_text: "a4" });
  await h.release();
  assert.deepEqual((await pageHistory(manager, id, first.next, 2))!.turns.map((t) => t.id), ["t0", "t1"], "an older cursor still pages the same turns");
  const file = join(home, "sessions", `${id}.jsonl`);
  const before = statSync(file).size;
  appendFileSync(file, '{"seq":999999,"kind":"user","turn_id":"t5","te');
  assert.ok(statSync(file).size > before);
  assert.deepEqual((await pageHistory(manager, id, null, 10))!.turns.map((t) => t.id), ["t0", "t1", "t2", "t3", "t4"]);
});

test("sideChatSession: the source through the newest completed turn at or before the side-chat turn", async () => {
  const { manager, cwd } = rig();
  const id = await session(manager, cwd, 4, 10, 1); // t3 is still running
  const atDone = await sideChatSession(manager, id, "t1", cwd);
  assert.ok(atDone.ok);
  assert.deepEqual((await readTurns(manager, atDone.sessionId)).map((t) => t.id), ["t0", "t1"]);
  const atRunning = await sideChatSession(manager, id, "t3", cwd);
  assert.ok(atRunning.ok);
  assert.deepEqual((await readTurns(manager, atRunning.sessionId)).map((t) => t.id), ["t0", "t1", "t2"], "the running turn's unfinished output is not part of it");
  const fresh = await session(manager, cwd, 1, 10, 1);
  const empty = await sideChatSession(manager, fresh, "t0", cwd);
  assert.ok(empty.ok);
  assert.deepEqual(await readTurns(manager, empty.sessionId), []);
  assert.deepEqual(await sideChatSession(manager, id, "gone", cwd), { ok: false, error: "the side-chat turn is not a turn of the source chat" });
  assert.equal((await readTurns(manager, id)).length, 4, "the source is unchanged");
});

test("readTurns: an open turn's text is its messages' latest texts concatenated, as its crash terminal will carry", async () => {
  const { manager, cwd } = rig();
  const h = await manager.store.create(cwd);
  await h.writer.append({ kind: "user", turn_id: "t0", text: "q" });
  await h.writer.append({ kind: "assistant", turn_id: "t0", message_id: "m1", text: "I will ", partial: true });
  await h.writer.append({ kind: "assistant", turn_id: "t0", message_id: "m1", text: "I will look.", partial: false });
  await h.writer.append({ kind: "assistant", turn_id: "t0", message_id: "m2", text: " Found it", partial: true });
  await h.release();
  const [open] = await readTurns(manager, h.id);
  assert.deepEqual([open?.ended, open?.responseText], [false, "I will look. Found it"]);
  // The next writer closes it (a dead writer's turn) with the same text: the transcript does not change.
  const again = await manager.store.acquire(h.id, { closeInterrupted: true });
  await again.release();
  const [closed] = await readTurns(manager, h.id);
  assert.deepEqual([closed?.ended, closed?.responseText], [true, "I will look. Found it"]);
});
