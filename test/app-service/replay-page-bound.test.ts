/**
 * `max_session_replay_page_bytes` (16,384) at the limit and one past it, over real session files: a history whose
 * whole first page encodes to exactly 16,384 bytes is served in one page; one byte more and its last item moves to
 * the next page (`truncated: true`), which the returned cursor serves. The bound counts the complete compact payload.
 * Text parts likewise: 2,048 bytes are one part, 2,049 two.
 * @req AS-SES-14
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStore } from "../../src/store/sessions/index.js";
import { LIMITS } from "../../src/protocols/app-service/limits.js";
import { projectSnapshot, replayPage, type Projection } from "../../src/protocols/app-service/replay.js";

const store = new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-replay-bound-")) });

/** A session of seven 2,000-byte user messages and a last one of `last` bytes, projected for replay. */
async function history(last: number): Promise<Projection> {
  const s = await store.create("/");
  for (let i = 0; i < 7; i++) await s.writer.append({ kind: "user", turn_id: `t${i}`, text: `${i}`.repeat(2000) });
  await s.writer.append({ kind: "user", turn_id: "t7", text: "z".repeat(last) }, { sync: true });
  await s.release();
  const snap = await store.readWindow(s.id);
  assert.ok(snap !== "unchanged");
  return projectSnapshot(s.id, snap);
}

const bytes = (v: unknown): number => Buffer.byteLength(JSON.stringify(v));

test("a replay page of exactly max_session_replay_page_bytes is served whole; one byte more moves its last item on", async () => {
  const max = LIMITS.max_session_replay_page_bytes;
  // The unbounded page's size grows byte for byte with the last message (ASCII, no escaping): size it to the bound.
  const probe = await history(1000);
  const last = 1000 + (max - bytes(replayPage(probe, null, 32, Number.MAX_SAFE_INTEGER)));
  assert.ok(last > 0 && last <= 2048, `the last message (${last} bytes) is one part`);

  const at = await history(last);
  const whole = replayPage(at, null, 32);
  assert.equal(bytes(whole), max);
  assert.deepEqual([whole.events.length, whole.truncated], [at.count, false]);

  const past = await history(last + 1);
  const first = replayPage(past, null, 32);
  assert.ok(bytes(first) <= max);
  assert.deepEqual([first.events.length, first.truncated], [past.count - 1, true]);
  const rest = replayPage(past, first.next_cursor, 32);
  assert.deepEqual([rest.events.length, rest.truncated, rest.resync_required], [1, false, false]);
  assert.equal(rest.events[0]!.text, "z".repeat(last + 1));
});

test("replay text parts: a message of 2,048 bytes is one part, one byte more is two @req AS-SES-13", async () => {
  const at = await history(2048);
  const atPage = replayPage(at, null, 32, Number.MAX_SAFE_INTEGER);
  assert.deepEqual(atPage.events.slice(7).map((e) => [e.part, e.last_part, Buffer.byteLength(e.text as string)]), [[0, true, 2048]]);
  const past = await history(2049);
  const pastPage = replayPage(past, null, 32, Number.MAX_SAFE_INTEGER);
  assert.deepEqual(pastPage.events.slice(7).map((e) => [e.part, e.last_part, Buffer.byteLength(e.text as string)]), [[0, false, 2048], [1, true, 1]]);
});
