/**
 * Bounded strings of the app-service payloads at the limit and one past it, through the spawned service:
 * - list and replay continuation strings are at most 128 bytes (spec "Sessions"): at 128 a list continuation is used
 *   and a replay cursor is resolved (stale: `resync_required`); at 129 the list answers `invalid_session_id` and the
 *   replay `limit_exceeded`;
 * - provider IDs are at most 256 ASCII bytes (spec "Provider and model catalogs"): a configured custom provider of
 *   256 bytes is listed and its models can be asked for; one of 257 is omitted and naming it is `invalid_selection`.
 * After each refusal the same process answers a normal request.
 * @req AS-SES-09 @req CAT-PAGE-01
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceProcess } from "../helpers/service-process.js";

it("list and replay continuations: 128 bytes are used, 129 are refused; the service goes on", async () => {
  const svc = new ServiceProcess();
  try {
    await svc.initialize();
    const created = await svc.request("session.create", {});
    const sid = created.payload.session_id as string;
    const list = await svc.request("session.list", { after: "a".repeat(128) });
    assert.equal(list.error, null, JSON.stringify(list));
    assert.deepEqual(list.payload.sessions.map((s: { session_id: string }) => s.session_id), [sid], "IDs after the 128-byte continuation");
    const listPast = await svc.request("session.list", { after: "a".repeat(129) });
    assert.deepEqual([listPast.payload, listPast.error], [null, { code: "invalid_session_id", message: "The session ID is invalid." }]);
    const replay = await svc.request("session.replay", { after: "c".repeat(128) }, { session_id: sid });
    assert.equal(replay.error, null, JSON.stringify(replay));
    assert.equal(replay.payload.resync_required, true);
    const replayPast = await svc.request("session.replay", { after: "c".repeat(129) }, { session_id: sid });
    assert.deepEqual([replayPast.session_id, replayPast.payload, replayPast.error], [sid, null, { code: "limit_exceeded", message: "A protocol limit was exceeded." }]);
    const again = await svc.request("session.replay", {}, { session_id: sid });
    assert.equal(again.error, null);
    assert.equal(again.payload.resync_required, false);
  } finally {
    svc.end();
    await svc.exited;
  }
});

it("provider IDs: 256 bytes are listed and looked up, 257 are omitted and invalid_selection; the service goes on", async () => {
  const home = mkdtempSync(join(tmpdir(), "berth-home-"));
  const at = "p" + "a".repeat(255);
  const past = "q" + "a".repeat(256);
  const provider = { api: "openai-chat", base_url: "http://127.0.0.1:9/v1", auth: "none", models: [{ id: "m" }] };
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { [at]: provider, [past]: provider } }));
  const svc = new ServiceProcess({ home });
  try {
    await svc.initialize();
    const providers = await svc.request("catalog.providers", {});
    assert.equal(providers.error, null, JSON.stringify(providers));
    const ids = providers.payload.entries.map((e: { provider_id: string }) => e.provider_id);
    assert.ok(ids.includes(at), "the 256-byte ID is listed");
    assert.ok(!ids.includes(past), "the 257-byte ID is omitted");
    const models = await svc.request("catalog.models", { provider_id: at });
    assert.equal(models.error, null, JSON.stringify(models));
    const modelsPast = await svc.request("catalog.models", { provider_id: past });
    assert.deepEqual([modelsPast.payload, modelsPast.error?.code], [null, "invalid_selection"]);
    assert.equal((await svc.request("status", {})).error, null);
  } finally {
    svc.end();
    await svc.exited;
  }
});
