/**
 * History trimming (SessionRuntime + Agent + a real store, small history bounds): a turn admitted on a history
 * whose records since the last checkpoint are at the record bound runs untrimmed; one past it trims the oldest
 * turns (a checkpoint) and emits `session_trimmed` right after `turn_started`; the model no longer sees the
 * trimmed prompts but sees the trim note; the session file keeps every record.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { Agent } from "../../src/runtime/agent.js";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import { SessionHub, type SessionEvent } from "../../src/runtime/session/index.js";
import { trimHistory } from "../../src/runtime/session/trim.js";

const MAX_RECORDS = 12;

/** Records of the session file after its last checkpoint's cutoff, that checkpoint included (the header excluded). */
function sinceCheckpoint(file: string): number {
  const recs = readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as { kind: string; seq?: number; cutoff_seq?: number })
    .filter((r) => r.kind !== "header");
  const cps = recs.filter((r) => r.kind === "checkpoint");
  const cutoff = cps.length > 0 ? (cps.at(-1)!.cutoff_seq as number) : 0;
  return recs.filter((r) => (r.seq as number) > cutoff).length;
}

void test("a history past its record bound is trimmed at admission; at the bound it is not", async () => {
  const fake = await startFakeProvider();
  const home = mkdtempSync(join(tmpdir(), "trim-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "trim-cwd-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }] } } }));
  const env = { PATH: process.env.PATH, MC_HOME: home, MC_PROVIDER: "fake", MC_MODEL: "fake-model" };
  const manager = new SessionManager(new SessionStore({ home }));
  const hub = new SessionHub({
    manager,
    runner: new Agent({ home, cwd, env }),
    defaults: { cwd, noTools: true },
    historyBounds: { maxBytes: 1024 * 1024, maxRecords: MAX_RECORDS },
  });
  const events: SessionEvent[] = [];
  hub.subscribe((e) => void events.push(e));
  try {
    const rt = await hub.create();
    const file = join(home, "sessions", `${rt.id}.jsonl`);
    let trims = 0;
    let sawAtBound = false;
    for (let i = 1; i <= 12; i++) {
      const before = sinceCheckpoint(file);
      const from = events.length;
      const n = fake.requests.length;
      const r = await rt.startTurn(`prompt number ${i}`);
      assert.ok(r.ok);
      await r.done;
      const mine = events.slice(from);
      const trimmed = mine.filter((e) => e.type === "session_trimmed");
      assert.equal(mine.at(-1)?.type, "turn_completed", JSON.stringify(mine.at(-1)));
      if (before === MAX_RECORDS) sawAtBound = true;
      assert.equal(trimmed.length, before > MAX_RECORDS ? 1 : 0, `turn ${i}: ${before} records since the checkpoint, bound ${MAX_RECORDS}`);
      if (trimmed.length === 0) continue;
      trims++;
      // Emitted right after turn_started, before anything else of the turn.
      assert.equal(mine[0]?.type, "turn_started");
      assert.equal(mine[1]?.type, "session_trimmed");
      const t = trimmed[0]!;
      assert.ok(t.type === "session_trimmed" && t.removedMessages > 0 && t.historyBytes > 0);
      const body = fake.requests[n]!.body;
      assert.match(body, /Berth trimmed \d+ earlier history records/);
      assert.ok(!body.includes('"prompt number 1"') && !body.includes("prompt number 1\\"), "the oldest prompt left the model context");
      assert.ok(body.includes(`prompt number ${i}`));
      assert.ok(sinceCheckpoint(file) <= MAX_RECORDS, "after the turn the history is back within its bound");
    }
    assert.ok(sawAtBound, "a turn was admitted with the history exactly at its bound");
    assert.ok(trims >= 2, `trimmed ${trims} times`);
    const text = readFileSync(join(home, "sessions", `${rt.id}.jsonl`), "utf8");
    assert.ok(text.includes('"text":"prompt number 1"'), "the session file keeps every record");
  } finally {
    await hub.close();
    await manager.drain();
    await fake.close();
  }
});

void test("trimHistory: carries an earlier summary, cuts at a turn start, counts records before the window", async () => {
  const home = mkdtempSync(join(tmpdir(), "trim-unit-"));
  const store = new SessionStore({ home });
  const h = await store.create(home);
  const w = h.writer;
  await w.append({ kind: "user", turn_id: "t1", text: "one" }); // 1
  await w.append({ kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "" }); // 2
  await w.append({ kind: "user", turn_id: "t2", text: "two" }); // 3
  await w.append({ kind: "terminal", turn_id: "t2", status: "completed", assistant_text: "" }); // 4
  await w.append({ kind: "checkpoint", summary: "EARLIER SUMMARY", cutoff_seq: 2 }); // 5
  await w.append({ kind: "user", turn_id: "t3", text: "three" }); // 6
  await w.append({ kind: "terminal", turn_id: "t3", status: "completed", assistant_text: "" }); // 7
  const bounds = { maxBytes: 1024 * 1024, maxRecords: 4 };
  const hist = await store.readHistory(h.id, bounds);
  assert.equal(hist.complete, false, "the window starts after the checkpoint's cutoff");
  const t = await trimHistory(hist, bounds, w);
  assert.equal(t.history.checkpoint?.cutoff_seq, 5, "cut before the newest turn's first user record");
  assert.deepEqual(
    t.history.records.map((r) => r.seq),
    [6, 7],
  );
  assert.equal(t.removedMessages, 2, "seq 4 read in the window, seq 3 before it");
  assert.ok(t.history.checkpoint.summary.startsWith("EARLIER SUMMARY\n\n[Berth trimmed 2 earlier history records"));
  await h.release();
  const again = await store.readHistory(h.id, bounds);
  assert.equal(again.complete, true, "the trimmed history fits its bounds");
  assert.deepEqual(
    again.records.map((r) => r.seq),
    [6, 7],
  );
});

void test("trimHistory: a newest turn bigger than half the bound leaves nothing before the new prompt", async () => {
  const home = mkdtempSync(join(tmpdir(), "trim-unit-"));
  const store = new SessionStore({ home });
  const h = await store.create(home);
  const w = h.writer;
  await w.append({ kind: "user", turn_id: "t1", text: "one" }); // 1
  for (let i = 1; i <= 3; i++) await w.append({ kind: "assistant", turn_id: "t1", message_id: `m${i}`, text: `answer ${i}`, partial: false });
  await w.append({ kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "answer" }); // 5
  const bounds = { maxBytes: 1024 * 1024, maxRecords: 4 };
  const hist = await store.readHistory(h.id, bounds);
  assert.equal(hist.complete, false);
  const t = await trimHistory(hist, bounds, w);
  assert.equal(t.history.checkpoint?.cutoff_seq, 5);
  assert.deepEqual(t.history.records, []);
  assert.equal(t.removedMessages, 5);
  assert.match(t.history.checkpoint.summary, /assistant: answer 3/);
  await h.release();
});
