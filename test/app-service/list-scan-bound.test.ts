/**
 * `max_session_list_scan_entries` (20,000) at the limit and one past it, through the spawned service: a sessions
 * directory of exactly 20,000 entries (one session, the rest other files, which count too) is listed; one entry
 * more and `session.list` answers `limit_exceeded` rather than a partial page, without touching any file; once the
 * entry is gone the same process lists again.
 * @req AS-SES-08
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LIMITS } from "../../src/protocols/app-service/limits.js";
import { ServiceProcess } from "../helpers/service-process.js";

it(`session.list scans ${LIMITS.max_session_list_scan_entries} entries; one more is limit_exceeded; the service goes on`, { timeout: 120_000 }, async () => {
  const svc = new ServiceProcess();
  try {
    await svc.initialize();
    const sid = (await svc.request("session.create", {})).payload.session_id as string;
    const dir = join(svc.home, "sessions");
    const have = readdirSync(dir).length;
    for (let i = have; i < LIMITS.max_session_list_scan_entries; i++) writeFileSync(join(dir, `filler-${i}.txt`), "");
    assert.equal(readdirSync(dir).length, LIMITS.max_session_list_scan_entries);
    const at = await svc.request("session.list", {});
    assert.equal(at.error, null, JSON.stringify(at.error));
    assert.deepEqual(at.payload.sessions.map((s: { session_id: string }) => s.session_id), [sid]);

    const extra = join(dir, "filler-one-past.txt");
    writeFileSync(extra, "");
    const entries = readdirSync(dir).sort();
    const past = await svc.request("session.list", {});
    assert.deepEqual([past.payload, past.error], [null, { code: "limit_exceeded", message: "A protocol limit was exceeded." }]);
    assert.deepEqual(readdirSync(dir).sort(), entries, "a refused list changes nothing");

    unlinkSync(extra);
    const again = await svc.request("session.list", {});
    assert.equal(again.error, null);
    assert.deepEqual(again.payload.sessions.map((s: { session_id: string }) => s.session_id), [sid]);
  } finally {
    svc.end();
    await svc.exited;
  }
});
