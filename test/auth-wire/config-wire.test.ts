/** config.set through the spawned service: unknown fields survive, files stay owner-only. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceProcess } from "../helpers/service-process.js";

test("config.set preserves unknown fields and writes 0600 files in both scopes", async () => {
  // @req CFG-SET-11
  const home = mkdtempSync(join(tmpdir(), "berth-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "berth-cwd-"));
  writeFileSync(join(home, "settings.json"), JSON.stringify({ theme: "dark", nested: { a: [1, 2] }, thinking_level: "high" }));
  const svc = new ServiceProcess({ home, cwd });
  try {
    await svc.initialize();
    const g = await svc.request("config.set", { scope: "global", fast: true });
    assert.equal(g.payload.persisted, true);
    const doc = JSON.parse(readFileSync(join(home, "settings.json"), "utf8"));
    assert.deepEqual(doc, { theme: "dark", nested: { a: [1, 2] }, thinking_level: "high", fast: true });
    assert.equal(statSync(join(home, "settings.json")).mode & 0o777, 0o600);
    const p = await svc.request("config.set", { scope: "project", thinking_level: "default" });
    assert.equal(p.error?.code, "catalog_unavailable", "reasoning changes need a catalog");
    svc.end();
    assert.equal((await svc.exited).code, 0);
  } finally {
    svc.kill();
  }
});
