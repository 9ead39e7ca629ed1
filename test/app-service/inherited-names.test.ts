/**
 * Provider IDs that name `Object.prototype` members (`constructor`, `toString`, …) are ordinary unknown IDs: the
 * configuration routes answer them exactly as they answer any other unknown provider, never `internal_error`.
 * Driven through the spawned service.
 * @req CFG-SET-12
 */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ServiceProcess } from "../helpers/service-process.js";
import { fakeSettings } from "../turns/helpers.js";

const NAMES = ["constructor", "toString", "valueOf", "hasOwnProperty"];

it("config.set and config.get treat an inherited-member provider ID as an unknown provider @req CFG-SET-12", async () => {
  for (const name of NAMES) {
    const svc = new ServiceProcess({ env: { MC_PROVIDER: name, MC_MODEL: "some-model" } });
    try {
      await svc.initialize();
      const set = await svc.request("config.set", { scope: "global", selection: { provider_id: name, model_id: "some-model" } });
      assert.equal(set.error?.code, "invalid_selection", `config.set ${name}`);
      const get = await svc.request("config.get", {});
      assert.equal(get.error, null, `config.get under MC_PROVIDER=${name}`);
      assert.deepEqual(get.payload.selection, { provider_id: name, model_id: "some-model" });
      assert.deepEqual(get.payload.available_thinking_levels, ["default"]);
    } finally {
      svc.end();
      await svc.exited;
    }
  }
});

it("without MC_MODEL, an inherited-member provider ID resolves its default model as an unknown provider does @req CFG-SET-12", async () => {
  /** config.get with MC_PROVIDER only, and custom providers declared in the global settings. */
  const getUnder = async (provider: string): Promise<Record<string, any>> => {
    const svc = new ServiceProcess({ env: { MC_PROVIDER: provider } });
    try {
      mkdirSync(svc.home, { recursive: true });
      writeFileSync(join(svc.home, "settings.json"), JSON.stringify(fakeSettings("http://127.0.0.1:9")));
      await svc.initialize();
      const r = await svc.request("config.get", {});
      return { payload: r.payload, error: r.error };
    } finally {
      svc.end();
      await svc.exited;
    }
  };
  const control = await getUnder("no-such-provider");
  for (const name of NAMES) {
    const got = await getUnder(name);
    assert.notEqual(got.error?.code, "internal_error", name);
    assert.deepEqual(got.error, control.error, name);
    if (control.payload !== null) assert.deepEqual(got.payload.available_thinking_levels, control.payload.available_thinking_levels);
  }
});
