/** Model discovery against the fake, and the fake's standalone mode. */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, it } from "node:test";
import { createProvider, resolveBaseUrl } from "../../src/runtime/providers/index.js";
import { discoverModels, DiscoveryError } from "../../src/runtime/auth/discovery.js";
import { customCredentialSource } from "../../src/runtime/auth/credentials.js";
import { ERROR_BODY_SECRET, startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { apiKey, baseFor, collect, request, SECRET_KEY, textOf } from "./helpers.js";

describe("discoverModels (the one model discovery)", () => {
  let fake: FakeProvider;
  beforeEach(async () => {
    fake = await startFakeProvider();
  });
  afterEach(async () => {
    await fake.close();
  });
  const key = { kind: "api_key" as const, value: SECRET_KEY };

  it("Anthropic: paginates /v1/models with after_id, labels from display_name", async () => {
    fake.setModels(
      [
        { id: "claude-a", display_name: "Claude A", max_input_tokens: 200000, max_tokens: 64000 },
        { id: "claude-b", display_name: "Claude B" },
        { id: "claude-c" },
      ],
      { pageSize: 2 },
    );
    const models = await discoverModels({ api: "anthropic", baseUrl: fake.baseUrl, credential: key, timeoutMs: 10_000 });
    assert.deepEqual(models, [
      { id: "claude-a", label: "Claude A", context_window: 200000, max_output_tokens: 64000 },
      { id: "claude-b", label: "Claude B" },
      { id: "claude-c" },
    ]);
    assert.equal(fake.requests.length, 2);
    assert.equal(fake.requests[0]?.path, "/v1/models?limit=1000");
    assert.equal(fake.requests[1]?.path, "/v1/models?limit=1000&after_id=claude-b");
    assert.equal(fake.requests[0]?.headers["x-api-key"], SECRET_KEY);
  });

  it("OpenAI: GET {base}/models with bearer auth", async () => {
    fake.setModels([{ id: "gpt-x" }, { id: "gpt-y", context_window: 400000, max_output_tokens: 128000 }]);
    const models = await discoverModels({ api: "openai", baseUrl: `${fake.baseUrl}/v1`, credential: key, timeoutMs: 10_000 });
    assert.deepEqual(models, [{ id: "gpt-x" }, { id: "gpt-y", context_window: 400000, max_output_tokens: 128000 }]);
    assert.equal(fake.requests[0]?.path, "/v1/models");
    assert.equal(fake.requests[0]?.headers["authorization"], `Bearer ${SECRET_KEY}`);
  });

  it("OpenAI-compatible: {base_url}/models, context fields of several servers, invalid and repeated entries dropped", async () => {
    fake.setModels([
      { id: "llama3", context_length: 8192 },
      { id: "qwen", max_model_len: 32768 },
      { id: "" },
      { name: "no-id" },
      { id: "neg", context_length: -5, max_tokens: 1.5 },
      { id: "llama3" },
    ]);
    const models = await discoverModels({ api: "openai", baseUrl: `${fake.baseUrl}/v1/`, credential: null, timeoutMs: 10_000 });
    assert.deepEqual(models, [{ id: "llama3", context_window: 8192 }, { id: "qwen", context_window: 32768 }, { id: "neg" }]);
    assert.equal(fake.requests[0]?.headers["authorization"], undefined);
  });

  it("HTTP errors reject with a fixed reason and no body", async () => {
    fake.setModels([], { status: 500 });
    await assert.rejects(
      discoverModels({ api: "openai", baseUrl: fake.baseUrl, credential: key, timeoutMs: 10_000 }),
      (e: unknown) => e instanceof DiscoveryError && e.reason === "http" && !e.message.includes(ERROR_BODY_SECRET),
    );
  });

  it("bounded read: a page over the bound is too_large", async () => {
    fake.setModels(Array.from({ length: 200 }, (_, i) => ({ id: `m-${i}`, padding: "x".repeat(100) })));
    await assert.rejects(
      discoverModels({ api: "openai", baseUrl: fake.baseUrl, credential: key, timeoutMs: 10_000, maxBytes: 4096 }),
      (e: unknown) => e instanceof DiscoveryError && e.reason === "too_large",
    );
  });
});

describe("resolution helpers", () => {
  it("base URLs: configured, then env override, then default", () => {
    assert.equal(resolveBaseUrl("anthropic", undefined, {}), "https://api.anthropic.com");
    assert.equal(resolveBaseUrl("anthropic", undefined, { ANTHROPIC_BASE_URL: "http://127.0.0.1:9/" }), "http://127.0.0.1:9");
    assert.equal(resolveBaseUrl("openai-responses", undefined, {}), "https://api.openai.com/v1");
    assert.equal(resolveBaseUrl("openai-responses", undefined, { OPENAI_BASE_URL: "http://127.0.0.1:9/v1" }), "http://127.0.0.1:9/v1");
    assert.equal(resolveBaseUrl("openai-chat", "http://127.0.0.1:11434/v1", { OPENAI_BASE_URL: "x" }), "http://127.0.0.1:11434/v1");
    assert.throws(() => resolveBaseUrl("openai-chat", undefined, {}));
  });

  it("settings providers read the API key env var per request; missing key is an auth error naming the variable", async () => {
    const env: Record<string, string | undefined> = {};
    const fake = await startFakeProvider();
    try {
      const def = { api: "openai-chat" as const, base_url: `${fake.baseUrl}/v1`, api_key_env: "MY_KEY", models: [] };
      const provider = createProvider("local", { api: def.api, baseUrl: def.base_url }, customCredentialSource(def, env), { env: {} });
      const first = await collect(provider.stream(request()));
      assert.deepEqual(first, [{ type: "error", kind: "auth", retryable: false, message: "provider credential unavailable (MY_KEY)" }], "the unset variable is named");
      env["MY_KEY"] = "sk-test-SECRETMARKER-env";
      fake.script([{ steps: [{ text: "ok" }] }]);
      const second = await collect(provider.stream(request()));
      assert.equal(textOf(second), "ok");
      assert.equal(fake.requests[0]?.headers["authorization"], "Bearer sk-test-SECRETMARKER-env");
    } finally {
      await fake.close();
    }
  });
});

describe("fake provider standalone process", () => {
  it("prints its port, serves a scripted turn from FAKE_PROVIDER_SCRIPT, then the echo default", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fake-provider-"));
    const scriptPath = join(dir, "script.json");
    writeFileSync(scriptPath, JSON.stringify([{ steps: [{ text: "scripted answer", chunks: 3 }] }]));
    const entry = fileURLToPath(new URL("../fakes/fake-provider.js", import.meta.url));
    const child = spawn(process.execPath, [entry], { env: { ...process.env, FAKE_PROVIDER_SCRIPT: scriptPath }, stdio: ["ignore", "pipe", "inherit"] });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        const rl = createInterface({ input: child.stdout });
        rl.once("line", (l) => {
          rl.close();
          resolve(l);
        });
        child.once("exit", () => reject(new Error("fake exited")));
      });
      const { port } = JSON.parse(line) as { port: number };
      const fakeLike = { baseUrl: `http://127.0.0.1:${port}` } as FakeProvider;
      const provider = createProvider("p", { api: "openai-chat", baseUrl: baseFor("openai-chat", fakeLike) }, apiKey);
      assert.equal(textOf(await collect(provider.stream(request()))), "scripted answer");
      const anthropic = createProvider("a", { api: "anthropic", baseUrl: fakeLike.baseUrl }, apiKey);
      assert.equal(textOf(await collect(anthropic.stream(request()))), "echo: hello");
      const long = await collect(anthropic.stream(request({ messages: [{ role: "user", content: [{ type: "text", text: "long answer 1000" }] }] })));
      assert.equal(long.filter((e) => e.type === "text_delta").length, 1000);
      const models = await discoverModels({ api: "openai", baseUrl: fakeLike.baseUrl, credential: null, timeoutMs: 10_000 });
      assert.equal(models[0]?.id, "fake-model");
    } finally {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
