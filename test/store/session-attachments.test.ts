/** Per-process attachments: cap, reuse, implicit/explicit, close closed/closing, turn hooks, drain. Real store. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionError, SessionManager, SessionStore } from "../../src/store/sessions/index.js";

function manager(max = 16): SessionManager {
  return new SessionManager(new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-att-")) }), max);
}

async function rejectsCode(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (e: unknown) => e instanceof SessionError && e.code === code);
}

test("at most 16 attachments per process; close frees a slot; list/replay need none", async () => {
  const m = manager();
  const ids: string[] = [];
  for (let i = 0; i < 16; i++) ids.push(await m.create("/"));
  assert.equal(m.attachmentCount, 16);
  await rejectsCode(m.create("/"), "limit");
  await rejectsCode(m.beginTurn({ sessionId: null, cwd: "/", onCloseRequested: () => {} }), "limit");
  // Reopening an attached session reuses its attachment (no new slot).
  await m.open(ids[0]!);
  const w = await m.store.readWindow(ids[1]!);
  assert.ok(w !== "unchanged");
  await m.store.list(null, 32);
  assert.equal(await m.close(ids[0]!), "closed");
  // A released session can be reopened (needs a slot again).
  await m.open(ids[0]!);
  assert.equal(await m.close(ids[2]!), "closed");
  await m.create("/");
  await rejectsCode(m.open(ids[2]!), "limit");
  await m.drain();
  assert.equal(m.attachmentCount, 0);
});

test("close: idempotent for any valid ID (attached, unattached, missing), invalid IDs rejected, history kept", async () => {
  const m = manager();
  const id = await m.create("/");
  assert.equal(await m.close(id), "closed");
  assert.equal(await m.close(id), "closed");
  assert.equal(await m.close("never-existed"), "closed");
  await rejectsCode(m.close("../etc"), "invalid_id");
  assert.ok(existsSync(m.store.paths.data(id)), "close never deletes history");
  await rejectsCode(m.open("never-existed"), "unavailable");
  assert.equal(m.attachmentCount, 0, "a failed open holds no slot");
});

test("a second manager (another service) gets busy; close never releases another holder's lease", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-att-"));
  const a = new SessionManager(new SessionStore({ home }));
  const b = new SessionManager(new SessionStore({ home }));
  const id = await a.create("/");
  await rejectsCode(b.open(id), "busy");
  await rejectsCode(b.beginTurn({ sessionId: id, cwd: "/", onCloseRequested: () => {} }), "busy");
  assert.equal(await b.close(id), "closed");
  await rejectsCode(b.open(id), "busy");
  await a.drain();
  await b.open(id);
  await b.drain();
});

// @req AS-SES-25
test("turn hooks: close during a turn is closing (cancel requested once), opens are busy, end() completes the close", async () => {
  const m = manager();
  const id = await m.create("/");
  let cancels = 0;
  const turn = await m.beginTurn({ sessionId: id, cwd: "/", onCloseRequested: () => cancels++ });
  assert.equal(turn.sessionId, id);
  await rejectsCode(m.beginTurn({ sessionId: id, cwd: "/", onCloseRequested: () => {} }), "busy");
  await turn.writer.append({ kind: "user", turn_id: "t1", text: "hi" });
  assert.equal(await m.close(id), "closing");
  assert.equal(await m.close(id), "closing");
  assert.equal(cancels, 1);
  await rejectsCode(m.open(id), "busy");
  await turn.writer.append({ kind: "terminal", turn_id: "t1", status: "cancelled", assistant_text: "par" }, { sync: true });
  await turn.end();
  assert.equal(m.isAttached(id), false);
  assert.equal(await m.close(id), "closed");
  // Reopen works after the lease was released.
  await m.open(id);
  await m.drain();
});

test("implicit attachments are released after end(); explicit ones survive turns; open makes an implicit one explicit", async () => {
  const m = manager();
  const t1 = await m.beginTurn({ sessionId: null, cwd: "/w", onCloseRequested: () => {} });
  assert.equal(t1.created, true);
  assert.equal(m.attachmentCount, 1);
  await t1.end();
  assert.equal(m.attachmentCount, 0, "implicit released after the turn");

  const id = await m.create("/");
  const t2 = await m.beginTurn({ sessionId: id, cwd: "/", onCloseRequested: () => {} });
  await t2.end();
  assert.equal(m.isAttached(id), true, "explicit survives the turn");

  const t3 = await m.beginTurn({ sessionId: t1.sessionId, cwd: "/", onCloseRequested: () => {} });
  await m.open(t1.sessionId);
  await t3.end();
  assert.equal(m.isAttached(t1.sessionId), true, "opened during the turn: now explicit");
  await m.drain();
  assert.equal(m.attachmentCount, 0);
});

test("settledHistory: a turn left open by a gone writer is settled once; one a live holder runs is left as it is, and says who", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-att-"));
  const a = new SessionManager(new SessionStore({ home }));
  const b = new SessionManager(new SessionStore({ home }), 1);
  const bounds = { maxBytes: 1 << 20, maxRecords: 1000 };
  const kinds = (h: { records: Array<{ kind: string }> }): string[] => h.records.map((r) => r.kind);
  const id = await a.create("/");
  await a.close(id);
  const turn = await a.beginTurn({ sessionId: id, cwd: "/", onCloseRequested: () => {} });
  await turn.writer.append({ kind: "user", turn_id: "t1", text: "hi" });
  await turn.writer.append({ kind: "assistant", turn_id: "t1", message_id: "m1", text: "par", partial: true }, { sync: true });
  // Running: here for its own process, elsewhere for another; nothing written.
  assert.equal((await a.settledHistory(id, bounds)).running, "here");
  const held = await b.settledHistory(id, bounds);
  assert.equal(held.running, "elsewhere");
  assert.deepEqual(kinds(held.history), ["user", "assistant"]);
  assert.equal(b.attachmentCount, 0);
  // Its writer gone without a terminal (what a kill -9 leaves on disk): settled `failed` with its text, the lease released.
  await turn.end();
  const settled = await b.settledHistory(id, bounds);
  assert.equal(settled.running, null);
  assert.deepEqual(settled.history.records.at(-1), { ...settled.history.records.at(-1), kind: "terminal", status: "failed", assistant_text: "par" });
  assert.equal(b.attachmentCount, 0);
  assert.deepEqual(kinds(await b.settledHistory(id, bounds).then((r) => r.history)), ["user", "assistant", "terminal"], "settled once");
  await b.open(id); // the lease was released
  await b.close(id);

  // Settling needs a slot for its moment: none free is `limit`, and nothing is written; a settled session needs none.
  const other = await b.create("/");
  const t2 = await a.beginTurn({ sessionId: id, cwd: "/", onCloseRequested: () => {} });
  await t2.writer.append({ kind: "user", turn_id: "t2", text: "again" }, { sync: true });
  await t2.end();
  await rejectsCode(b.settledHistory(id, bounds), "limit");
  assert.equal(kinds((await a.store.readHistory(id, bounds))).at(-1), "user");
  assert.equal((await b.settledHistory(other, bounds)).running, null);
  await b.close(other);
  assert.equal((await b.settledHistory(id, bounds)).running, null);
  // A checkpoint written after the last terminal (a compaction between turns) opens no turn: a live holder of the
  // lease is then not running one, and the history is shown as it is.
  const t3 = await a.beginTurn({ sessionId: id, cwd: "/", onCloseRequested: () => {} });
  await t3.writer.append({ kind: "checkpoint", summary: "so far", cutoff_seq: 1 }, { sync: true });
  const compacted = await b.settledHistory(id, bounds);
  assert.equal(compacted.running, null);
  assert.equal(kinds(compacted.history).at(-1), "terminal");
  await t3.writer.append({ kind: "user", turn_id: "t3", text: "still its" }, { sync: true }); // the holder kept its lease
  await t3.end();
  await a.drain();
  await b.drain();
});
