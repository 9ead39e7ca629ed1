/** Each provider against the fake: text, thinking/summaries, tool calls, usage, request encoding. */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import type { ProviderEvent } from "../../src/runtime/types.js";
import { startFakeProvider, type FakeProvider } from "../fakes/fake-provider.js";
import { APIS, collect, makeProvider, request, SECRET_KEY, terminal, terminalCount, textOf } from "./helpers.js";

const pick = <T extends ProviderEvent["type"]>(events: ProviderEvent[], type: T): Extract<ProviderEvent, { type: T }>[] =>
  events.filter((e): e is Extract<ProviderEvent, { type: T }> => e.type === type);

for (const api of APIS) {
  describe(`${api} streaming`, () => {
    let fake: FakeProvider;
    beforeEach(async () => {
      fake = await startFakeProvider();
    });
    afterEach(async () => {
      await fake.close();
    });

    it("streams text as deltas and ends with usage then done", async () => {
      fake.script([{ steps: [{ text: "Hello, streaming world!", chunks: 5 }], usage: { input: 12, output: 7 } }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      const deltas = pick(events, "text_delta");
      assert.equal(deltas.length, 5);
      assert.equal(textOf(events), "Hello, streaming world!");
      assert.equal(terminalCount(events), 1);
      assert.deepEqual(terminal(events), { type: "done", stopReason: "end" });
      const usage = pick(events, "usage")[0];
      assert.equal(usage?.inputTokens, 12);
      assert.equal(usage?.outputTokens, 7);
      assert.equal(events[events.length - 2]?.type, "usage");
    });

    it("sends the credential and extra headers to the right path", async () => {
      fake.script([{ steps: [{ text: "ok" }] }]);
      const { provider } = makeProvider(api, fake, { headers: { "x-extra": "1" } });
      await collect(provider.stream(request()));
      const rec = fake.requests[0];
      assert.ok(rec);
      assert.equal(rec.headers["x-extra"], "1");
      if (api === "anthropic") {
        assert.equal(rec.path, "/v1/messages");
        assert.equal(rec.headers["x-api-key"], SECRET_KEY);
        assert.equal(rec.headers["anthropic-version"], "2023-06-01");
        assert.equal(rec.headers["authorization"], undefined);
      } else {
        assert.equal(rec.path, api === "openai-chat" ? "/v1/chat/completions" : "/v1/responses");
        assert.equal(rec.headers["authorization"], `Bearer ${SECRET_KEY}`);
      }
    });

    it("bearer credential with account id", async () => {
      fake.script([{ steps: [{ text: "ok" }] }]);
      const { provider } = makeProvider(api, fake, {
        credentials: () => Promise.resolve({ kind: "bearer", value: "tok-SECRETMARKER", accountId: "acct-1" }),
      });
      await collect(provider.stream(request()));
      const h = fake.requests[0]?.headers;
      assert.equal(h?.["authorization"], "Bearer tok-SECRETMARKER");
      if (api === "anthropic") assert.equal(h?.["x-api-key"], undefined);
      else assert.equal(h?.["chatgpt-account-id"], "acct-1");
    });

    it("no-auth mode sends no credential header", async () => {
      fake.script([{ steps: [{ text: "ok" }] }]);
      const { provider } = makeProvider(api, fake, { credentials: () => Promise.resolve(null) });
      const events = await collect(provider.stream(request()));
      assert.equal(textOf(events), "ok");
      const h = fake.requests[0]?.headers;
      assert.equal(h?.["authorization"], undefined);
      assert.equal(h?.["x-api-key"], undefined);
    });

    it("a failing credential source is an in-band auth error", async () => {
      const { provider } = makeProvider(api, fake, { credentials: () => Promise.reject(new Error("SECRETMARKER")) });
      const events = await collect(provider.stream(request()));
      assert.equal(events.length, 1);
      assert.deepEqual(terminal(events), { type: "error", kind: "auth", retryable: false, message: "provider credential unavailable" });
      assert.equal(fake.requests.length, 0);
    });

    it("a custom provider's unset key variable is named in the auth error (its name, from settings)", async () => {
      const { provider } = makeProvider(api, fake, { credentials: () => Promise.reject(Object.assign(new Error("SECRETMARKER"), { missingEnv: "MY_PROVIDER_KEY" })) });
      const events = await collect(provider.stream(request()));
      assert.deepEqual(terminal(events), { type: "error", kind: "auth", retryable: false, message: "provider credential unavailable (MY_PROVIDER_KEY)" });
      assert.equal(fake.requests.length, 0);
    });

    it("thinking and reasoning summaries", async () => {
      fake.script([{ steps: [{ thinking: "Let me think.", chunks: 2, signature: "sig-abc" }, { text: "Answer." }] }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request({ thinking: "high" })));
      assert.equal(pick(events, "thinking_delta").map((e) => e.text).join(""), "Let me think.");
      assert.equal(textOf(events), "Answer.");
      const block = pick(events, "thinking_block");
      assert.equal(block.length, 1);
      assert.equal(block[0]?.text, "Let me think.");
      assert.equal(block[0]?.api, api);
      const summaries = pick(events, "reasoning_summary");
      if (api === "openai-chat") {
        assert.equal(summaries.length, 0, "unverified reasoning is never a summary");
        assert.equal(block[0]?.signature, undefined);
      } else {
        assert.deepEqual(summaries, [{ type: "reasoning_summary", text: "Let me think." }]);
        assert.equal(block[0]?.signature, "sig-abc");
      }
      // Summary/thinking precede the answer text.
      const iSummary = events.findIndex((e) => e.type === "thinking_block");
      const iText = events.findIndex((e) => e.type === "text_delta");
      assert.ok(iSummary < iText);
    });

    if (api === "anthropic") {
      it("an unsigned thinking block is not a verified summary", async () => {
        fake.script([{ steps: [{ thinking: "raw thoughts" }, { text: "A" }] }]);
        const { provider } = makeProvider(api, fake);
        const events = await collect(provider.stream(request()));
        assert.equal(pick(events, "reasoning_summary").length, 0);
        assert.deepEqual(pick(events, "thinking_block"), [{ type: "thinking_block", text: "raw thoughts", api: "anthropic" }]);
      });
    }

    it("tool calls accumulate arguments and are yielded before usage and done", async () => {
      fake.script([
        {
          steps: [
            { text: "Let me look." },
            { toolCall: { id: "call_a", name: "read", arguments: { path: "src/a.ts", lines: [1, 2, 3] }, chunks: 7 } },
            { toolCall: { id: "call_b", name: "bash", arguments: '{"command":"ls -la \\"x\\""}', chunks: 4 } },
          ],
        },
      ]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request({ tools: [{ name: "read", description: "r", inputSchema: { type: "object" } }] })));
      const calls = pick(events, "tool_call");
      assert.deepEqual(calls, [
        { type: "tool_call", id: "call_a", name: "read", arguments: { path: "src/a.ts", lines: [1, 2, 3] } },
        { type: "tool_call", id: "call_b", name: "bash", arguments: { command: 'ls -la "x"' } },
      ]);
      assert.deepEqual(terminal(events), { type: "done", stopReason: "tool_use" });
      const types = events.map((e) => e.type);
      assert.deepEqual(types.slice(-4), ["tool_call", "tool_call", "usage", "done"]);
    });

    it("a response stopped at max tokens runs no tool call", async () => {
      fake.script([{ steps: [{ text: "x" }, { toolCall: { name: "read", arguments: { path: "a" } } }], stopReason: "max_tokens" }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      assert.equal(pick(events, "tool_call").length, 0);
      assert.deepEqual(terminal(events), { type: "done", stopReason: "max_tokens" });
    });

    it("usage includes cache reads and reasoning tokens where the API reports them", async () => {
      fake.script([{ steps: [{ text: "ok" }], usage: { input: 100, output: 20, cacheRead: 40, reasoning: 5 } }]);
      const { provider } = makeProvider(api, fake);
      const events = await collect(provider.stream(request()));
      const u = pick(events, "usage")[0];
      if (api === "anthropic") {
        // Anthropic input_tokens excludes cache reads; inputTokens is the whole prompt.
        assert.deepEqual(u, { type: "usage", inputTokens: 140, outputTokens: 20, cacheReadTokens: 40, reasoningTokens: null });
      } else {
        assert.deepEqual(u, { type: "usage", inputTokens: 100, outputTokens: 20, cacheReadTokens: 40, reasoningTokens: 5 });
      }
    });

    it("encodes the full history, system prompt, tools, images, limits and thinking level", async () => {
      fake.script([{ steps: [{ text: "ok" }] }]);
      const { provider } = makeProvider(api, fake);
      await collect(
        provider.stream(
          request({
            system: "SYS",
            maxOutputTokens: 30000,
            thinking: "medium",
            tools: [{ name: "read", description: "Read a file", inputSchema: { type: "object", properties: { path: { type: "string" } } } }],
            messages: [
              { role: "user", content: [{ type: "text", text: "look" }, { type: "image", mediaType: "image/png", dataBase64: "iVBOR" }] },
              {
                role: "assistant",
                content: [
                  { type: "thinking", text: "hm", signature: "sig", api },
                  { type: "text", text: "reading" },
                  { type: "tool_call", id: "c1", name: "read", arguments: { path: "a" } },
                ],
              },
              { role: "tool", toolCallId: "c1", toolName: "read", content: "file body", isError: false },
              { role: "user", content: [{ type: "text", text: "thanks" }] },
            ],
          }),
        ),
      );
      const body = fake.requests[0]?.json as Record<string, unknown>;
      assert.equal(body["stream"], true);
      assert.equal(body["model"], "fake-model");
      if (api === "anthropic") {
        assert.equal(body["system"], "SYS");
        assert.equal(body["max_tokens"], 30000);
        assert.deepEqual(body["thinking"], { type: "enabled", budget_tokens: 8192 });
        assert.deepEqual(body["tools"], [{ name: "read", description: "Read a file", input_schema: { type: "object", properties: { path: { type: "string" } } } }]);
        assert.deepEqual(body["messages"], [
          { role: "user", content: [{ type: "text", text: "look" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBOR" } }] },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "hm", signature: "sig" },
              { type: "text", text: "reading" },
              { type: "tool_use", id: "c1", name: "read", input: { path: "a" } },
            ],
          },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "c1", content: "file body" }, { type: "text", text: "thanks" }] },
        ]);
      } else if (api === "openai-responses") {
        assert.equal(body["instructions"], "SYS");
        assert.equal(body["max_output_tokens"], 30000);
        assert.equal(body["store"], false);
        assert.deepEqual(body["reasoning"], { effort: "medium", summary: "auto" });
        assert.deepEqual(body["tools"], [{ type: "function", name: "read", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } }, strict: false }]);
        assert.deepEqual(body["input"], [
          { role: "user", content: [{ type: "input_text", text: "look" }, { type: "input_image", image_url: "data:image/png;base64,iVBOR" }] },
          { type: "reasoning", summary: [{ type: "summary_text", text: "hm" }], encrypted_content: "sig" },
          { role: "assistant", content: "reading" },
          { type: "function_call", call_id: "c1", name: "read", arguments: '{"path":"a"}' },
          { type: "function_call_output", call_id: "c1", output: "file body" },
          { role: "user", content: [{ type: "input_text", text: "thanks" }] },
        ]);
      } else {
        assert.equal(body["max_tokens"], 30000);
        assert.deepEqual(body["stream_options"], { include_usage: true });
        assert.equal(body["reasoning_effort"], "medium");
        assert.deepEqual(body["messages"], [
          { role: "system", content: "SYS" },
          { role: "user", content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "data:image/png;base64,iVBOR" } }] },
          { role: "assistant", content: "reading", tool_calls: [{ id: "c1", type: "function", function: { name: "read", arguments: '{"path":"a"}' } }] },
          { role: "tool", tool_call_id: "c1", content: "file body" },
          { role: "user", content: "thanks" },
        ]);
      }
    });
  });
}

describe("thinking replay across providers", () => {
  it("foreign thinking blocks are not replayed", async () => {
    const fake = await startFakeProvider();
    try {
      for (const api of ["anthropic", "openai-responses"] as const) {
        fake.script([{ steps: [{ text: "ok" }] }]);
        const other = api === "anthropic" ? "openai-responses" : "anthropic";
        const { provider } = makeProvider(api, fake);
        await collect(
          provider.stream(
            request({
              messages: [
                { role: "user", content: [{ type: "text", text: "q" }] },
                { role: "assistant", content: [{ type: "thinking", text: "t", signature: "foreign", api: other }, { type: "text", text: "a" }] },
                { role: "user", content: [{ type: "text", text: "q2" }] },
              ],
            }),
          ),
        );
      }
      assert.ok(!fake.requests[0]?.body.includes("foreign"));
      assert.ok(!fake.requests[1]?.body.includes("foreign"));
    } finally {
      await fake.close();
    }
  });
});
