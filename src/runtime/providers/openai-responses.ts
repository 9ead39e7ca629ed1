/**
 * OpenAI Responses API (`POST {base}/responses`, `stream: true`, `store: false`); also the wire of
 * `openai-codex` (bearer credential + `chatgpt-account-id`, endpoint and extra headers configurable).
 *
 * Output rules (see docs/providers.md):
 * - `response.output_text.delta` → `text_delta`; `response.reasoning_summary_text.delta` → `thinking_delta`;
 * - each reasoning summary part yields one `reasoning_summary` on `response.reasoning_summary_text.done`
 *   or `response.reasoning_summary_part.done`, whichever comes first (deduplicated per item/part);
 * - a finished reasoning item yields `thinking_block` (summary text; `encrypted_content` as signature);
 * - function calls are held until `response.completed` and yielded before `usage` and `done`;
 *   `response.incomplete` (max output tokens) yields none.
 */
import type { AssistantBlock, Message, ProviderEvent, ProviderRequest, ThinkingLevel } from "../types.js";
import {
  optCount,
  optObject,
  optString,
  parseEventObject,
  reqString,
  ResponseBudget,
  type JsonObject,
  type ProviderBounds,
  type ToolArgs,
} from "./accumulate.js";
import type { Credential, WireDecoder, WireRequest } from "./driver.js";
import { LABELS, protocolFailure, ProviderFailure, streamErrorFailure, type StreamErrorCodes } from "./errors.js";

import { openaiHeaders } from "./make.js";

export { OPENAI_DEFAULT_BASE_URL, openaiHeaders } from "./make.js";

export const OPENAI_REASONING_EFFORT: Record<Exclude<ThinkingLevel, "default">, string> = {
  low: "low",
  medium: "medium",
  high: "high",
  x_high: "xhigh",
  max: "xhigh",
};

function encodeAssistant(b: AssistantBlock, items: JsonObject[]): void {
  if (b.type === "text") {
    if (b.text.length > 0) items.push({ role: "assistant", content: b.text });
  } else if (b.type === "tool_call") {
    items.push({ type: "function_call", call_id: b.id, name: b.name, arguments: JSON.stringify(b.arguments) });
  } else if (b.api === "openai-responses" && b.signature) {
    items.push({
      type: "reasoning",
      summary: b.text.length > 0 ? [{ type: "summary_text", text: b.text }] : [],
      encrypted_content: b.signature,
    });
  }
}

export function encodeResponsesInput(messages: Message[]): JsonObject[] {
  const items: JsonObject[] = [];
  for (const m of messages) {
    if (m.role === "user") {
      const content = m.content.map((c) =>
        c.type === "text"
          ? { type: "input_text", text: c.text }
          : { type: "input_image", image_url: `data:${c.mediaType};base64,${c.dataBase64}` },
      );
      if (content.length > 0) items.push({ role: "user", content });
    } else if (m.role === "assistant") {
      for (const b of m.content) encodeAssistant(b, items);
    } else {
      items.push({ type: "function_call_output", call_id: m.toolCallId, output: m.content });
    }
  }
  return items;
}

export function encodeResponsesBody(req: ProviderRequest): JsonObject {
  const body: JsonObject = {
    model: req.model,
    input: encodeResponsesInput(req.messages),
    stream: true,
    store: false,
  };
  if (req.system.length > 0) body["instructions"] = req.system;
  if (req.tools.length > 0) {
    body["tools"] = req.tools.map((t) => ({
      type: "function",
      name: t.name,
      description: t.description,
      parameters: t.inputSchema,
      strict: false,
    }));
  }
  if (req.maxOutputTokens !== undefined) body["max_output_tokens"] = req.maxOutputTokens;
  const level = req.thinking ?? "default";
  if (level !== "default") {
    body["reasoning"] = { effort: OPENAI_REASONING_EFFORT[level], summary: "auto" };
    body["include"] = ["reasoning.encrypted_content"];
  }
  if (req.fast === true) body["service_tier"] = "priority";
  return body;
}

export function buildResponsesRequest(
  endpoint: string,
  req: ProviderRequest,
  cred: Credential,
  extraHeaders?: Record<string, string>,
): WireRequest {
  return { url: endpoint, headers: openaiHeaders(cred, extraHeaders), body: JSON.stringify(encodeResponsesBody(req)) };
}

/** Responses' in-stream error codes that are retried (an overload, a rate limit). */
const STREAM_ERRORS: StreamErrorCodes = {
  overloaded: new Set(["server_error", "server_is_overloaded", "slow_down"]),
  rateLimited: new Set(["rate_limit_exceeded"]),
};

interface CallState { callId: string; name: string; args: ToolArgs }
interface ReasoningState { parts: Map<number, string> }

export class ResponsesDecoder implements WireDecoder {
  finished = false;
  private readonly budget: ResponseBudget;
  private readonly calls = new Map<string, CallState>();
  private readonly reasoning = new Map<string, ReasoningState>();

  constructor(bounds: ProviderBounds) {
    this.budget = new ResponseBudget(bounds);
  }

  onEvent(_event: string | undefined, data: string, out: ProviderEvent[]): void {
    if (this.finished) return;
    const o = parseEventObject(data);
    switch (o["type"]) {
      case "response.output_text.delta": {
        const text = reqString(o, "delta");
        this.budget.addText(text);
        if (text.length > 0) out.push({ type: "text_delta", text });
        return;
      }
      case "response.function_call_arguments.delta":
        return this.call(o).args.add(reqString(o, "delta"));
      case "response.function_call_arguments.done":
        return this.call(o).args.replace(reqString(o, "arguments"));
      case "response.reasoning_summary_text.delta": {
        const text = reqString(o, "delta");
        if (text.length > 0) out.push({ type: "thinking_delta", text });
        return;
      }
      case "response.reasoning_summary_text.done":
        return this.summary(o, reqString(o, "text"), out);
      case "response.reasoning_summary_part.done": {
        const part = optObject(o, "part");
        if (part === undefined) throw protocolFailure();
        return this.summary(o, reqString(part, "text"), out);
      }
      case "response.output_item.added":
        return this.itemAdded(o);
      case "response.output_item.done":
        return this.itemDone(o, out);
      case "response.completed":
        return this.finish(o, "end", out);
      case "response.incomplete": {
        const resp = optObject(o, "response");
        const details = resp === undefined ? undefined : optObject(resp, "incomplete_details");
        const reason = details === undefined ? undefined : details["reason"];
        return this.finish(o, reason === "max_output_tokens" ? "max_tokens" : "end", out);
      }
      case "response.failed": {
        // `{"response":{"error":{"code","message"}}}`: the response holds the error as an HTTP error body would.
        const resp = optObject(o, "response");
        const err = resp === undefined ? undefined : optObject(resp, "error");
        throw streamErrorFailure(resp, err === undefined ? undefined : err["code"], STREAM_ERRORS);
      }
      case "error":
        // The documented `{"code","message"}` at the top, or a compatible server's `{"error":{…}}`.
        throw streamErrorFailure(o, o["code"] ?? (optObject(o, "error") ?? {})["code"], STREAM_ERRORS);
      default:
        return; // lifecycle and unknown events are tolerated
    }
  }

  onEnd(): void {
    throw new ProviderFailure("network", LABELS.disconnect, true);
  }

  private call(o: JsonObject): CallState {
    const c = this.calls.get(reqString(o, "item_id"));
    if (c === undefined) throw protocolFailure();
    return c;
  }

  private itemAdded(o: JsonObject): void {
    const item = optObject(o, "item");
    if (item === undefined) throw protocolFailure();
    const type = item["type"];
    if (type === "function_call") {
      const id = reqString(item, "id");
      if (this.calls.has(id)) throw protocolFailure();
      this.budget.addToolCall();
      const args = this.budget.newArgs();
      args.add(optString(item, "arguments") ?? "");
      this.calls.set(id, { callId: reqString(item, "call_id"), name: reqString(item, "name"), args });
    } else if (type === "reasoning") {
      this.reasoning.set(reqString(item, "id"), { parts: new Map() });
    }
  }

  private summary(o: JsonObject, text: string, out: ProviderEvent[]): void {
    const r = this.reasoning.get(reqString(o, "item_id"));
    const idx = o["summary_index"];
    if (r === undefined || typeof idx !== "number") throw protocolFailure();
    if (r.parts.has(idx)) return;
    r.parts.set(idx, text);
    if (text.length > 0) out.push({ type: "reasoning_summary", text });
  }

  private itemDone(o: JsonObject, out: ProviderEvent[]): void {
    const item = optObject(o, "item");
    if (item === undefined) throw protocolFailure();
    const type = item["type"];
    if (type === "function_call") {
      const c = this.calls.get(reqString(item, "id"));
      if (c === undefined) throw protocolFailure();
      const full = optString(item, "arguments");
      if (full !== undefined) c.args.replace(full);
    } else if (type === "reasoning") {
      const r = this.reasoning.get(reqString(item, "id"));
      if (r === undefined) throw protocolFailure();
      const text = [...r.parts.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]).join("\n\n");
      const sig = optString(item, "encrypted_content");
      if (text.length > 0 || sig !== undefined) {
        out.push({ type: "thinking_block", text, ...(sig !== undefined ? { signature: sig } : {}), api: "openai-responses" });
      }
    }
  }

  private finish(o: JsonObject, stop: "end" | "max_tokens", out: ProviderEvent[]): void {
    const resp = optObject(o, "response");
    const u = resp === undefined ? undefined : optObject(resp, "usage");
    // Everything that can fail is read before the first call is pushed: a response that fails (its usage malformed
    // included) yields no tool call.
    const parsed = stop === "max_tokens" ? [] : [...this.calls.values()].map((c) => ({ c, args: c.args.parse() }));
    const usage: ProviderEvent | undefined =
      u === undefined
        ? undefined
        : {
            type: "usage",
            inputTokens: optCount(u, "input_tokens") ?? 0,
            outputTokens: optCount(u, "output_tokens") ?? 0,
            cacheReadTokens: optCount(optObject(u, "input_tokens_details"), "cached_tokens") ?? null,
            reasoningTokens: optCount(optObject(u, "output_tokens_details"), "reasoning_tokens") ?? null,
          };
    for (const { c, args } of parsed) out.push({ type: "tool_call", id: c.callId, name: c.name, arguments: args });
    const hasCalls = parsed.length > 0;
    if (usage !== undefined) out.push(usage);
    out.push({ type: "done", stopReason: stop === "max_tokens" ? "max_tokens" : hasCalls ? "tool_use" : "end" });
    this.finished = true;
  }
}
