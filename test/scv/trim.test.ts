/**
 * `session.trimmed` over `berth stdio`: a session whose durable history passes its bounds (2 MiB read back for
 * the model context) trims its oldest turns when the next turn is admitted. The frame carries that turn's
 * `request_id`, the session's next `seq`, `removed_messages` and `history_bytes`, and comes right after the
 * turn's `turn.started`; the provider request of that turn no longer carries the oldest prompt.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openTransport, startRig, type Msg, type Rig, type Transport } from "./client.js";

describe("scv session.trimmed over stdio", () => {
  let rig: Rig;
  let t: Transport;
  before(async () => {
    rig = await startRig();
    // A context window large enough that compaction never runs first: the history bound is what is reached.
    const path = join(rig.home, "settings.json");
    const s = JSON.parse(readFileSync(path, "utf8")) as { providers: { fake: { models: Array<Record<string, unknown>> } } };
    s.providers.fake.models[0]!.context_window = 100_000_000;
    writeFileSync(path, JSON.stringify(s));
    t = await openTransport("stdio", rig);
  });
  after(async () => {
    await t.close();
    await rig.fake.close();
  });

  it("trims the oldest turns once the history passes its bounds and reports it", async () => {
    const c = await t.open();
    const s = await c.open();
    const sid = s.session_id as string;
    const big = (i: number): string => `MARK-${i}-START ${"x".repeat(240_000)}`;
    let trimmed: Msg | undefined;
    let turn: { requestId: string; terminal: Msg; frames: Msg[] } | undefined;
    let n = 0;
    for (let i = 1; i <= 8 && trimmed === undefined; i++) {
      n = rig.fake.requests.length;
      turn = await c.turn(sid, big(i));
      assert.equal(turn.terminal.type, "turn.completed", JSON.stringify(turn.terminal).slice(0, 300));
      trimmed = turn.frames.find((f) => f.type === "session.trimmed");
    }
    assert.ok(trimmed !== undefined && turn !== undefined, "the history passed its bounds within eight 240 KB turns");
    assert.deepEqual(Object.keys(trimmed).sort(), ["history_bytes", "removed_messages", "request_id", "seq", "session_id", "type"]);
    assert.equal(trimmed.request_id, turn.requestId);
    assert.equal(trimmed.session_id, sid);
    assert.ok(Number.isSafeInteger(trimmed.removed_messages) && (trimmed.removed_messages as number) > 0);
    assert.ok(Number.isSafeInteger(trimmed.history_bytes) && (trimmed.history_bytes as number) > 0 && (trimmed.history_bytes as number) <= 2 * 1024 * 1024);
    const started = turn.frames.find((f) => f.type === "turn.started")!;
    assert.equal(trimmed.seq, (started.seq as number) + 1, "right after turn.started");
    const body = rig.fake.requests[n]!.body;
    assert.ok(!body.includes("MARK-1-START"), "the oldest prompt left the model context");
    assert.match(body, /Berth trimmed \d+ earlier history records/);
    assert.deepEqual(c.seqErrors, []);
    // The next turn fits: no second trim.
    const next = await c.turn(sid, "small one");
    assert.equal(next.terminal.type, "turn.completed");
    assert.equal(next.frames.filter((f) => f.type === "session.trimmed").length, 0);
    c.end();
    await c.closed;
  });
});
