/**
 * Anthropic Messages API (`POST {base}/v1/messages`, `stream: true`).
 *
 * Output rules (see docs/providers.md):
 * - text deltas are yielded as they arrive; thinking deltas as `thinking_delta`;
 * - a thinking block closed by `content_block_stop` yields `thinking_block` (text + signature);
 *   it additionally yields `reasoning_summary` only when verified: a `thinking` block (never
 *   `redacted_thinking`) that carried a non-empty `signature_delta` and non-empty text;
 * - tool calls are held until `message_stop` and yielded just before `usage` and `done`; a response
 *   that fails, or stops at `max_tokens`, yields none.
 */
import type { AssistantBlock, Message, ProviderEvent, ProviderRequest, ThinkingLevel, UserContent } from "../types.js";
import {
  clampCount,
  isObject,
  optCount,
  optObject,
  optString,
  parseEventObject,
  reqString,
  ResponseBudget,
  TextParts,
  type JsonObject,
  type ProviderBounds,
  type ToolArgs,
} from "./accumulate.js";
import type { Credential, WireDecoder, WireRequest } from "./driver.js";
import { LABELS, protocolFailure, ProviderFailure, streamErrorFailure, type StreamErrorCodes } from "./errors.js";

export { ANTHROPIC_DEFAULT_BASE_URL } from "./make.js";
export const ANTHROPIC_VERSION = "2023-06-01";
const DEFAULT_MAX_TOKENS = 16_384;
const MIN_THINKING_BUDGET = 1024;
const ANSWER_RESERVE = 4096;

/** Thinking budget per level; `default` sends no thinking parameter. */
export const ANTHROPIC_THINKING_BUDGET: Record<Exclude<ThinkingLevel, "default">, number> = {
  low: 2048,
  medium: 8192,
  high: 16_384,
  x_high: 32_000,
  max: 64_000,
};

/** The beta flag Anthropic's fast mode (`speed: "fast"`) is requested with. */
export const ANTHROPIC_FAST_MODE_BETA = "fast-mode-2026-02-01";

/** Adds one flag to `anthropic-beta` (comma-separated), keeping flags already configured. */
function withBeta(h: Record<string, string>, flag: string): Record<string, string> {
  const key = Object.keys(h).find((k) => k.toLowerCase() === "anthropic-beta");
  if (key === undefined) return { ...h, "anthropic-beta": flag };
  const flags = (h[key] ?? "").split(",").map((s) => s.trim()).filter((s) => s !== "");
  return { ...h, [key]: flags.includes(flag) ? flags.join(",") : [...flags, flag].join(",") };
}

export function anthropicHeaders(cred: Credential, extra: Record<string, string> | undefined): Record<string, string> {
  const h: Record<string, string> = {
    ...extra,
    "content-type": "application/json",
    accept: "text/event-stream",
    "anthropic-version": ANTHROPIC_VERSION,
  };
  if (cred?.kind === "api_key") h["x-api-key"] = cred.value;
  else if (cred?.kind === "bearer") h["authorization"] = `Bearer ${cred.value}`;
  return h;
}

function encodeUser(c: UserContent): JsonObject | null {
  if (c.type === "text") return c.text.length > 0 ? { type: "text", text: c.text } : null;
  return { type: "image", source: { type: "base64", media_type: c.mediaType, data: c.dataBase64 } };
}

function encodeAssistant(b: AssistantBlock): JsonObject | null {
  switch (b.type) {
    case "text":
      return b.text.length > 0 ? { type: "text", text: b.text } : null;
    case "thinking":
      // Only Anthropic-signed thinking can be replayed; unsigned or foreign thinking is dropped.
      if (b.api !== undefined && b.api !== "anthropic") return null;
      if (b.redacted === true) return b.signature ? { type: "redacted_thinking", data: b.signature } : null;
      return b.signature ? { type: "thinking", thinking: b.text, signature: b.signature } : null;
    case "tool_call":
      return { type: "tool_use", id: b.id, name: b.name, input: b.arguments };
  }
}

/** Encodes history; consecutive user-role content (tool results, prompts) merges into one message. */
export function encodeAnthropicMessages(messages: Message[]): JsonObject[] {
  const out: { role: "user" | "assistant"; content: JsonObject[] }[] = [];
  const push = (role: "user" | "assistant", blocks: JsonObject[]): void => {
    if (blocks.length === 0) return;
    const last = out[out.length - 1];
    if (last !== undefined && last.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of messages) {
    if (m.role === "user") push("user", m.content.map(encodeUser).filter((x): x is JsonObject => x !== null));
    else if (m.role === "assistant")
      push("assistant", m.content.map(encodeAssistant).filter((x): x is JsonObject => x !== null));
    else
      push("user", [
        { type: "tool_result", tool_use_id: m.toolCallId, content: m.content, ...(m.isError ? { is_error: true } : {}) },
      ]);
  }
  return out;
}

export function encodeAnthropicBody(req: ProviderRequest): JsonObject {
  const level = req.thinking ?? "default";
  const budget = level === "default" ? 0 : ANTHROPIC_THINKING_BUDGET[level];
  let maxTokens = req.maxOutputTokens ?? DEFAULT_MAX_TOKENS;
  if (req.maxOutputTokens === undefined && budget > 0) maxTokens = Math.max(maxTokens, budget + 8192);
  const body: JsonObject = {
    model: req.model,
    max_tokens: maxTokens,
    stream: true,
    messages: encodeAnthropicMessages(req.messages),
  };
  if (req.system.length > 0) body["system"] = req.system;
  if (req.tools.length > 0) {
    body["tools"] = req.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema }));
  }
  // budget_tokens must be >= 1024 and < max_tokens; keep >= 4096 tokens for the answer itself.
  // A level that cannot fit is sent without thinking.
  const fitted = Math.min(budget, maxTokens - ANSWER_RESERVE);
  if (budget > 0 && fitted >= MIN_THINKING_BUDGET) body["thinking"] = { type: "enabled", budget_tokens: fitted };
  if (req.fast === true) body["speed"] = "fast";
  return body;
}

export function buildAnthropicRequest(
  baseUrl: string,
  req: ProviderRequest,
  cred: Credential,
  extraHeaders?: Record<string, string>,
): WireRequest {
  return {
    url: `${baseUrl.replace(/\/+$/, "")}/v1/messages`,
    headers: req.fast === true ? withBeta(anthropicHeaders(cred, extraHeaders), ANTHROPIC_FAST_MODE_BETA) : anthropicHeaders(cred, extraHeaders),
    body: JSON.stringify(encodeAnthropicBody(req)),
  };
}

type Block =
  | { kind: "text" }
  | { kind: "thinking"; text: TextParts; signature: string; redacted: boolean }
  | { kind: "tool"; id: string; name: string; args: ToolArgs; startInput: Record<string, unknown> }
  | { kind: "other" };

/** Anthropic's in-stream error types: retried (an overload, a rate limit) or a refused credential. */
const STREAM_ERRORS: StreamErrorCodes = {
  overloaded: new Set(["overloaded_error", "api_error"]),
  rateLimited: new Set(["rate_limit_error"]),
  auth: new Set(["authentication_error", "permission_error"]),
};

/** An `error` event (`{"type":"error","error":{"type","message"}}`): the same body as an HTTP error answer. */
function errorFailure(o: JsonObject): ProviderFailure {
  const err = optObject(o, "error");
  return streamErrorFailure(o, err === undefined ? undefined : err["type"], STREAM_ERRORS);
}

export class AnthropicDecoder implements WireDecoder {
  finished = false;
  private readonly budget: ResponseBudget;
  private readonly blocks = new Map<number, Block>();
  private readonly calls: { id: string; name: string; args: ToolArgs; startInput: Record<string, unknown> }[] = [];
  private started = false;
  private stopReason: string | undefined;
  private input = 0;
  private cacheRead: number | null = null;
  private cacheWrite = 0;
  private output = 0;

  constructor(bounds: ProviderBounds) {
    this.budget = new ResponseBudget(bounds);
  }

  onEvent(_event: string | undefined, data: string, out: ProviderEvent[]): void {
    if (this.finished) return;
    const o = parseEventObject(data);
    const type = o["type"];
    if (type === "content_block_delta") return this.delta(o, out);
    if (type === "ping") return;
    if (type === "error") throw errorFailure(o);
    if (type === "message_start") {
      const msg = optObject(o, "message");
      this.usage(msg === undefined ? undefined : optObject(msg, "usage"));
      this.started = true;
      return;
    }
    if (type === "content_block_start" || type === "content_block_stop" || type === "message_delta" || type === "message_stop") {
      if (!this.started) throw protocolFailure();
    }
    if (type === "content_block_start") return this.start(o);
    if (type === "content_block_stop") return this.stop(o, out);
    if (type === "message_delta") {
      const d = optObject(o, "delta");
      const sr = d === undefined ? undefined : optString(d, "stop_reason");
      if (sr !== undefined) this.stopReason = sr;
      this.usage(optObject(o, "usage"));
      return;
    }
    if (type === "message_stop") return this.finish(out);
    // Unknown event types are tolerated (forward compatibility).
  }

  onEnd(): void {
    throw new ProviderFailure("network", LABELS.disconnect, true);
  }

  private index(o: JsonObject): number {
    const i = o["index"];
    if (typeof i !== "number" || !Number.isInteger(i) || i < 0) throw protocolFailure();
    return i;
  }

  private usage(u: JsonObject | undefined): void {
    if (u === undefined) return;
    this.input = optCount(u, "input_tokens") ?? this.input;
    this.output = optCount(u, "output_tokens") ?? this.output;
    this.cacheWrite = optCount(u, "cache_creation_input_tokens") ?? this.cacheWrite;
    const cr = optCount(u, "cache_read_input_tokens");
    if (cr !== undefined) this.cacheRead = cr;
  }

  private start(o: JsonObject): void {
    const index = this.index(o);
    const cb = optObject(o, "content_block");
    if (cb === undefined || this.blocks.has(index)) throw protocolFailure();
    const t = cb["type"];
    let block: Block;
    if (t === "text") {
      const text = optString(cb, "text") ?? "";
      if (text.length > 0) throw protocolFailure(); // initial text is always empty in a stream
      block = { kind: "text" };
    } else if (t === "thinking" || t === "redacted_thinking") {
      const redacted = t === "redacted_thinking";
      const block0: Block = { kind: "thinking", text: new TextParts(), signature: "", redacted };
      if (redacted) block0.signature = optString(cb, "data") ?? "";
      else block0.text.add(optString(cb, "thinking") ?? "");
      block = block0;
    } else if (t === "tool_use") {
      this.budget.addToolCall();
      const input = cb["input"];
      block = {
        kind: "tool",
        id: reqString(cb, "id"),
        name: reqString(cb, "name"),
        args: this.budget.newArgs(),
        startInput: isObject(input) ? input : {},
      };
    } else {
      block = { kind: "other" };
    }
    this.blocks.set(index, block);
  }

  private delta(o: JsonObject, out: ProviderEvent[]): void {
    const block = this.blocks.get(this.index(o));
    const d = optObject(o, "delta");
    if (block === undefined || d === undefined) throw protocolFailure();
    const t = d["type"];
    if (t === "text_delta" && block.kind === "text") {
      const text = reqString(d, "text");
      this.budget.addText(text);
      if (text.length > 0) out.push({ type: "text_delta", text });
    } else if (t === "thinking_delta" && block.kind === "thinking") {
      const text = reqString(d, "thinking");
      block.text.add(text);
      if (text.length > 0) out.push({ type: "thinking_delta", text });
    } else if (t === "signature_delta" && block.kind === "thinking") {
      block.signature += reqString(d, "signature");
    } else if (t === "input_json_delta" && block.kind === "tool") {
      block.args.add(reqString(d, "partial_json"));
    } else if (block.kind !== "other") {
      throw protocolFailure();
    }
  }

  private stop(o: JsonObject, out: ProviderEvent[]): void {
    const index = this.index(o);
    const block = this.blocks.get(index);
    if (block === undefined) throw protocolFailure();
    if (block.kind === "thinking") {
      const text = block.text.text();
      const sig = block.signature.length > 0 ? block.signature : undefined;
      out.push({
        type: "thinking_block",
        text,
        ...(sig !== undefined ? { signature: sig } : {}),
        ...(block.redacted ? { redacted: true } : {}),
        api: "anthropic",
      });
      if (!block.redacted && sig !== undefined && text.length > 0) out.push({ type: "reasoning_summary", text });
    } else if (block.kind === "tool") {
      this.calls.push(block);
    }
    this.blocks.set(index, { kind: "other" });
  }

  private finish(out: ProviderEvent[]): void {
    const sr = this.stopReason;
    const stopReason = sr === "max_tokens" || sr === "model_context_window_exceeded" ? "max_tokens" : sr === "tool_use" ? "tool_use" : "end";
    if (stopReason !== "max_tokens") {
      // A tool_use block still open at message_stop: its call is neither complete nor to be dropped (the model asked).
      for (const b of this.blocks.values()) if (b.kind === "tool") throw protocolFailure();
      // Parse every held call first so a bad one fails the response before any call is yielded.
      const parsed = this.calls.map((c) => ({ c, args: c.args.empty ? c.startInput : c.args.parse() }));
      for (const { c, args } of parsed) out.push({ type: "tool_call", id: c.id, name: c.name, arguments: args });
    }
    out.push({
      type: "usage",
      inputTokens: clampCount(this.input + this.cacheWrite + (this.cacheRead ?? 0)),
      outputTokens: this.output,
      cacheReadTokens: this.cacheRead,
      reasoningTokens: null,
    });
    out.push({ type: "done", stopReason: stopReason === "end" && this.calls.length > 0 ? "tool_use" : stopReason });
    this.finished = true;
  }
}
