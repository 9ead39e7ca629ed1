/**
 * Request JSON that `JSON.parse` accepts but a strict decoder must not: unpaired surrogate escapes (not Unicode text,
 * so not storable or echoable) and repeated member names (two readers could disagree on which value counts).
 * Driven through the spawned service; every bad record gets one fixed error and the loop goes on.
 * @req AS-STRICT-01 @req AS-STRICT-02 @req AS-STRICT-03
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ServiceProcess } from "../helpers/service-process.js";
import { parsed, startRig, waitTerminal, type Msg } from "../turns/helpers.js";

/** A request record as raw text, so a test can spell escapes and repeated keys JSON.stringify would not write. */
const raw = (id: string, method: string, payload: string, more = ""): string =>
  `{"protocol_version":1,"kind":"request","request_id":${id},"method":"${method}","payload":${payload}${more}}\n`;

/** Sends one record and returns the next response (events of a running turn may come first). */
async function answer(svc: ServiceProcess, record: string): Promise<Msg> {
  const from = svc.lines.length;
  svc.send(record);
  for (let n = from + 1; ; n++) {
    await svc.waitLines(n);
    assert.ok(svc.lines.length >= n, `the service exited; stderr: ${svc.stderr.slice(0, 300)}`);
    const m = JSON.parse(svc.lines[n - 1]!) as Msg;
    if (m.kind === "response") return m;
  }
}

const INVALID_JSON = { code: "invalid_json", message: "The record is not valid JSON." };

describe("strict request JSON", { concurrency: 2 }, () => {
  it("an unpaired surrogate escape makes the record invalid_json; no turn starts, nothing is stored @req AS-STRICT-01", async () => {
    const rig = await startRig();
    try {
      const svc = rig.svc;
      for (const prompt of ['"hi \\ud800 there"', '"\\udc00"', '"end \\uD83D"']) {
        const r = await answer(svc, raw('"t-lone"', "turn.start", `{"prompt":${prompt}}`));
        assert.deepEqual([r.request_id, r.session_id, r.method, r.payload, r.error], [null, null, null, null, INVALID_JSON]);
      }
      const id = await answer(svc, raw('"id-\\udbff"', "status", "{}"));
      assert.deepEqual([id.request_id, id.error], [null, INVALID_JSON], "an unpaired surrogate is never echoed");
      assert.equal(parsed(svc).filter((m) => m.kind === "event").length, 0, "no turn started");
      const list = await svc.request("session.list", {});
      assert.deepEqual(list.payload.sessions, [], "no session was created");
      // A paired escape is one character, and an escaped backslash before `ud800` is plain text: both are fine.
      const ok = await answer(svc, raw('"t-pair"', "turn.start", '{"prompt":"smile \\ud83d\\ude00 \\\\ud800"}'));
      assert.equal(ok.error, null);
      const events = await waitTerminal(svc, "t-pair");
      assert.equal(events.at(-1)!.payload.status, "completed");
      const replay = await svc.request("session.replay", {}, { session_id: ok.payload.session_id });
      assert.equal(replay.payload.events[0].text, "smile \u{1f600} \\ud800");
    } finally {
      await rig.close();
    }
  });

  it("a repeated envelope member is invalid_request and an ambiguous identity is not echoed @req AS-STRICT-02", async () => {
    const svc = new ServiceProcess();
    try {
      await svc.initialize();
      const twoPayloads = await answer(svc, raw('"p2"', "status", '{"x":1}', ',"payload":{}'));
      assert.deepEqual([twoPayloads.request_id, twoPayloads.method, twoPayloads.error?.code], ["p2", "status", "invalid_request"]);
      const twoIds = await answer(svc, raw('"a"', "status", "{}", ',"request_id":"b"'));
      assert.deepEqual([twoIds.request_id, twoIds.error?.code], [null, "invalid_request"], "which request_id counts is ambiguous");
      const twoMethods = await answer(svc, raw('"m2"', "status", "{}", ',"\\u006dethod":"capabilities"'));
      assert.deepEqual([twoMethods.request_id, twoMethods.method, twoMethods.error?.code], ["m2", null, "invalid_request"], "names compare after unescaping");
      const after = await svc.request("status", {});
      assert.equal(after.error, null, "the loop goes on");
    } finally {
      svc.end();
      await svc.exited;
    }
  });

  it("a repeated payload member is invalid_payload, after the duplicate-ID check; no turn starts @req AS-STRICT-03", async () => {
    const rig = await startRig();
    try {
      const svc = rig.svc;
      const r = await answer(svc, raw('"t-dup"', "turn.start", '{"prompt":"first","prompt":"second"}'));
      assert.deepEqual([r.request_id, r.method, r.payload, r.error?.code], ["t-dup", "turn.start", null, "invalid_payload"]);
      const nested = await answer(svc, raw('"c-dup"', "config.set", '{"scope":"global","selection":{"provider_id":"a","model_id":"b","model_id":"c"}}'));
      assert.equal(nested.error?.code, "invalid_payload");
      assert.equal(parsed(svc).filter((m) => m.kind === "event").length, 0, "no turn started");
      // The same name in sibling objects is not a repetition. The turn waits for its cancel, keeping t-ok reserved.
      rig.fake.script([{ steps: [{ text: "working" }, { waitForAbort: true }] }]);
      const sib = await answer(svc, raw('"t-ok"', "turn.start", '{"prompt":"fine","options":{}}'));
      assert.equal(sib.error, null);
      // While t-ok is reserved, its ID on a record with a repeated member is still duplicate_request_id.
      const dup = await answer(svc, raw('"t-ok"', "turn.start", '{"prompt":"x","prompt":"y"}'));
      assert.equal(dup.error?.code, "duplicate_request_id");
      assert.equal((await svc.request("turn.cancel", { turn_id: sib.payload.turn_id })).error, null);
      assert.equal((await waitTerminal(svc, "t-ok")).at(-1)!.payload.status, "cancelled");
    } finally {
      await rig.close();
    }
  });
});
