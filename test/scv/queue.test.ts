/**
 * The shared queue over both transports: enqueue while busy (0-based positions, revision 1, submitter), revision
 * races on update/move/remove (stale → queue_conflict with the current entry), unknown IDs, pause/unpause order,
 * dequeued turns carrying their submitter's request_id, queue events never overtaking terminal events, and the
 * 64-entry / 4 MiB bounds (at and one past), which `queue.update` keeps too (with turn.start's empty-prompt rule), and
 * the edges of `queue.move` (onto itself, before an unknown entry).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_PROMPT_BYTES, MAX_QUEUE_ENTRIES, MAX_QUEUE_PROMPT_BYTES } from "../../src/protocols/scv/wire.js";

/** The fixed refusal past either queue bound: both bounds and the ways on. */
const QUEUE_LIMIT_MESSAGE = "the queue holds at most 64 prompts and 4194304 bytes of prompt text; wait for queued prompts to run, or remove some with queue.remove";
import { TRANSPORTS, type Msg, type Rig, type ScvClient } from "./client.js";
import { useRig } from "./rig.js";

/** Starts a turn the fake holds open until cancelled; resolves with its turn.started. */
async function busy(rig: Rig, c: ScvClient, sid: string): Promise<Msg> {
  rig.fake.script([{ steps: [{ text: "working" }, { waitForAbort: true }] }]);
  const from = c.frames.length;
  const rid = c.request({ type: "turn.start", session_id: sid, prompt: "hold" });
  await c.waitFor((m) => m.request_id === rid && m.type === "assistant.delta", from);
  return c.frames.find((m) => m.request_id === rid && m.type === "turn.started")!;
}

for (const name of TRANSPORTS) {
  describe(`scv queue over ${name}`, () => {
    const suite = useRig(name);

    it("enqueues, checks revisions on update/move/remove, pauses, and dequeues in order with the submitter's request_id", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      const running = await busy(suite.rig, c, sid);
      const ids: string[] = [];
      const entries: Msg[] = [];
      for (const p of ["one", "two", "three"]) {
        const rid = c.request({ type: "turn.start", session_id: sid, prompt: p });
        const e = await c.reply(rid, ["queue.enqueued"]);
        assert.equal(e.type, "queue.enqueued");
        assert.equal(e.position, ids.length);
        assert.deepEqual(Object.keys(e.entry as object).sort(), ["prompt", "queue_id", "revision", "submitter"]);
        assert.equal(e.entry.revision, 1);
        assert.equal(e.entry.submitter, rid);
        assert.equal(e.entry.prompt, p);
        ids.push(rid);
        entries.push(e.entry as Msg);
      }
      const [one, two, three] = entries as [Msg, Msg, Msg];
      // update: current revision wins, the stale one gets the current entry back
      const u1 = c.request({ type: "queue.update", session_id: sid, queue_id: two.queue_id, revision: 1, prompt: "two v2" });
      const upd = await c.reply(u1, ["queue.updated"]);
      assert.equal(upd.type, "queue.updated");
      assert.deepEqual(upd.entry, { ...two, revision: 2, prompt: "two v2" });
      const u2 = c.request({ type: "queue.update", session_id: sid, queue_id: two.queue_id, revision: 1, prompt: "lost race" });
      const conflict = await c.reply(u2, ["queue.updated"]);
      assert.equal(conflict.code, "queue_conflict");
      assert.deepEqual(conflict.entry, { ...two, revision: 2, prompt: "two v2" });
      // move three before one
      const m1 = c.request({ type: "queue.move", session_id: sid, queue_id: three.queue_id, revision: 1, before_queue_id: one.queue_id });
      const moved = await c.reply(m1, ["queue.moved"]);
      assert.deepEqual([moved.type, moved.queue_id, moved.position, moved.revision], ["queue.moved", three.queue_id, 0, 2]);
      const m2 = c.request({ type: "queue.move", session_id: sid, queue_id: three.queue_id, revision: 1, before_queue_id: null });
      assert.equal((await c.reply(m2, ["queue.moved"])).code, "queue_conflict");
      // remove: stale, unknown, then right
      const r1 = c.request({ type: "queue.remove", session_id: sid, queue_id: one.queue_id, revision: 7 });
      assert.equal((await c.reply(r1, ["queue.removed"])).code, "queue_conflict");
      const r2 = c.request({ type: "queue.remove", session_id: sid, queue_id: "no-such-entry", revision: 1 });
      assert.equal((await c.reply(r2, ["queue.removed"])).code, "queue_not_found");
      const r3 = c.request({ type: "queue.remove", session_id: sid, queue_id: one.queue_id, revision: 1 });
      assert.deepEqual(await c.reply(r3, ["queue.removed"]).then((m) => [m.type, m.queue_id, m.revision]), ["queue.removed", one.queue_id, 1]);
      // pause, end the running turn: nothing is dequeued until unpause
      const p1 = c.request({ type: "session.pause", session_id: sid, paused: true });
      assert.deepEqual(await c.reply(p1, ["session.paused"]).then((m) => [m.type, m.paused]), ["session.paused", true]);
      c.request({ type: "turn.cancel", session_id: sid, turn_id: running.turn_id });
      const cancelled = await c.waitFor((m) => m.type === "turn.cancelled" && m.turn_id === running.turn_id);
      const p2 = c.request({ type: "session.pause", session_id: sid, paused: false });
      const unpaused = await c.reply(p2, ["session.paused"]);
      const between = c.frames.slice(c.frames.indexOf(cancelled) + 1, c.frames.indexOf(unpaused));
      assert.ok(!between.some((m) => m.type === "queue.dequeued"), "no dequeue while paused");
      // three (moved to the front) runs first, then two; each with its submitter's request_id
      const d1 = await c.waitFor((m) => m.type === "queue.dequeued", c.frames.indexOf(unpaused));
      assert.equal(d1.queue_id, three.queue_id);
      assert.equal(d1.request_id, three.submitter);
      const t1 = await c.waitFor((m) => m.type === "turn.completed" && m.request_id === three.submitter);
      const started1 = c.frames.find((m) => m.type === "turn.started" && m.request_id === three.submitter)!;
      assert.equal(started1.turn_id, d1.turn_id);
      assert.ok(c.frames.indexOf(d1) < c.frames.indexOf(started1));
      const d2 = await c.waitFor((m) => m.type === "queue.dequeued" && m.queue_id === two.queue_id);
      assert.ok(c.frames.indexOf(t1) < c.frames.indexOf(d2), "a dequeue never overtakes the previous terminal");
      const t2 = await c.waitFor((m) => m.type === "turn.completed" && m.request_id === two.submitter);
      const deltas2 = c.frames.filter((m) => m.type === "assistant.delta" && m.turn_id === t2.turn_id).map((m) => m.content as string);
      assert.equal(deltas2.join(""), "echo: two v2");
      assert.deepEqual(c.seqErrors, []);
      assert.equal(ids.length, 3);
      c.end();
      await c.closed;
    });

    it("resolves pipelined revision races: one update wins, the rest conflict; a dequeued entry is gone", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      const running = await busy(suite.rig, c, sid);
      const e = (await c.reply(c.request({ type: "turn.start", session_id: sid, prompt: "racy" }), ["queue.enqueued"])).entry as Msg;
      // three clients' worth of edits sent back to back against revision 1
      const ids = ["a", "b", "c"].map((p) => c.request({ type: "queue.update", session_id: sid, queue_id: e.queue_id, revision: 1, prompt: `edit ${p}` }));
      const mv = c.request({ type: "queue.move", session_id: sid, queue_id: e.queue_id, revision: 1, before_queue_id: null });
      const replies = await Promise.all([...ids, mv].map((id) => c.reply(id, ["queue.updated", "queue.moved"])));
      assert.deepEqual(
        replies.map((r) => r.type === "error" ? r.code : r.type),
        ["queue.updated", "queue_conflict", "queue_conflict", "queue_conflict"],
      );
      for (const r of replies.slice(1)) assert.deepEqual(r.entry, { ...e, revision: 2, prompt: "edit a" });
      // once dequeued, the entry is not queued work any more
      c.request({ type: "turn.cancel", session_id: sid, turn_id: running.turn_id });
      await c.waitFor((m) => m.type === "queue.dequeued" && m.queue_id === e.queue_id);
      const late = c.request({ type: "queue.remove", session_id: sid, queue_id: e.queue_id, revision: 2 });
      assert.equal((await c.reply(late, ["queue.removed"])).code, "queue_not_found");
      await c.waitFor((m) => m.type === "turn.completed" && m.request_id === e.submitter);
      assert.deepEqual(c.seqErrors, []);
      c.end();
      await c.closed;
    });

    it(`holds at most ${MAX_QUEUE_ENTRIES} entries and ${MAX_QUEUE_PROMPT_BYTES} bytes of prompts, then queue_limit`, async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      const pause = c.request({ type: "session.pause", session_id: sid, paused: true });
      await c.reply(pause, ["session.paused"]);
      // paused and idle: prompts queue
      const big = "b".repeat(MAX_PROMPT_BYTES);
      const n = MAX_QUEUE_PROMPT_BYTES / MAX_PROMPT_BYTES;
      for (let i = 0; i < n; i++) assert.equal((await c.reply(c.request({ type: "turn.start", session_id: sid, prompt: big }), ["queue.enqueued"])).type, "queue.enqueued");
      const overBytes = await c.reply(c.request({ type: "turn.start", session_id: sid, prompt: "x" }), ["queue.enqueued"]);
      assert.deepEqual([overBytes.code, overBytes.message], ["queue_limit", QUEUE_LIMIT_MESSAGE]);
      // free the byte budget, then fill the entry budget with small prompts
      for (const e of c.frames.filter((m) => m.type === "queue.enqueued" && m.entry.prompt === big))
        await c.reply(c.request({ type: "queue.remove", session_id: sid, queue_id: e.entry.queue_id, revision: 1 }), ["queue.removed"]);
      for (let i = 0; i < MAX_QUEUE_ENTRIES; i++) assert.equal((await c.reply(c.request({ type: "turn.start", session_id: sid, prompt: `p${i}` }), ["queue.enqueued"])).position, i);
      const overCount = await c.reply(c.request({ type: "turn.start", session_id: sid, prompt: "one too many" }), ["queue.enqueued"]);
      assert.deepEqual([overCount.code, overCount.message], ["queue_limit", QUEUE_LIMIT_MESSAGE]);
      c.end();
      await c.closed;
    });

    it("queue.update keeps turn.start's rules: a prompt empty only with attachments, the 4 MiB bound at and one past", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      await c.reply(c.request({ type: "session.pause", session_id: sid, paused: true }), ["session.paused"]);
      const enqueue = async (prompt: string, extra: Msg = {}): Promise<Msg> => {
        const m = await c.reply(c.request({ type: "turn.start", session_id: sid, prompt, ...extra }), ["queue.enqueued"]);
        assert.equal(m.type, "queue.enqueued", JSON.stringify(m).slice(0, 300));
        return m.entry as Msg;
      };
      const update = (e: Msg, prompt: string, revision = e.revision as number): Promise<Msg> =>
        c.reply(c.request({ type: "queue.update", session_id: sid, queue_id: e.queue_id, revision, prompt }), ["queue.updated"]);
      // Before the fix an empty update was accepted, leaving a queued turn with neither text nor files.
      const x = await enqueue("x");
      const empty = await update(x, "");
      assert.deepEqual([empty.type, empty.code, empty.message], ["error", "invalid_request", "`prompt` may be empty (or only whitespace) only with attachments"]);
      const dir = mkdtempSync(join(tmpdir(), "scv-q-"));
      writeFileSync(join(dir, "f.txt"), "hello");
      const withFile = await enqueue("see the file", { attachments: [{ kind: "file", path: join(dir, "f.txt"), size: 5 }] });
      const emptied = await update(withFile, "");
      assert.deepEqual([emptied.type, emptied.entry.prompt, emptied.entry.revision, emptied.entry.attachments.length], ["queue.updated", "", 2, 1]);
      // Before the fix an update could grow the queue past its byte bound (64 entries × 256 KiB = 16 MiB).
      const big = "b".repeat(MAX_PROMPT_BYTES);
      const y = await enqueue("y");
      for (let i = 0; i < MAX_QUEUE_PROMPT_BYTES / MAX_PROMPT_BYTES - 1; i++) await enqueue(big);
      // held now: 15 × 256 KiB + "x" + "y" (the emptied entry holds nothing)
      const over = await update(x, big);
      assert.deepEqual([over.code, over.message], ["queue_limit", QUEUE_LIMIT_MESSAGE]);
      const at = await update(x, big.slice(1)); // exactly 4 MiB with "y"
      assert.deepEqual([at.type, at.entry.revision, at.entry.prompt.length], ["queue.updated", 2, MAX_PROMPT_BYTES - 1]);
      // the bound is on the sum: shrinking an entry is always possible
      assert.equal((await update(y, "")).code, "invalid_request");
      assert.equal((await update(y, "z")).type, "queue.updated");
      assert.deepEqual(c.seqErrors, []);
      c.end();
      await c.closed;
    });

    it("queue.move onto itself is a no-op answered queue.moved; before an unknown entry it is queue_not_found", async () => {
      const c = await suite.t.open();
      const s = await c.open();
      const sid = s.session_id as string;
      await c.reply(c.request({ type: "session.pause", session_id: sid, paused: true }), ["session.paused"]);
      const entries: Msg[] = [];
      for (const p of ["a", "b"]) entries.push((await c.reply(c.request({ type: "turn.start", session_id: sid, prompt: p }), ["queue.enqueued"])).entry as Msg);
      const b = entries[1]!;
      const move = (before: string | null, revision = 1): Promise<Msg> =>
        c.reply(c.request({ type: "queue.move", session_id: sid, queue_id: b.queue_id, revision, before_queue_id: before }), ["queue.moved"]);
      // Before: `queue_not_found` "no queued entry with this ID", naming an entry that exists.
      const self = await move(b.queue_id as string);
      assert.deepEqual([self.type, self.queue_id, self.position, self.revision], ["queue.moved", b.queue_id, 1, 1]);
      const unknown = await move("no-such-entry");
      assert.deepEqual([unknown.code, unknown.message], ["queue_not_found", "`before_queue_id` names no queued entry"]);
      assert.equal((await move(b.queue_id as string, 5)).code, "queue_conflict", "a stale revision is still a conflict");
      const snap = await c.reply(c.request({ type: "queue.move", session_id: sid, queue_id: b.queue_id, revision: 1, before_queue_id: entries[0]!.queue_id }), ["queue.moved"]);
      assert.deepEqual([snap.position, snap.revision], [0, 2]);
      assert.deepEqual(c.seqErrors, []);
      c.end();
      await c.closed;
    });
  });
}
