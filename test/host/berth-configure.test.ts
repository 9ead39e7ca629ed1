/**
 * `configure` on Berth's own backend when the registry cannot be written (the real host, the backend, the loopback
 * fake provider): the model and reasoning level are durable first, so a refused `configure` changes nothing — the
 * session's turns keep the model they had, a daemon restart would find the same — and the refusal names the cause
 * and the fix; once the registry is writable again the same change is accepted and used.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { AhpClient, type Json } from "./helpers.js";
import { ended, newSession, startTurn, withBerth } from "./berth-rig.js";

test("a configure whose registry write fails is refused naming the cause and the fix, and changes no turn's model", async () => {
  const fake = await startFakeProvider();
  const berthHome = mkdtempSync(join(tmpdir(), "bh-berth-"));
  writeFileSync(
    join(berthHome, "settings.json"),
    JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, auth: "none", models: [{ id: "fake-model" }, { id: "fake-model-2" }] } } }),
  );
  try {
    await withBerth(
      async ({ h, cwd }) => {
        const { c } = await AhpClient.init(h, ["ahp-root://"]);
        const { session, chat } = await newSession(c, "ahp-session:/configure-unwritable", cwd);
        // A directory where the registry file must go: its atomic rename fails (EISDIR) whoever runs the test.
        const registry = join(h.stateDir, "berth-runtime.json");
        rmSync(registry, { force: true });
        mkdirSync(join(registry, "in-the-way"), { recursive: true });

        const change = { type: "session/configChanged", config: { model: { provider: "fake", id: "fake-model-2" } } };
        c.dispatch(session, change);
        const rej = await c.action((e) => e.channel === session && e.action.type === "session/configChanged" && e.rejectionReason !== undefined, "the refusal", 10_000);
        const reason = String(rej.rejectionReason);
        assert.match(reason, /registry write failed \(EISDIR/, `names the cause: ${reason}`);
        assert.match(reason, /the model and reasoning level are unchanged/, reason);
        assert.ok(reason.includes(`make ${registry} a writable file`), `names the fix: ${reason}`);

        const n = fake.requests.length;
        startTurn(c, chat, "c1", "which model?");
        assert.equal((await ended(c, "c1")).action.type, "chat/turnComplete");
        assert.equal((fake.requests[n]!.json as Json).model, "fake-model", "the refused change reached no turn");

        rmSync(registry, { recursive: true });
        c.dispatch(session, change);
        await c.action((e) => e.channel === session && e.action.type === "session/configChanged" && e.rejectionReason === undefined, "the accepted change", 10_000);
        const m = fake.requests.length;
        startTurn(c, chat, "c2", "and now?");
        assert.equal((await ended(c, "c2")).action.type, "chat/turnComplete");
        assert.equal((fake.requests[m]!.json as Json).model, "fake-model-2", "the accepted change is used");
        c.close();
      },
      { fake, berthHome },
    );
  } finally {
    await fake.close();
  }
});
