/**
 * Tool definitions encoded once per tool (src/runtime/providers/tool-json.ts): the Chat Completions request body built
 * with cached tool encodings is the same JSON as `encodeChatBody`, request after request, and a different spec object
 * (a registry rebuilt with another schema) is encoded afresh.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { estimateTokens } from "../../src/runtime/context.js";
import { buildChatRequest, encodeChatBody } from "../../src/runtime/providers/openai-chat.js";
import type { ProviderRequest, ToolSpec } from "../../src/runtime/types.js";

const spec = (name: string, props: Record<string, unknown>): ToolSpec => ({ name, description: `the ${name} tool`, inputSchema: { type: "object", properties: props } });

function request(tools: ToolSpec[], extra: Partial<ProviderRequest> = {}): ProviderRequest {
  return {
    model: "m",
    system: "sys",
    messages: [{ role: "user", content: [{ type: "text", text: "hi \u2028 \"quoted\"" }] }],
    tools,
    signal: new AbortController().signal,
    ...extra,
  };
}

test("the request body equals encodeChatBody's JSON, with and without tools, on every request", () => {
  const tools = [spec("read", { path: { type: "string" } }), spec("bash", { command: { type: "string" } })];
  for (const req of [request([]), request(tools), request(tools, { maxOutputTokens: 99, thinking: "high", fast: true }), request(tools)]) {
    const w = buildChatRequest("http://127.0.0.1:1/v1", req, null);
    assert.deepEqual(JSON.parse(w.body), JSON.parse(JSON.stringify(encodeChatBody(req))));
  }
});

test("another spec object with the same name is encoded from its own schema", () => {
  const a = spec("read", { path: { type: "string" } });
  const b = spec("read", { path: { type: "string" }, limit: { type: "number" } });
  const first = JSON.parse(buildChatRequest("http://h/v1", request([a]), null).body) as { tools: Array<{ function: { parameters: unknown } }> };
  const second = JSON.parse(buildChatRequest("http://h/v1", request([b]), null).body) as { tools: Array<{ function: { parameters: unknown } }> };
  assert.deepEqual(first.tools[0]!.function.parameters, a.inputSchema);
  assert.deepEqual(second.tools[0]!.function.parameters, b.inputSchema);
  assert.ok(estimateTokens("", [], [b]) > estimateTokens("", [], [a]));
});

test("specs built again around one frozen schema share its encoding but keep their own name and description", () => {
  const schema = Object.freeze({ type: "object", properties: Object.freeze({ q: Object.freeze({ type: "string" }) }) });
  const a: ToolSpec = { name: "ask", description: "first", inputSchema: schema };
  const b: ToolSpec = { name: "ask", description: "second", inputSchema: schema };
  const c: ToolSpec = { name: "ask", description: "first", inputSchema: schema };
  const tools = (t: ToolSpec) => (JSON.parse(buildChatRequest("http://h/v1", request([t]), null).body) as { tools: Array<{ function: { description: string; parameters: unknown } }> }).tools[0]!.function;
  assert.equal(tools(a).description, "first");
  assert.equal(tools(b).description, "second");
  assert.deepEqual(tools(c), { name: "ask", description: "first", parameters: { type: "object", properties: { q: { type: "string" } } } });
  assert.equal(estimateTokens("", [], [a]), estimateTokens("", [], [c]));
});
