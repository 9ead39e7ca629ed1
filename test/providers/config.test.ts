/** Retry arithmetic and endpoint configuration. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { backoffDelay, DEFAULT_RETRY, parseRetryAfter } from "../../src/runtime/providers/driver.js";
import { createProvider } from "../../src/runtime/providers/index.js";
import { startFakeProvider } from "../fakes/fake-provider.js";
import { collect, request, textOf } from "./helpers.js";

describe("retry delays", () => {
  const now = Date.parse("2025-01-01T00:00:00Z");
  it("parses retry-after-ms, seconds and HTTP dates", () => {
    assert.equal(parseRetryAfter(new Headers({ "retry-after-ms": "1500" }), now), 1500);
    assert.equal(parseRetryAfter(new Headers({ "retry-after": "2" }), now), 2000);
    assert.equal(parseRetryAfter(new Headers({ "retry-after": "Wed, 01 Jan 2025 00:00:03 GMT" }), now), 3000);
    assert.equal(parseRetryAfter(new Headers({ "retry-after": "soon" }), now), undefined);
    assert.equal(parseRetryAfter(new Headers(), now), undefined);
  });
  it("exponential backoff capped; Retry-After clamped", () => {
    assert.deepEqual([1, 2, 3, 4, 5, 6].map((a) => backoffDelay(DEFAULT_RETRY, a, undefined)), [250, 500, 1000, 2000, 4000, 4000]);
    assert.equal(backoffDelay(DEFAULT_RETRY, 1, 60_000), 10_000);
    assert.equal(backoffDelay(DEFAULT_RETRY, 1, 0), 0);
  });
});

describe("endpoint configuration", () => {
  it("a Responses provider with a full endpoint override (codex shape)", async () => {
    const fake = await startFakeProvider();
    try {
      fake.script([{ steps: [{ text: "codex ok" }] }]);
      const provider = createProvider(
        "openai-codex",
        { api: "openai-responses", endpoint: `${fake.baseUrl}/backend-api/codex/responses`, headers: { originator: "berth" } },
        () => Promise.resolve({ kind: "bearer", value: "oauth-SECRETMARKER", accountId: "acct-9" }),
        { env: {} },
      );
      assert.equal(textOf(await collect(provider.stream(request()))), "codex ok");
      const rec = fake.requests[0];
      assert.equal(rec?.path, "/backend-api/codex/responses");
      assert.equal(rec?.headers["chatgpt-account-id"], "acct-9");
      assert.equal(rec?.headers["originator"], "berth");
    } finally {
      await fake.close();
    }
  });
  it("OPENAI_BASE_URL / ANTHROPIC_BASE_URL apply when no base URL is configured", async () => {
    const fake = await startFakeProvider();
    try {
      fake.script([{ steps: [{ text: "a" }] }, { steps: [{ text: "b" }] }]);
      const env = { OPENAI_BASE_URL: `${fake.baseUrl}/v1`, ANTHROPIC_BASE_URL: fake.baseUrl };
      const none = (): Promise<null> => Promise.resolve(null);
      const o = createProvider("openai", { api: "openai-responses" }, none, { env });
      const a = createProvider("anthropic", { api: "anthropic" }, none, { env });
      assert.equal(textOf(await collect(o.stream(request()))), "a");
      assert.equal(textOf(await collect(a.stream(request()))), "b");
      assert.deepEqual(fake.requests.map((r) => r.path), ["/v1/responses", "/v1/messages"]);
    } finally {
      await fake.close();
    }
  });
});
