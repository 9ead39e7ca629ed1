/**
 * Replay projections persisted as sidecars: a restarted service loads them instead of re-deriving the JSONL,
 * answers byte-for-byte the same pages, and ignores (then rewrites) a sidecar that is stale or damaged.
 * Also the codec round trip over random histories.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionManager, SessionStore } from "../../src/store/sessions/index.js";
import type { MethodDescriptor, RequestContext } from "../../src/protocols/app-service/descriptor.js";
import { sessionMethods } from "../../src/protocols/app-service/sessions.js";
import { UNPROJECTED_KINDS, decodeProjection, encodeProjection, projectSnapshot, replayPage } from "../../src/protocols/app-service/replay.js";
import { prng } from "../helpers/prng.js";

/**
 * One "service process": a fresh family (empty in-memory cache) over `home`. The test's writer keeps its append lock
 * for `appendHoldMs` after each batch; a reader waits for it as long as a loaded machine needs (the default 150 ms
 * answers `session_busy`, which this test is not about).
 */
function service(home: string) {
  const fam = sessionMethods({ manager: new SessionManager(new SessionStore({ home, locks: { readerWaitMs: 30_000 } })), cwd: "/" });
  const replay = fam.descriptors.find((d) => d.method === "session.replay") as MethodDescriptor<{ after: string | null; limit: number }>;
  return {
    async replay(id: string, after: string | null, limit = 32): Promise<Record<string, unknown>> {
      const ctx = { requestId: "r", sessionId: id, method: "session.replay", emit: async () => {}, hold: () => ({ release() {} }) } as unknown as RequestContext;
      const o = await replay.handle(ctx, { after, limit });
      assert.equal(o.error, undefined);
      return o.payload;
    },
    /** Waits for background sidecar writes (EOF drain). */
    drain: () => fam.drain?.() ?? Promise.resolve(),
  };
}

async function pages(svc: ReturnType<typeof service>, id: string, limit: number): Promise<Array<Record<string, unknown>>> {
  const out: Array<Record<string, unknown>> = [];
  let after: string | null = null;
  for (;;) {
    const p = await svc.replay(id, after, limit);
    out.push(p);
    if (p.truncated !== true) return out;
    after = p.next_cursor as string;
  }
}

test("a restarted service replays from the sidecar: same pages, cursors keep working; stale or damaged sidecars are rebuilt", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-replay-sidecar-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  for (let t = 0; t < 40; t++) {
    await s.writer.append({ kind: "user", turn_id: `t${t}`, text: `question ${t} é 中 🌍 ` + "x".repeat(t * 97) });
    await s.writer.append({ kind: "tool_result", turn_id: `t${t}`, call_id: "c", name: "read", content: "y".repeat(500), is_error: false });
    await s.writer.append({ kind: "terminal", turn_id: `t${t}`, status: "completed", assistant_text: `answer ${t} Bearer abcdefghijklmnop ` + "z".repeat(t * 131) });
  }
  await s.writer.flush();
  const first = service(home);
  const expected = await pages(first, s.id, 5);
  await first.drain();
  const sidecar = store.paths.sidecar(s.id);
  const written = statSync(sidecar).mtimeMs;

  // Restart: the sidecar is used (not rewritten) and every page is identical.
  const second = service(home);
  assert.deepEqual(await pages(second, s.id, 5), expected);
  await second.drain();
  assert.equal(statSync(sidecar).mtimeMs, written, "a valid sidecar is not rewritten");
  const mid = expected[3]?.next_cursor as string;

  // Damaged sidecar: ignored, the JSONL wins, and a good one replaces it.
  const bytes = readFileSync(sidecar);
  bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] as number) ^ 0xff;
  writeFileSync(sidecar, bytes);
  const third = service(home);
  assert.deepEqual(await pages(third, s.id, 5), expected);
  await third.drain();
  assert.notDeepEqual(readFileSync(sidecar), bytes);

  // Append: the sidecar is stale; a restarted service projects the JSONL again and older cursors survive.
  await s.writer.append({ kind: "user", turn_id: "late", text: "one more" }, { sync: true });
  const fourth = service(home);
  const resumed = await fourth.replay(s.id, mid, 32);
  assert.equal(resumed.resync_required, false);
  const all = await pages(fourth, s.id, 32);
  const last = all.at(-1)?.events as Array<Record<string, unknown>>;
  assert.equal(last.at(-1)?.text, "one more");
  await fourth.drain();
  await s.release();
});


const ALPHABET = ["a", " ", "é", "中", "🌍", "\n", '"', "\\", "\u0001", "\r\n", "\u2028", "𝄞", "sk-", "token="];

test("property: the sidecar codec round-trips projections exactly (items, cursors, gap, pages)", async () => {
  const store = new SessionStore({ home: mkdtempSync(join(tmpdir(), "berth-replay-codec-")) });
  for (let seed = 1; seed <= 20; seed++) {
    const rnd = prng(seed * 104729);
    const text = () => {
      let s = "";
      const n = rnd() < 0.2 ? 2000 + Math.floor(rnd() * 6000) : Math.floor(rnd() * 30);
      for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(rnd() * ALPHABET.length)];
      return s;
    };
    const s = await store.create("/");
    const turns = Math.floor(rnd() * 6);
    for (let t = 0; t < turns; t++) {
      await s.writer.append({ kind: "user", turn_id: `t${t}`, text: text() });
      await s.writer.append({ kind: "assistant", turn_id: `t${t}`, message_id: "m", text: text(), partial: true });
      if (rnd() < 0.3) await s.writer.append({ kind: "checkpoint", summary: text(), cutoff_seq: s.writer.peekNextSeq - 2 });
      if (rnd() < 0.7) await s.writer.append({ kind: "terminal", turn_id: `t${t}`, status: "failed", assistant_text: text() });
    }
    await s.writer.flush();
    const snap = await store.readWindow(s.id, undefined, undefined, UNPROJECTED_KINDS);
    assert.ok(snap !== "unchanged");
    const p = projectSnapshot(s.id, snap);
    const d = decodeProjection(s.id, encodeProjection(p));
    assert.ok(d !== null);
    assert.equal(d.count, p.count);
    assert.equal(d.gap, p.gap);
    assert.deepEqual([...d.prefix], [...p.prefix]);
    assert.deepEqual(d.items, p.items);
    let after: string | null = null;
    for (let guard = 0; guard < 10_000; guard++) {
      const a = replayPage(p, after, 7);
      assert.deepEqual(replayPage(d, after, 7), a);
      if (!a.truncated) break;
      after = a.next_cursor;
    }
    // A truncated or inconsistent payload is rejected, never half-used.
    const enc = encodeProjection(p);
    assert.equal(decodeProjection(s.id, enc.subarray(0, enc.length - 1)), null);
    await s.release();
  }
});

test("a sidecar projected before mid-turn checkpoints needed their carried records is not used", async () => {
  // What an older Berth killed between a mid-turn checkpoint and its carried records left, settled by the next one.
  const home = mkdtempSync(join(tmpdir(), "berth-replay-sidecar-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t", text: "read it" });
  await s.writer.append({ kind: "assistant", turn_id: "t", message_id: "m1.0", text: "Reading. ", partial: true });
  await s.writer.append({ kind: "tool_call", turn_id: "t", message_id: "m1", call_id: "c", name: "read", arguments: {} });
  const res = await s.writer.append({ kind: "tool_result", turn_id: "t", call_id: "c", name: "read", content: "y", is_error: false });
  const cp = await s.writer.append({ kind: "checkpoint", summary: "SUMMARY", cutoff_seq: res.seq });
  await s.writer.append({ kind: "terminal", turn_id: "t", status: "failed", assistant_text: "Reading. " });
  await s.writer.flush();
  await s.release();
  const snap = await store.readWindow(s.id, undefined, undefined, UNPROJECTED_KINDS);
  assert.ok(snap !== "unchanged");
  // The projection that version's sidecar held: the checkpoint taken as valid (summary first).
  const carried = snap.records.flatMap((r) => {
    if (r.seq < cp.seq) return [r];
    if (r.seq > cp.seq) return [{ ...r, seq: r.seq + 2 }];
    const user = { seq: cp.seq + 1, at: r.at, kind: "user" as const, turn_id: "t", text: "read it" };
    return [r, user, { seq: cp.seq + 2, at: r.at, kind: "assistant" as const, turn_id: "t", message_id: "m2.0", text: "Reading. ", partial: false }];
  });
  const stale = projectSnapshot(s.id, { ...snap, records: carried });
  assert.equal(stale.item(0).kind, "summary");
  await store.writeSidecar(s.id, "replay-v2;2097152,100000,65536", snap.version, encodeProjection(stale));
  const events = (await service(home).replay(s.id, null)).events as Array<{ kind: string; role?: string; text?: string }>;
  assert.deepEqual(events.map((e) => [e.kind, e.role ?? null, e.text ?? null]), [
    ["message", "user", "read it"],
    ["message", "assistant", "Reading. "],
    ["terminal", null, null],
  ]);
});
