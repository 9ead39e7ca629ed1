/**
 * An agent reuses the provider it built for a turn while nothing it was built from changed (agent.ts `built`). What
 * a client can observe: every turn's request still goes where the settings, the environment and the session's
 * selection say at that turn — a base URL, model or key edited between two turns is used by the next one.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "../../src/runtime/agent.js";
import { chatSse } from "../helpers/chat-sse.js";
import { bareTurns } from "../helpers/bare-turn.js";
import { settled } from "../helpers/settled.js";

interface Seen {
  server: "a" | "b";
  model: string;
  auth: string | null;
}

async function listen(name: "a" | "b", seen: Seen[]): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => (body += d));
    req.on("end", () => {
      const json = JSON.parse(body) as { model: string };
      seen.push({ server: name, model: json.model, auth: req.headers.authorization ?? null });
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(chatSse("ok"));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

async function rig() {
  const home = mkdtempSync(join(tmpdir(), "pr-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "pr-cwd-"));
  const seen: Seen[] = [];
  const a = await listen("a", seen);
  const b = await listen("b", seen);
  const file = join(home, "settings.json");
  const write = (baseUrl: string, keyEnv = "FAKE_KEY"): void =>
    writeFileSync(
      file,
      JSON.stringify({
        provider: "fake",
        model: "model-a",
        providers: { fake: { api: "openai-chat", base_url: baseUrl, api_key_env: keyEnv, models: [{ id: "model-a" }, { id: "model-b" }] } },
      }),
    );
  write(a.url);
  const env: Record<string, string | undefined> = { PATH: process.env["PATH"], MC_HOME: home, FAKE_KEY: "key-1", OTHER_KEY: "key-9" };
  const agent = new Agent({ home, cwd, env });
  const turn = bareTurns(agent, cwd);
  return {
    a: a.url,
    b: b.url,
    file,
    env,
    seen,
    write,
    turn,
    close: async () => {
      await agent.close();
      await Promise.all([a, b].map(({ server }) => new Promise<void>((r) => server.close(() => r()))));
      rmSync(home, { recursive: true, force: true });
      rmSync(cwd, { recursive: true, force: true });
    },
  };
}

test("settings.json's base_url edited between two turns: the next request goes to the new URL", { timeout: 60_000 }, async () => {
  const r = await rig();
  try {
    await settled(r.file);
    await r.turn("t1");
    await r.turn("t2");
    r.write(r.b);
    await r.turn("t3");
    await settled(r.file);
    await r.turn("t4");
    r.write(r.a);
    await r.turn("t5");
    assert.deepEqual(r.seen.map((s) => s.server), ["a", "a", "b", "b", "a"]);
  } finally {
    await r.close();
  }
});

test("a session's model or base URL changed between turns (/model): each turn's request follows it", { timeout: 60_000 }, async () => {
  const r = await rig();
  try {
    await settled(r.file);
    await r.turn("t1");
    await r.turn("t2", { model: "model-b" });
    await r.turn("t3", { baseUrl: r.b });
    await r.turn("t4", { model: "model-b", baseUrl: r.b });
    await r.turn("t5");
    assert.deepEqual(
      r.seen.map((s) => `${s.server}:${s.model}`),
      ["a:model-a", "a:model-b", "b:model-a", "b:model-b", "a:model-a"],
    );
  } finally {
    await r.close();
  }
});

test("the provider's key changed between turns (environment or api_key_env): the next request carries the new key", { timeout: 60_000 }, async () => {
  const r = await rig();
  try {
    await settled(r.file);
    await r.turn("t1");
    r.env["FAKE_KEY"] = "key-2";
    await r.turn("t2");
    r.write(r.a, "OTHER_KEY");
    await r.turn("t3");
    assert.deepEqual(r.seen.map((s) => s.auth), ["Bearer key-1", "Bearer key-2", "Bearer key-9"]);
  } finally {
    await r.close();
  }
});
