/**
 * The launchers' credential handoff (docs/security.md) with a stale or foreign `BERTH_HANDOFF_FD` already in the
 * environment (a wrapper that exported it, a leftover): the launcher must still move credential-like variables out
 * of the exec-time environment, and the service must still hold them (the provider receives its key). Before the
 * fix the launcher skipped the move whenever the variable was set, leaving every credential in
 * /proc/<berth pid>/environ.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { BERTH_BIN, MAGI_BIN } from "../helpers/paths.js";
import { ServiceProcess } from "../helpers/service-process.js";
import { waitTerminal } from "../turns/helpers.js";

for (const bin of [
  { name: "berth service", path: BERTH_BIN, args: ["service"] },
  { name: "magi-code --app service", path: MAGI_BIN, args: ["--app", "service"] },
]) {
  test(`${bin.name} with a stale BERTH_HANDOFF_FD still keeps credentials out of its environ`, { timeout: 60_000 }, async () => {
    const fake = await startFakeProvider();
    const keys = { FAKE_API_KEY: `fake-${randomBytes(12).toString("hex")}`, GITHUB_TOKEN: `ghp-${randomBytes(12).toString("hex")}` };
    const svc = new ServiceProcess({ bin: bin.path, args: bin.args, exec: true, env: { ...keys, BERTH_HANDOFF_FD: "9" } });
    try {
      mkdirSync(svc.home, { recursive: true });
      writeFileSync(join(svc.home, "settings.json"), JSON.stringify({ providers: { fake: { api: "openai-chat", base_url: `${fake.baseUrl}/v1`, api_key_env: "FAKE_API_KEY", models: [{ id: "fake-model" }] } }, provider: "fake", model: "fake-model" }));
      assert.equal((await svc.initialize()).error, null);
      // The launcher exec'd node in place: the service's own environ.
      const environ = readFileSync(`/proc/${svc.child.pid}/environ`, "utf8");
      assert.match(environ, /MC_HOME=/);
      for (const [name, value] of Object.entries(keys)) assert.ok(!environ.includes(value), `${name} is in the exec-time environment`);
      await svc.request("turn.start", { prompt: "hi" }, {}, "t1");
      const ev = await waitTerminal(svc, "t1");
      assert.equal(ev.find((e) => e.event === "turn.terminal")?.payload.status, "completed");
      assert.equal((await fake.waitForRequests(1))[0]!.headers.authorization, `Bearer ${keys.FAKE_API_KEY}`, "the service still holds the key");
    } finally {
      svc.end();
      await svc.exited;
      await fake.close();
    }
  });
}
