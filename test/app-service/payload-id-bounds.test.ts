/**
 * Turn and login IDs in payloads obey `max_id_bytes` (the spec applies it to request, session, turn and event
 * correlation IDs): at the bound the ID is looked up, one byte past it is `limit_exceeded`, as an envelope ID is.
 * Payload checks run before `not_initialized`. Driven through the spawned service.
 * @req AS-LIM-12
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { ServiceProcess } from "../helpers/service-process.js";

const AT = ["t".repeat(128), "é".repeat(64)];
const PAST = ["t".repeat(129), "é".repeat(64) + "t"];

it("turn_id and login_id: max_id_bytes is looked up, one byte more is limit_exceeded @req AS-LIM-12", async () => {
  const svc = new ServiceProcess();
  try {
    const before = await svc.request("turn.cancel", { turn_id: PAST[0] });
    assert.equal(before.error?.code, "limit_exceeded", "the payload bound is checked before not_initialized");
    await svc.initialize();
    const cases: Array<[string, (id: string) => Record<string, unknown>, string]> = [
      ["turn.cancel", (id) => ({ turn_id: id }), "unknown_turn"],
      ["auth.login.cancel", (id) => ({ login_id: id }), "unknown_login"],
      ["auth.login.callback", (id) => ({ login_id: id, input: "code" }), "unknown_login"],
    ];
    for (const [method, payload, unknown] of cases) {
      for (const id of AT) assert.equal((await svc.request(method, payload(id))).error?.code, unknown, `${method} at the bound`);
      for (const id of PAST) {
        const r = await svc.request(method, payload(id));
        assert.deepEqual([r.method, r.payload, r.error?.code], [method, null, "limit_exceeded"], `${method} one byte past`);
      }
    }
    assert.equal((await svc.request("status", {})).error, null, "the loop goes on");
  } finally {
    svc.end();
    await svc.exited;
  }
});
