/** Auth routes keep the startup provider definitions; catalogs and status follow reloaded settings. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceProcess } from "../helpers/service-process.js";

const provider = { api: "openai-chat", base_url: "http://127.0.0.1:9/v1", auth: "none" };

test("auth.status keeps startup providers while catalog.providers and status reload settings", async () => {
  // @req AUTH-STATUS-07
  const home = mkdtempSync(join(tmpdir(), "berth-home-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ providers: { first: provider } }));
  const svc = new ServiceProcess({ home });
  try {
    await svc.initialize();
    const ids = (r: Record<string, any>, key: string) => (r.payload[key] as Array<{ provider_id: string }>).map((p) => p.provider_id);
    assert.deepEqual(ids(await svc.request("auth.status", {}), "providers"), ["anthropic", "first", "openai-codex"]);
    assert.equal((await svc.request("status", {})).payload.provider_auth_ready, false);
    writeFileSync(join(home, "settings.json"), JSON.stringify({ provider: "second", providers: { first: provider, second: provider } }));
    assert.deepEqual(ids(await svc.request("auth.status", {}), "providers"), ["anthropic", "first", "openai-codex"]);
    assert.deepEqual(ids(await svc.request("catalog.providers", {}), "entries"), ["anthropic", "first", "openai-codex", "second"]);
    assert.equal((await svc.request("status", {})).payload.provider_auth_ready, true, "status follows the reloaded selection");
    svc.end();
    assert.equal((await svc.exited).code, 0);
  } finally {
    svc.kill();
  }
});
