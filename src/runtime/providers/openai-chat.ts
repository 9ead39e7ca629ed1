/**
 * OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`, `stream: true`,
 * `stream_options.include_usage`) for Ollama, vLLM, LM Studio and any compatible base URL.
 *
 * Output rules (see docs/providers.md):
 * - `delta.content` → `text_delta`; `delta.reasoning_content` / `delta.reasoning` → `thinking_delta`;
 *   the collected reasoning yields one unsigned `thinking_block` when the answer (text or tool call)
 *   starts, or at the end; never a `reasoning_summary` (nothing verifies its provenance);
 * - tool calls accumulate by `index` and are held until the stream completes (`[DONE]`, or a clean
 *   end after a `finish_reason`); `finish_reason: "length"` yields none.
 */
import type { Message, ProviderEvent, ProviderRequest, ThinkingLevel, ToolSpec } from "../types.js";
import {
  isObject,
  optCount,
  optObject,
  optString,
  parseEventObject,
  ResponseBudget,
  TextParts,
  type JsonObject,
  type ProviderBounds,
  type ToolArgs,
} from "./accumulate.js";
import type { Credential, WireDecoder, WireRequest } from "./driver.js";
import { errorCategory, LABELS, protocolFailure, ProviderFailure, withCategory } from "./errors.js";
import { openaiHeaders } from "./make.js";
import { stringifyWithTools } from "./tool-json.js";

export const CHAT_REASONING_EFFORT: Record<Exclude<ThinkingLevel, "default">, string> = {
  low: "low",
  medium: "medium",
  high: "high",
  x_high: "high",
  max: "high",
};

export function encodeChatMessages(system: string, messages: Message[]): JsonObject[] {
  const out: JsonObject[] = [];
  if (system.length > 0) out.push({ role: "system", content: system });
  for (const m of messages) {
    if (m.role === "user") {
      const images = m.content.some((c) => c.type === "image");
      if (!images) {
        out.push({ role: "user", content: m.content.map((c) => (c.type === "text" ? c.text : "")).join("") });
      } else {
        out.push({
          role: "user",
          content: m.content.map((c) =>
            c.type === "text"
              ? { type: "text", text: c.text }
              : { type: "image_url", image_url: { url: `data:${c.mediaType};base64,${c.dataBase64}` } },
          ),
        });
      }
    } else if (m.role === "assistant") {
      const text = m.content.map((b) => (b.type === "text" ? b.text : "")).join("");
      const calls = m.content.flatMap((b) =>
        b.type === "tool_call"
          ? [{ id: b.id, type: "function", function: { name: b.name, arguments: JSON.stringify(b.arguments) } }]
          : [],
      );
      if (text.length === 0 && calls.length === 0) continue;
      const msg: JsonObject = { role: "assistant", content: text.length > 0 ? text : null };
      if (calls.length > 0) msg["tool_calls"] = calls;
      out.push(msg);
    } else {
      out.push({ role: "tool", tool_call_id: m.toolCallId, content: m.content });
    }
  }
  return out;
}

const chatTool = (t: ToolSpec): JsonObject => ({
  type: "function",
  function: { name: t.name, description: t.description, parameters: t.inputSchema },
});

/** The request body without its tools (see `encodeChatBody`). */
function chatBodyHead(req: ProviderRequest): JsonObject {
  const body: JsonObject = {
    model: req.model,
    messages: encodeChatMessages(req.system, req.messages),
    stream: true,
    stream_options: { include_usage: true },
  };
  if (req.maxOutputTokens !== undefined) body["max_tokens"] = req.maxOutputTokens;
  const level = req.thinking ?? "default";
  if (level !== "default") body["reasoning_effort"] = CHAT_REASONING_EFFORT[level];
  if (req.fast === true) body["service_tier"] = "priority";
  return body;
}

export function encodeChatBody(req: ProviderRequest): JsonObject {
  const body = chatBodyHead(req);
  if (req.tools.length > 0) body["tools"] = req.tools.map(chatTool);
  return body;
}

export function buildChatRequest(
  baseUrl: string,
  req: ProviderRequest,
  cred: Credential,
  extraHeaders?: Record<string, string>,
): WireRequest {
  return {
    url: `${baseUrl.replace(/\/+$/, "")}/chat/completions`,
    headers: openaiHeaders(cred, extraHeaders),
    // The same JSON as `encodeChatBody`, each tool's definition encoded once per tool (tool-json.ts).
    body: stringifyWithTools(chatBodyHead(req), req.tools, "openai-chat", chatTool),
  };
}

interface ChatCall { id: string; name: string; args: ToolArgs }

export class ChatDecoder implements WireDecoder {
  finished = false;
  private readonly budget: ResponseBudget;
  private readonly calls: ChatCall[] = [];
  private thinking = new TextParts();
  private hasThinking = false;
  private finishReason: string | undefined;
  private usage: JsonObject | undefined;

  constructor(bounds: ProviderBounds) {
    this.budget = new ResponseBudget(bounds);
  }

  onEvent(_event: string | undefined, data: string, out: ProviderEvent[]): void {
    if (this.finished) return;
    if (data === "[DONE]") return this.finish(out);
    const o = parseEventObject(data);
    if (o["error"] !== undefined && o["error"] !== null) throw new ProviderFailure("http", withCategory(LABELS.providerError, errorCategory(o)), false);
    const usage = optObject(o, "usage");
    if (usage !== undefined) this.usage = usage;
    const choices = o["choices"];
    if (choices === undefined || choices === null) return;
    if (!Array.isArray(choices)) throw protocolFailure();
    for (const choice of choices as unknown[]) {
      if (!isObject(choice)) throw protocolFailure();
      if ((choice["index"] ?? 0) !== 0) continue; // n = 1: other choices are never requested
      const delta = optObject(choice, "delta");
      if (delta !== undefined) this.delta(delta, out);
      const fr = optString(choice, "finish_reason");
      if (fr !== undefined) this.finishReason = fr;
    }
  }

  onEnd(out: ProviderEvent[]): void {
    // Some servers close without `[DONE]`; a finish_reason means the answer is complete.
    if (this.finishReason === undefined) throw new ProviderFailure("network", LABELS.disconnect, true);
    this.finish(out);
  }

  private delta(d: JsonObject, out: ProviderEvent[]): void {
    const text = optString(d, "content");
    if (text !== undefined && text.length > 0) {
      if (this.hasThinking) this.flushThinking(out);
      this.budget.addText(text);
      out.push({ type: "text_delta", text });
    }
    const reasoning = optString(d, "reasoning_content") ?? optString(d, "reasoning");
    if (reasoning !== undefined && reasoning.length > 0) {
      this.thinking.add(reasoning);
      this.hasThinking = true;
      out.push({ type: "thinking_delta", text: reasoning });
    }
    const tcs = d["tool_calls"];
    if (tcs === undefined || tcs === null) return;
    if (!Array.isArray(tcs)) throw protocolFailure();
    if (this.hasThinking) this.flushThinking(out);
    for (const tc of tcs as unknown[]) {
      if (!isObject(tc)) throw protocolFailure();
      const index = tc["index"] ?? this.calls.length;
      if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index > this.calls.length) {
        throw protocolFailure();
      }
      let call = this.calls[index];
      if (call === undefined) {
        this.budget.addToolCall();
        call = { id: "", name: "", args: this.budget.newArgs() };
        this.calls.push(call);
      }
      const id = optString(tc, "id");
      if (id !== undefined && id.length > 0) call.id = id;
      const fn = optObject(tc, "function");
      if (fn !== undefined) {
        const name = optString(fn, "name");
        if (name !== undefined) call.name += name;
        const args = optString(fn, "arguments");
        if (args !== undefined) call.args.add(args);
      }
    }
  }

  private flushThinking(out: ProviderEvent[]): void {
    out.push({ type: "thinking_block", text: this.thinking.text(), api: "openai-chat" });
    this.thinking = new TextParts();
    this.hasThinking = false;
  }

  private finish(out: ProviderEvent[]): void {
    if (this.hasThinking) this.flushThinking(out);
    const truncated = this.finishReason === "length";
    if (!truncated) {
      const parsed = this.calls.map((c, i) => {
        if (c.name.length === 0) throw protocolFailure();
        return { id: c.id.length > 0 ? c.id : `call_${i}`, name: c.name, args: c.args.parse() };
      });
      for (const c of parsed) out.push({ type: "tool_call", id: c.id, name: c.name, arguments: c.args });
    }
    const u = this.usage;
    if (u !== undefined) {
      out.push({
        type: "usage",
        inputTokens: optCount(u, "prompt_tokens") ?? 0,
        outputTokens: optCount(u, "completion_tokens") ?? 0,
        cacheReadTokens: optCount(optObject(u, "prompt_tokens_details"), "cached_tokens") ?? null,
        reasoningTokens: optCount(optObject(u, "completion_tokens_details"), "reasoning_tokens") ?? null,
      });
    }
    const stop = truncated ? "max_tokens" : this.calls.length > 0 ? "tool_use" : "end";
    out.push({ type: "done", stopReason: stop });
    this.finished = true;
  }
}
