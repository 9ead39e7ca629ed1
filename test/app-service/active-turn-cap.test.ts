/**
 * The active-turn cap (MAX_ACTIVE_TURNS = 8 per service; the spec names the code, Berth the value) at the limit and
 * one past it, through the spawned service: eight running turns are accepted, a ninth is `too_many_active_turns`
 * with no worker and no session created, the process goes on answering, and once one turn has ended a new one is
 * accepted and completes.
 * @req AS-TURN-17
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { MAX_ACTIVE_TURNS } from "../../src/protocols/app-service/turns.js";
import type { FakeTurn } from "../fakes/fake-provider.js";
import { startRig, startTurn, waitTerminal, type Msg } from "../turns/helpers.js";

it(`${MAX_ACTIVE_TURNS} active turns are accepted; one more is too_many_active_turns; the service goes on`, async () => {
  const rig = await startRig();
  const sessions = (): number => readdirSync(join(rig.svc.home, "sessions")).filter((f) => f.endsWith(".jsonl")).length;
  try {
    const hold: FakeTurn = { steps: [{ text: "a" }, { waitForAbort: true }] };
    rig.fake.script([...Array.from({ length: MAX_ACTIVE_TURNS }, () => hold), { steps: [{ text: "ok" }] }]);
    const turns: Msg[] = [];
    for (let i = 0; i < MAX_ACTIVE_TURNS; i++) {
      const r = await startTurn(rig.svc, `p${i}`, `t${i}`);
      assert.equal(r.error, null, JSON.stringify(r.error));
      turns.push(r.payload);
    }
    const before = sessions();
    const past = await startTurn(rig.svc, "one too many", "t-past");
    assert.deepEqual([past.payload, past.error], [null, { code: "too_many_active_turns", message: "The service has reached its active-turn limit." }]);
    assert.equal(sessions(), before, "a refused start creates no session");
    assert.equal((await rig.svc.request("status", {})).error, null, "the service goes on");

    const cancel = await rig.svc.request("turn.cancel", { turn_id: turns[0]!.turn_id });
    assert.equal(cancel.error, null);
    const ended = await waitTerminal(rig.svc, "t0");
    assert.equal(ended.find((e) => e.event === "turn.terminal")!.payload.status, "cancelled");
    const again = await startTurn(rig.svc, "now there is room", "t-again");
    assert.equal(again.error, null, JSON.stringify(again.error));
    const done = await waitTerminal(rig.svc, "t-again");
    assert.equal(done.find((e) => e.event === "turn.terminal")!.payload.status, "completed");
  } finally {
    await rig.close();
  }
});
