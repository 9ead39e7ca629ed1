/**
 * Two spawned services on one MC_HOME: lease conflict, replay of a session the other holds, prompt lease
 * recovery after the holder is killed with SIGKILL; and a crash (SIGKILL during appends) followed by replay
 * and a new append.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ServiceProcess } from "../helpers/service-process.js";
import { SessionStore } from "../../src/store/sessions/index.js";
import { projectSnapshot, replayPage } from "../../src/protocols/app-service/replay.js";

async function seeded(home: string): Promise<string> {
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.writer.append({ kind: "user", turn_id: "t1", text: "What is up?" });
  await s.writer.append({ kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "Not much." }, { sync: true });
  await s.release();
  return s.id;
}

// @req AS-SES-19 @req AS-SES-20 @req AS-SES-23
test("two services: session_busy, replay of a held session, recovery after SIGKILL of the holder, release at EOF", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-mp-"));
  const id = await seeded(home);
  const a = new ServiceProcess({ home });
  const b = new ServiceProcess({ home });
  try {
    await a.initialize();
    await b.initialize();
    assert.deepEqual((await a.request("session.open", {}, { session_id: id })).payload, { session_id: id, status: "open" });
    const busy = await b.request("session.open", {}, { session_id: id });
    assert.equal(busy.error?.code, "session_busy");
    // Replay needs no lease: B reads the session A holds.
    const rp = await b.request("session.replay", {}, { session_id: id });
    assert.equal(rp.error, null);
    assert.deepEqual(
      rp.payload.events.map((e: Record<string, unknown>) => [e.kind, e.role ?? e.status, e.text ?? null]),
      [["message", "user", "What is up?"], ["message", "assistant", "Not much."], ["terminal", "completed", null]],
    );
    // B's close is idempotent and never releases A's lease.
    assert.equal((await b.request("session.close", {}, { session_id: id })).payload.status, "closed");
    assert.equal((await b.request("session.open", {}, { session_id: id })).error?.code, "session_busy");
    // A created session shows up in B's list.
    const created = await a.request("session.create", {});
    const list = await b.request("session.list", {});
    assert.ok(list.payload.sessions.some((s: { session_id: string }) => s.session_id === created.payload.session_id));
    // SIGKILL the holder: its leases are recovered at once (no stale wait).
    a.kill("SIGKILL");
    await a.exited;
    // No stale wait: A's lease has an owner record, and a lease with one is never recovered by age (only an
    // owner-less lease is). Opening succeeds only because the record's pid is recognised as dead.
    assert.deepEqual((await b.request("session.open", {}, { session_id: id })).payload, { session_id: id, status: "open" });
    assert.equal((await b.request("session.open", {}, { session_id: created.payload.session_id })).error, null);
    // EOF releases B's attachments: a third service can open them.
    b.end();
    assert.equal((await b.exited).code, 0);
    const c = new ServiceProcess({ home });
    try {
      await c.initialize();
      assert.equal((await c.request("session.open", {}, { session_id: id })).error, null);
    } finally {
      c.end();
      await c.exited;
    }
  } finally {
    a.kill();
    b.kill();
  }
});

// @req AS-SES-21
test("crash: SIGKILL during appends, then replay (earlier records intact) and a new append", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-crash-"));
  const store = new SessionStore({ home });
  const s = await store.create("/");
  await s.release();
  const child = spawn(process.execPath, [fileURLToPath(new URL("./crash-appender.js", import.meta.url)), home, s.id], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => (d.toString().includes("ready") ? resolve() : undefined));
    child.on("exit", () => reject(new Error("appender exited early")));
  });
  child.kill("SIGKILL");
  await new Promise((r) => child.once("close", r));
  // A window larger than anything the appender writes (≤ 400 records of ≤ 76 KB), so every record is in it even
  // when the kill comes late on a loaded machine.
  const whole = { maxBytes: 64 * 1024 * 1024, maxRecords: 100_000, quantumBytes: 1 };
  const snap = await store.readWindow(s.id, whole);
  assert.ok(snap !== "unchanged");
  assert.ok(snap.records.length >= 32, "the fsynced records survived");
  snap.records.forEach((r, i) => {
    assert.equal(r.seq, i + 1, "no record lost or damaged before the tail");
    assert.ok(r.kind === "user" && r.text.startsWith(`r${i}:`));
  });
  assert.equal(snap.badLines, 0);
  const p = projectSnapshot(s.id, snap);
  assert.equal(p.gap, snap.torn, "a torn tail is surfaced as gap");
  // The dead holder's lease is recovered at once; the next append starts on a fresh line.
  const h = await store.acquire(s.id);
  const rec = await h.writer.append({ kind: "user", turn_id: "after", text: "after the crash" }, { sync: true });
  assert.equal(rec.seq, snap.records.length + 1);
  await h.release();
  const after = await store.readWindow(s.id, whole);
  assert.ok(after !== "unchanged");
  assert.equal(after.torn, false);
  assert.equal(after.records.at(-1)?.seq, rec.seq);
  assert.equal(after.records.length, snap.records.length + 1);
  assert.equal(after.badLines, snap.torn ? 1 : 0);
  const page = replayPage(projectSnapshot(s.id, after), null, 32);
  assert.equal(page.resync_required, false);
});
