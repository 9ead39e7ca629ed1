/**
 * App-service configuration rules through the spawned service (issue 20 §6, §5): project writes pin fields,
 * new turns reload selection/reasoning/fast while a running turn keeps what it captured, and a slow
 * catalog.refresh leaves turns (output and cancel) available and changes neither the selection nor settings.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { FAKE_MODEL_ID, FAKE_PROVIDER_ID, parsed, startRig, startTurn, waitTerminal, type Msg } from "../turns/helpers.js";

async function until<T>(what: string, f: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const body = (r: { json: unknown }): Record<string, any> => r.json as Record<string, any>;

describe("configuration rules", { concurrency: 2 }, () => {
  it("a new turn uses the new selection, reasoning and fast mode; a running turn keeps its captured ones @req AS-CFG-TURN-01 @req AS-CFG-TURN-02", async () => {
    const rig = await startRig({ settings: { api: "openai-responses" } });
    try {
      // Both models declare reasoning levels (custom providers' static metadata).
      const settingsFile = join(rig.svc.home, "settings.json");
      const doc = JSON.parse(readFileSync(settingsFile, "utf8")) as { providers: Record<string, { models: unknown[] }> };
      doc.providers[FAKE_PROVIDER_ID]!.models = [FAKE_MODEL_ID, "fake-model-2"].map((id) => ({ id, thinking_levels: ["default", "high"] }));
      writeFileSync(settingsFile, JSON.stringify(doc));
      rig.fake.setModels([{ id: FAKE_MODEL_ID }, { id: "fake-model-2" }]);
      const refreshed = await rig.svc.request("catalog.refresh", { provider_id: FAKE_PROVIDER_ID });
      assert.equal(refreshed.payload?.state, "fresh_cache", JSON.stringify(refreshed));
      const before = await rig.svc.request("config.get", {});
      assert.equal(before.payload.fast, false);
      const flag = join(rig.svc.cwd!, "go.flag");
      // Turn A: its first response asks for a tool that waits for the flag, so A is running across the config change.
      rig.fake.script([{ steps: [{ toolCall: { id: "w1", name: "bash", arguments: { command: `while [ ! -e ${flag} ]; do sleep 0.02; done; echo released` } } }] }]);
      await startTurn(rig.svc, "turn A", "A");
      await until("A's tool is running", () => parsed(rig.svc).some((m) => m.request_id === "A" && m.event === "turn.activity" && m.payload.activity.kind === "tool" && m.payload.activity.status === "running"));
      const set = await rig.svc.request("config.set", { scope: "global", selection: { provider_id: FAKE_PROVIDER_ID, model_id: "fake-model-2" }, thinking_level: "high", fast: true });
      assert.equal(set.error, null, JSON.stringify(set.error));
      assert.deepEqual([set.payload.effective.selection.model_id, set.payload.effective.thinking_level, set.payload.effective.fast], ["fake-model-2", "high", true]);
      // Turn B starts after the write: its request carries the new model, reasoning and the priority tier.
      await startTurn(rig.svc, "turn B", "B");
      const evB = await waitTerminal(rig.svc, "B");
      assert.equal(evB.at(-1)!.payload.status, "completed");
      const reqB = rig.fake.requests.find((r) => r.body.includes("turn B"))!;
      assert.equal(body(reqB).model, "fake-model-2");
      assert.equal(body(reqB).reasoning?.effort, "high");
      assert.equal(body(reqB).service_tier, "priority");
      // A continues with what it captured at its start.
      rig.fake.script([{ steps: [{ text: "A done" }] }]);
      writeFileSync(flag, "");
      const evA = await waitTerminal(rig.svc, "A");
      assert.equal(evA.at(-1)!.payload.status, "completed");
      const reqsA = rig.fake.requests.filter((r) => r.body.includes("turn A"));
      assert.equal(reqsA.length, 2, "A made two provider requests");
      for (const r of reqsA) {
        assert.equal(body(r).model, FAKE_MODEL_ID);
        assert.equal(body(r).reasoning, undefined);
        assert.equal(body(r).service_tier, undefined);
      }
      // Turning fast off again is a fast-only write (no catalog needed) and the next turn drops the field.
      assert.equal((await rig.svc.request("config.set", { scope: "global", fast: false })).error, null);
      await startTurn(rig.svc, "turn C", "C");
      await waitTerminal(rig.svc, "C");
      const reqC = rig.fake.requests.find((r) => r.body.includes("turn C"))!;
      assert.equal(body(reqC).service_tier, undefined);
      assert.equal(body(reqC).model, "fake-model-2");
    } finally {
      await rig.close();
    }
  });

  it("a project write pins selection and reasoning even when they equal the inherited values @req AS-CFG-PIN-01", async () => {
    const rig = await startRig();
    try {
      rig.fake.setModels([{ id: FAKE_MODEL_ID }, { id: "fake-model-2" }]);
      assert.equal((await rig.svc.request("catalog.refresh", { provider_id: FAKE_PROVIDER_ID })).payload?.state, "fresh_cache");
      const eff = (await rig.svc.request("config.get", {})).payload;
      const projectFile = join(rig.svc.cwd!, ".berth", "settings.json");
      assert.equal(existsSync(projectFile), false);
      // Same values as inherited from the global layer: still written to the project layer.
      const set = await rig.svc.request("config.set", { scope: "project", selection: eff.selection, thinking_level: eff.configured_thinking_level });
      assert.equal(set.error, null);
      const doc = JSON.parse(readFileSync(projectFile, "utf8")) as Record<string, unknown>;
      assert.deepEqual([doc["provider"], doc["model"], doc["thinking_level"]], [FAKE_PROVIDER_ID, FAKE_MODEL_ID, eff.configured_thinking_level]);
      // The pin holds when the global layer later changes.
      assert.equal((await rig.svc.request("config.set", { scope: "global", selection: { provider_id: FAKE_PROVIDER_ID, model_id: "fake-model-2" } })).error, null);
      const after = (await rig.svc.request("config.get", {})).payload;
      assert.equal(after.selection.model_id, FAKE_MODEL_ID);
    } finally {
      await rig.close();
    }
  });

  it("during a slow catalog.refresh turn output and cancellation stay available; refresh changes neither selection nor settings @req AS-CFG-REFRESH-01 @req AS-CFG-REFRESH-02", async () => {
    // A models endpoint that holds its answer until the test releases it.
    const held: ServerResponse[] = [];
    const models = createServer((_req, res) => {
      held.push(res);
      models.emit("held");
    });
    models.listen(0, "127.0.0.1");
    await once(models, "listening");
    const rig = await startRig({ svc: { env: { ANTHROPIC_BASE_URL: `http://127.0.0.1:${(models.address() as AddressInfo).port}`, ANTHROPIC_API_KEY: "sk-ant-test" } } });
    try {
      const settingsFile = join(rig.svc.home, "settings.json");
      const settingsBefore = readFileSync(settingsFile, "utf8");
      const cfgBefore = (await rig.svc.request("config.get", {})).payload;
      const arrived = once(models, "held");
      const from = rig.svc.lines.length;
      rig.svc.send({ protocol_version: 1, kind: "request", request_id: "refresh", method: "catalog.refresh", payload: { provider_id: "anthropic" } });
      await arrived;
      // A turn streams to completion while the refresh is held.
      const t1 = await startTurn(rig.svc, "while refreshing", "t1");
      assert.equal(t1.error, null);
      const ev1 = await waitTerminal(rig.svc, "t1");
      assert.equal(ev1.at(-1)!.payload.status, "completed");
      assert.equal(ev1.at(-1)!.payload.assistant_text, "echo: while refreshing");
      // And a turn can be cancelled.
      rig.fake.script([{ steps: [{ text: "partial" }, { waitForAbort: true }] }]);
      const t2 = await startTurn(rig.svc, "cancel me", "t2");
      await until("t2 delta", () => parsed(rig.svc).some((m) => m.request_id === "t2" && m.event === "turn.assistant_delta"));
      const cancel = await rig.svc.request("turn.cancel", { turn_id: t2.payload.turn_id });
      assert.equal(cancel.payload?.status, "cancellation_requested");
      assert.equal((await waitTerminal(rig.svc, "t2")).at(-1)!.payload.status, "cancelled");
      assert.equal(parsed(rig.svc, from).some((m: Msg) => m.request_id === "refresh"), false, "the refresh is still held");
      for (const res of held) res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data: [{ id: "claude-x", type: "model" }], has_more: false }));
      await until("refresh response", () => parsed(rig.svc, from).find((m: Msg) => m.kind === "response" && m.request_id === "refresh"));
      assert.equal(readFileSync(settingsFile, "utf8"), settingsBefore, "settings untouched");
      assert.deepEqual((await rig.svc.request("config.get", {})).payload, cfgBefore, "selection unchanged");
    } finally {
      await rig.close();
      models.closeAllConnections();
      models.close();
    }
  });
});
