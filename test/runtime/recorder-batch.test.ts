/**
 * A turn's last two writes share one batch (runtime/recorder.ts, store/sessions/writer.ts `appendMany`): a message's
 * final segment is held when the message ends and written with the turn's next record — the terminal record (one
 * append lock, one write, one fsync), the next message, a tool result — or alone by its `flushMs` timer when nothing
 * follows. Observed on a real session file, with the store's fsync seam counting fsyncs and snapshotting the file.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { fdatasync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TurnRecorder } from "../../src/runtime/recorder.js";
import { SessionStore } from "../../src/store/sessions/index.js";

interface Rig {
  store: SessionStore;
  /** The file's records (header excluded) as `kind:message_id|status`. */
  records(): string[];
  /** The file's records at each fsync so far. */
  syncs: string[][];
}

async function rig(): Promise<Rig & { id: string; writer: Awaited<ReturnType<SessionStore["create"]>>["writer"]; release(): Promise<void> }> {
  const home = mkdtempSync(join(tmpdir(), "recb-"));
  let file = "";
  const records = (): string[] =>
    readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .slice(1)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .map((r) => `${String(r["kind"])}:${String(r["message_id"] ?? r["status"] ?? r["text"])}`);
  const syncs: string[][] = [];
  const store = new SessionStore({
    home,
    syncData: (fd) =>
      new Promise<void>((resolve, reject) => {
        if (file !== "") syncs.push(records());
        fdatasync(fd, (e) => (e ? reject(e) : resolve()));
      }),
  });
  const h = await store.create(home);
  file = store.paths.data(h.id);
  syncs.length = 0;
  return { store, records, syncs, id: h.id, writer: h.writer, release: () => h.release() };
}

/** Resolves once `cond` holds (checked on every timer tick; no fixed sleep stands in for it). */
async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 5));
}

test("the final segment is held at the message's end and written with the terminal record in one batch", async () => {
  const r = await rig();
  const rec = new TurnRecorder(r.writer, "t1", { flushBytes: 1024, flushMs: 60_000 });
  await rec.user("hi");
  assert.deepEqual(r.syncs, [["user:hi"]], "the user record is fsynced alone, first");
  rec.startMessage();
  rec.text("hel");
  rec.text("lo");
  rec.endMessage();
  await rec.settled();
  assert.deepEqual(r.records(), ["user:hi"], "nothing written at the message's end");
  await rec.terminal("completed", "hello");
  const all = ["user:hi", "assistant:m1.0", "terminal:completed"];
  assert.deepEqual(r.records(), all);
  assert.deepEqual(r.syncs, [["user:hi"], all], "one fsync covers the segment and the terminal record");
  const lines = readFileSync(r.store.paths.data(r.id), "utf8").trim().split("\n").slice(1).map((l) => JSON.parse(l) as { seq: number; partial?: boolean; text?: string });
  assert.deepEqual(lines.map((l) => l.seq), [1, 2, 3]);
  assert.equal(lines[1]!.partial, false);
  assert.equal(lines[1]!.text, "hello");
  await r.release();
});

test("a held final segment is written before the next message's records and before a tool result", async () => {
  const r = await rig();
  const rec = new TurnRecorder(r.writer, "t1", { flushBytes: 1024, flushMs: 60_000 });
  await rec.user("go");
  rec.startMessage();
  rec.text("first");
  rec.endMessage();
  rec.startMessage();
  rec.text("second ");
  rec.toolCall("c1", "ls", {});
  rec.endMessage();
  rec.toolResult("c1", "ls", "out", false);
  await rec.settled();
  // m2.1: the (empty) final segment that closes a message with earlier segments, held until the tool result.
  assert.deepEqual(r.records(), ["user:go", "assistant:m1.0", "assistant:m2.0", "tool_call:m2", "assistant:m2.1", "tool_result:undefined"]);
  assert.equal(rec.failure, null);
  await rec.terminal("completed", "first");
  assert.deepEqual(r.records().at(-1), "terminal:completed");
  await r.release();
});

test("with no record after it, the held final segment is still written by its flushMs timer", async () => {
  const r = await rig();
  const rec = new TurnRecorder(r.writer, "t1", { flushBytes: 1024, flushMs: 40 });
  await rec.user("wait");
  rec.startMessage();
  rec.text("stalled");
  rec.endMessage();
  await until(() => r.records().length === 2);
  assert.deepEqual(r.records(), ["user:wait", "assistant:m1.0"]);
  await rec.terminal("completed", "stalled");
  assert.deepEqual(r.records(), ["user:wait", "assistant:m1.0", "terminal:completed"], "written once, not again with the terminal record");
  await r.release();
});

test("a final segment of flushBytes or more is written at once", async () => {
  const r = await rig();
  const rec = new TurnRecorder(r.writer, "t1", { flushBytes: 8, flushMs: 60_000 });
  await rec.user("big");
  rec.startMessage();
  rec.text("0123456789");
  rec.endMessage();
  await rec.settled();
  assert.deepEqual(r.records(), ["user:big", "assistant:m1.0"]);
  await rec.terminal("completed", "0123456789");
  await r.release();
});

test("appendMany: records in order, one batch — two synced records cost one fsync where two appends cost two", async () => {
  const r = await rig();
  const [a, b] = r.writer.appendMany(
    [
      { kind: "user", turn_id: "t1", text: "one" },
      { kind: "terminal", turn_id: "t1", status: "completed", assistant_text: "" },
    ],
    { sync: true },
  );
  assert.deepEqual([(await a!).seq, (await b!).seq], [1, 2]);
  assert.equal(r.syncs.length, 1);
  await Promise.all([r.writer.append({ kind: "user", turn_id: "t2", text: "two" }, { sync: true }), r.writer.append({ kind: "terminal", turn_id: "t2", status: "completed", assistant_text: "" }, { sync: true })]);
  assert.equal(r.syncs.length, 3, "separate appends: the second waits for the first batch and is fsynced on its own");
  const [bad, ok] = r.writer.appendMany([{ kind: "user", turn_id: "t3", text: "x", extra: 1 } as never, { kind: "user", turn_id: "t3", text: "fine" }]);
  await assert.rejects(bad!, (e: { code?: string }) => e.code === "invalid_record");
  assert.equal((await ok!).seq, 5, "an invalid record is refused alone and consumes no seq");
  await r.release();
});
