/**
 * What a turn keeps in memory from the previous one (settings, the model catalog, instruction files) is checked
 * against the file's identity: an edit between two turns is used by the second. The files are first left alone past
 * the memos' stability window (an awaited condition), so the first turn really keeps them.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "../../src/runtime/agent.js";
import { CatalogCache } from "../../src/store/catalog/cache.js";
import { chatSse } from "../helpers/chat-sse.js";
import { settled } from "../helpers/settled.js";

interface Seen {
  model: string;
  system: string;
}

async function rig(): Promise<{ home: string; cwd: string; seen: Seen[]; settings: (model: string) => string; agent: Agent; turn: (id: string) => Promise<void>; close: () => Promise<void> }> {
  const home = mkdtempSync(join(tmpdir(), "tc-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "tc-cwd-"));
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => (body += d));
    req.on("end", () => {
      const json = JSON.parse(body) as { model: string; messages: Array<{ role: string; content: string }> };
      seen.push({ model: json.model, system: json.messages.find((m) => m.role === "system")?.content ?? "" });
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(chatSse("ok"));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  const settings = (model: string): string =>
    JSON.stringify({
      provider: "fake",
      model,
      providers: { fake: { api: "openai-chat", base_url: `http://127.0.0.1:${port}/v1`, auth: "none", models: [{ id: "model-a" }, { id: "model-b" }] } },
    });
  writeFileSync(join(home, "settings.json"), settings("model-a"));
  const agent = new Agent({ home, cwd, env: { PATH: process.env["PATH"], MC_HOME: home } });
  const turn = async (id: string): Promise<void> => {
    const out = await agent.runTurn({ turnId: id, writer: null, history: null, cwd, prompt: "hi", signal: new AbortController().signal, noTools: true, sink: { delta: () => true, event: () => undefined } });
    assert.equal(out.status, "completed");
  };
  return {
    home,
    cwd,
    seen,
    settings,
    agent,
    turn,
    close: async () => {
      await agent.close();
      await new Promise<void>((r) => server.close(() => r()));
      rmSync(home, { recursive: true, force: true });
      rmSync(cwd, { recursive: true, force: true });
    },
  };
}

test("settings.json edited between two turns: the second turn uses the edit", { timeout: 60_000 }, async () => {
  const r = await rig();
  try {
    const file = join(r.home, "settings.json");
    await settled(file);
    await r.turn("t1");
    await r.turn("t2");
    // Rewritten in place with a document of the same size (only the model differs).
    writeFileSync(file, r.settings("model-b"));
    await r.turn("t3");
    assert.deepEqual(r.seen.map((s) => s.model), ["model-a", "model-a", "model-b"]);
  } finally {
    await r.close();
  }
});

test("AGENTS.md edited or removed between two turns: the next system prompt has the change", { timeout: 60_000 }, async () => {
  const r = await rig();
  try {
    const file = join(r.cwd, "AGENTS.md");
    writeFileSync(file, "Rule one: be brief.");
    await settled(file);
    await r.turn("t1");
    await r.turn("t2");
    writeFileSync(file, "Rule two: be clear."); // same size, in place
    await r.turn("t3");
    rmSync(file);
    await r.turn("t4");
    const rules = r.seen.map((s) => /Rule \w+: be \w+\./.exec(s.system)?.[0] ?? null);
    assert.deepEqual(rules, ["Rule one: be brief.", "Rule one: be brief.", "Rule two: be clear.", null]);
  } finally {
    await r.close();
  }
});

test("the model catalog file rewritten between two reads: the second read has the new models", async () => {
  const home = mkdtempSync(join(tmpdir(), "tc-cat-"));
  // A clock well past every file change here, so the first read is kept by the memo.
  const cache = new CatalogCache({ home, now: () => Date.now() + 3_600_000, ttlMs: 24 * 3_600_000 });
  const model = (id: string) => ({ model_id: id, label: id, context_window: 1000, max_output_tokens: 100, available_thinking_levels: [], disabled: false });
  await cache.write("p", "fp", [model("m-1")]);
  assert.deepEqual((await cache.read("p", "fp")).models.map((m) => m.model_id), ["m-1"]);
  assert.deepEqual((await cache.read("p", "fp")).models.map((m) => m.model_id), ["m-1"]);
  await cache.write("p", "fp", [model("m-2")]);
  assert.deepEqual((await cache.read("p", "fp")).models.map((m) => m.model_id), ["m-2"]);
  assert.equal((await cache.read("p", "other-fingerprint")).state, "unavailable");
  rmSync(home, { recursive: true, force: true });
});
