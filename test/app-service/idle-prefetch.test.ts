/**
 * Idle-time prefetch of the `idle` families (auth, catalog/config): their modules compile only while nothing runs.
 * A quiet input alone is not idle: a turn streaming for longer than the quiet period must not have those modules
 * compile under it (a stall in its stream; a code-cached first turn would also load node:http and node:crypto). Once
 * the turn has ended and the input stays quiet, they are prefetched. Observed through the service's own
 * `BERTH_DEBUG_TIMING` marks (`load <first method>` when a family starts loading).
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import type { FakeTurn } from "../fakes/fake-provider.js";
import { startRig, startTurn, waitTerminal } from "../turns/helpers.js";

const IDLE_LOAD = /berth-timing \S+ load (auth|catalog)\./;

it("idle families are not prefetched while a turn runs, and are once it has ended and the input is quiet", async () => {
  const rig = await startRig({ svc: { env: { BERTH_DEBUG_TIMING: "1" } } });
  try {
    // Ten deltas 150 ms apart: the turn streams for ~1.5 s, five times the 300 ms quiet-input wait.
    const slow: FakeTurn = { steps: Array.from({ length: 10 }, (_, i) => ({ text: `w${i} ` })), chunkDelayMs: 150 };
    rig.fake.script([slow]);
    const from = rig.svc.stderr.length;
    const r = await startTurn(rig.svc, "stream slowly", "t1");
    assert.equal(r.error, null, JSON.stringify(r.error));
    const events = await waitTerminal(rig.svc, "t1");
    assert.equal(events.find((e) => e.event === "turn.terminal")!.payload.status, "completed");
    assert.doesNotMatch(rig.svc.stderr.slice(from), IDLE_LOAD, "an idle family was loaded while the turn streamed");

    // Ended, and nothing more arrives: now they load.
    for (let i = 0; i < 3000 && !IDLE_LOAD.test(rig.svc.stderr); i++) await new Promise((res) => setTimeout(res, 10));
    assert.match(rig.svc.stderr, IDLE_LOAD, "the idle families were never prefetched after the turn");
  } finally {
    await rig.close();
  }
});
