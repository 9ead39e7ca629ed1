/**
 * What a fork copies (`forkSession`, transcript.ts), against a real session store: checkpoints re-pointed at the same
 * copied records however the source's seqs run (the format allows gaps), so the fork's model context is the
 * source's at that turn; and a source whose read window starts mid-file forks only from a checkpoint, refusing
 * (and creating nothing) otherwise. Crashes: test/sessions/crash-fork.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionManager, SessionStore, type History, type StoredRecord } from "../../src/store/sessions/index.js";
import { forkSession, readTurns } from "../../src/runtime/session/transcript.js";

const BOUNDS = { maxBytes: 1 << 20, maxRecords: 10_000 };

function rig(): { manager: SessionManager; store: SessionStore; home: string; cwd: string } {
  const home = mkdtempSync(join(tmpdir(), "fork-home-"));
  const store = new SessionStore({ home });
  return { manager: new SessionManager(store), store, home, cwd: mkdtempSync(join(tmpdir(), "fork-cwd-")) };
}

/** A history as the model sees it: the checkpoint's summary and the records after it, without seq and time. */
function context(h: History): { summary: string | null; records: unknown[]; complete: boolean } {
  return { summary: h.checkpoint?.summary ?? null, records: h.records.map(({ seq: _s, at: _a, ...r }: StoredRecord) => r), complete: h.complete };
}

/**
 * A source written as a file with seqs 10, 20, …: t0; a checkpoint covering it; t1; t2 compacted mid-turn (its
 * checkpoint right after its partial text, then the carried prompt and text, as recorder.ts writes it); t2 ends.
 */
function gappedSource(home: string, cwd: string): string {
  const id = "s-gapped-source";
  const at = "2026-12-04T10:00:00.000Z";
  const recs: Array<Record<string, unknown>> = [
    { kind: "user", turn_id: "t0", text: "q0" },
    { kind: "assistant", turn_id: "t0", message_id: "m", text: "a0", partial: false },
    { kind: "terminal", turn_id: "t0", status: "completed", assistant_text: "a0" },
    { kind: "checkpoint", summary: "t0 summarized", cutoff_seq: 30 },
    { kind: "user", turn_id: "t1", text: "q1" },
    { kind: "assistant", turn_id: "t1", message_id: "m", text: "a1", partial: false },
    { kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "a1" },
    { kind: "user", turn_id: "t2", text: "q2" },
    { kind: "assistant", turn_id: "t2", message_id: "m", text: "a2 so far", partial: true },
    { kind: "checkpoint", summary: "t0, t1 and t2 so far summarized", cutoff_seq: 90 },
    { kind: "user", turn_id: "t2", text: "q2" },
    { kind: "assistant", turn_id: "t2", message_id: "m", text: "a2 so far", partial: true },
    { kind: "assistant", turn_id: "t2", message_id: "m", text: "a2 so far, and done", partial: false },
    { kind: "terminal", turn_id: "t2", status: "completed", assistant_text: "a2 so far, and done" },
  ];
  const header = { kind: "header", format: 1, session_id: id, created_at: at, cwd };
  const lines = [header, ...recs.map((r, i) => ({ seq: (i + 1) * 10, at, ...r }))].map((l) => JSON.stringify(l) + "\n");
  mkdirSync(join(home, "sessions"), { recursive: true });
  writeFileSync(join(home, "sessions", `${id}.jsonl`), lines.join(""));
  return id;
}

test("a fork re-points each copied checkpoint at the same records: the fork's model context is the source's at that turn", async () => {
  const { manager, store, home, cwd } = rig();
  const id = gappedSource(home, cwd);
  const whole = await forkSession(manager, id, "t2", cwd);
  assert.ok(whole.ok);
  const source = await store.readHistory(id, BOUNDS);
  assert.equal(source.checkpoint?.summary, "t0, t1 and t2 so far summarized", "the mid-turn checkpoint is valid in the source");
  assert.deepEqual(context(await store.readHistory(whole.sessionId, BOUNDS)), context(source));
  const cps = (await store.readWindow(whole.sessionId)) as { records: StoredRecord[] };
  assert.deepEqual(cps.records.map((r) => r.seq), Array.from({ length: 14 }, (_, i) => i + 1), "the copy's seqs run from 1 without gaps");
  assert.deepEqual(cps.records.filter((r) => r.kind === "checkpoint").map((r) => [r.seq, (r as { cutoff_seq: number }).cutoff_seq]), [[4, 3], [10, 9]]);

  // Forked before the mid-turn checkpoint: the first checkpoint, then t1.
  const early = await forkSession(manager, id, "t1", cwd);
  assert.ok(early.ok);
  const h = context(await store.readHistory(early.sessionId, BOUNDS));
  assert.equal(h.summary, "t0 summarized");
  assert.deepEqual(h.records, [
    { kind: "user", turn_id: "t1", text: "q1" },
    { kind: "assistant", turn_id: "t1", message_id: "m", text: "a1", partial: false },
    { kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "a1" },
  ]);
  assert.deepEqual((await readTurns(manager, early.sessionId)).map((t) => [t.id, t.responseText]), [["t0", "a0"], ["t1", "a1"]], "replayed turns are whole");
});

test("a source whose window starts mid-file forks only from a checkpoint before the fork turn, and otherwise creates nothing", async () => {
  const { manager, store, home, cwd } = rig();
  const h = await store.create(cwd);
  const turn = async (i: number): Promise<StoredRecord> => {
    await h.writer.append({ kind: "user", turn_id: `t${i}`, text: `q${i} ${"x".repeat(1000)}` });
    return h.writer.append({ kind: "terminal", turn_id: `t${i}`, status: "completed", assistant_text: `a${i}` });
  };
  for (let i = 0; i < 8; i++) await turn(i);
  await h.writer.flush();
  const window = { maxBytes: 5 * 1024, maxRecords: 1_000_000, quantumBytes: 1 };
  assert.ok(!(await readTurns(manager, h.id, window)).some((t) => t.id === "t0"), "the window starts mid-file");
  assert.deepEqual(await forkSession(manager, h.id, "t7", cwd, window), { ok: false, error: "the source chat is too long to fork" });
  const t7 = await turn(7.5);
  await h.writer.append({ kind: "checkpoint", summary: "everything through t7.5", cutoff_seq: t7.seq });
  await turn(8);
  await turn(9);
  await h.writer.flush();
  assert.deepEqual(await forkSession(manager, h.id, "t7", cwd, window), { ok: false, error: "the source chat is too long to fork" }, "the checkpoint is after the fork turn");
  assert.deepEqual(readdirSync(join(home, "sessions")), [`${h.id}.jsonl`], "a refused fork creates nothing");

  const f = await forkSession(manager, h.id, "t8", cwd, window);
  assert.ok(f.ok);
  const got = context(await store.readHistory(f.sessionId, BOUNDS));
  assert.equal(got.summary, "everything through t7.5");
  assert.deepEqual(got.records.map((r) => (r as { turn_id: string }).turn_id), ["t8", "t8"], "the context after the checkpoint is the fork turn");
  assert.equal(got.complete, true);
  await h.release();
});
