/**
 * OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`, `stream: true`,
 * `stream_options.include_usage`) for Ollama, vLLM, LM Studio and any compatible base URL.
 *
 * Output rules (see docs/providers.md):
 * - `delta.content` → `text_delta`; `delta.reasoning_content` / `delta.reasoning` → `thinking_delta`;
 *   the collected reasoning yields one unsigned `thinking_block` when the answer (text or tool call)
 *   starts, or at the end; never a `reasoning_summary` (nothing verifies its provenance);
 * - tool calls accumulate by `index` and are held until the stream completes (`[DONE]`, or a clean
 *   end after a `finish_reason`); `finish_reason: "length"` yields none. A call's name is the first non-empty
 *   `function.name` sent for it (later ones are ignored), at most `MAX_TOOL_NAME_BYTES`.
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
  utf8Bytes,
  type JsonObject,
  type ProviderBounds,
  type ToolArgs,
} from "./accumulate.js";
import type { Credential, WireDecoder, WireRequest } from "./driver.js";
import { LABELS, protocolFailure, ProviderFailure, streamErrorFailure } from "./errors.js";
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

/** The longest tool name taken (UTF-8 bytes): far above any real one (OpenAI allows 64 characters). */
export const MAX_TOOL_NAME_BYTES = 1024;

/** `name`, or a protocol failure when it is longer than `MAX_TOOL_NAME_BYTES`. */
function toolName(name: string): string {
  if (name.length > MAX_TOOL_NAME_BYTES / 3 && utf8Bytes(name) > MAX_TOOL_NAME_BYTES) throw new ProviderFailure("protocol", LABELS.toolName, false);
  return name;
}

/** Stand-in text that proves where an event's `delta.content` literal is (see `ChatDecoder.learn`). */
const MARK = "\u0000";
/** How many templates may be learned in a row without a single event matching one (then: JSON.parse only). */
const MAX_UNUSED_TEMPLATES = 4;

/**
 * True when `'"' + s + '"'` is a JSON string literal whose value is `s` (no quote, backslash or control character);
 * any other code unit, a lone surrogate included, is taken verbatim by `JSON.parse`.
 */
function plainLiteral(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c) return false;
  }
  return true;
}

export class ChatDecoder implements WireDecoder {
  finished = false;
  private readonly budget: ResponseBudget;
  private readonly calls: ChatCall[] = [];
  private thinking = new TextParts();
  private hasThinking = false;
  private finishReason: string | undefined;
  private usage: JsonObject | undefined;
  /**
   * The text of an earlier plain text event (see `learn`) before and after its `delta.content` string literal,
   * quotes included: an event that is `head`, a plain literal, `tail` is that event with only its text changed.
   */
  private head = "";
  private tail = "";
  private unused = 0;
  /** Events decoded from a template, without JSON.parse (for tests). */
  templated = 0;

  /** `templates: false` decodes every event with JSON.parse (the reference the template path is tested against). */
  constructor(bounds: ProviderBounds, private readonly templates = true) {
    this.budget = new ResponseBudget(bounds);
  }

  onEvent(_event: string | undefined, data: string, out: ProviderEvent[]): void {
    if (this.finished) return;
    if (data === "[DONE]") return this.finish(out);
    const head = this.head;
    if (head !== "") {
      // The common event: an earlier one's text with another plain `delta.content`. Its JSON.parse would give that
      // event's object with only this text changed, so it has that event's effect with this text (see `learn`).
      // `lastIndexOf(x, 0) === 0` and `indexOf(x, end) === end` are `startsWith` / `endsWith` here (neither can match
      // elsewhere), without their generic path: with these non-constant strings that was ~5× slower, the largest
      // single cost of a long answer's delta (~0.6 µs per event; bench/scv.bench.ts).
      const tail = this.tail;
      const end = data.length - tail.length;
      if (end >= head.length && data.lastIndexOf(head, 0) === 0 && data.indexOf(tail, end) === end) {
        const text = data.slice(head.length, end);
        if (plainLiteral(text)) {
          this.templated++;
          this.unused = 0;
          if (text.length > 0) this.text(text, out);
          return;
        }
      }
    }
    const o = parseEventObject(data);
    // A chat error object carries no reliable retry signal: never retried.
    if (o["error"] !== undefined && o["error"] !== null) throw streamErrorFailure(o, undefined);
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
    if (this.templates && this.unused < MAX_UNUSED_TEMPLATES) this.learn(data, o, choices as unknown[]);
  }

  /**
   * Keeps `data` as the template of the next events when it is a plain text event: no error or usage, one choice
   * (index 0, no finish reason) whose delta has a string `content` and nothing else the decoder reads. Such an event
   * only adds its text, so one that differs from it in that text alone only adds its own.
   *
   * Where the literal is: `"content":"` then the next quote, with no backslash between (so that quote ends the
   * literal). That is a key and its string value (a quote inside a string is escaped, and `content` cannot stand
   * outside one); that it is the value read as `choices[0].delta.content` (and not a nested or duplicate key) is
   * checked by parsing the event once more with `MARK` in its place. Replacing one string literal by another changes
   * nothing else in the parse, so `head` + any plain literal + `tail` parses as this event with that text.
   */
  private learn(data: string, o: JsonObject, choices: unknown[]): void {
    if ((o["error"] ?? null) !== null || (o["usage"] ?? null) !== null || choices.length !== 1) return;
    const choice = choices[0] as JsonObject;
    const delta = choice["delta"];
    if ((choice["index"] ?? 0) !== 0 || (choice["finish_reason"] ?? null) !== null || !isObject(delta)) return;
    const content = delta["content"];
    if (typeof content !== "string" || content === MARK) return;
    if ((delta["reasoning_content"] ?? null) !== null || (delta["reasoning"] ?? null) !== null || (delta["tool_calls"] ?? null) !== null) return;
    const k = data.lastIndexOf('"content":"');
    if (k < 0) return;
    const start = k + 11;
    const end = data.indexOf('"', start);
    if (end < 0 || data.lastIndexOf("\\", end) >= start) return;
    const head = data.slice(0, start);
    const tail = data.slice(end);
    this.unused++;
    let m: unknown;
    try {
      m = JSON.parse(`${head}\\u0000${tail}`);
    } catch {
      return;
    }
    const mc = isObject(m) && Array.isArray(m["choices"]) ? (m["choices"] as unknown[])[0] : undefined;
    const md = isObject(mc) ? mc["delta"] : undefined;
    if (!isObject(md) || md["content"] !== MARK) return;
    this.head = head;
    this.tail = tail;
  }

  onEnd(out: ProviderEvent[]): void {
    // Some servers close without `[DONE]`; a finish_reason means the answer is complete.
    if (this.finishReason === undefined) throw new ProviderFailure("network", LABELS.disconnect, true);
    this.finish(out);
  }

  private text(text: string, out: ProviderEvent[]): void {
    if (this.hasThinking) this.flushThinking(out);
    this.budget.addText(text);
    out.push({ type: "text_delta", text });
  }

  private delta(d: JsonObject, out: ProviderEvent[]): void {
    const text = optString(d, "content");
    if (text !== undefined && text.length > 0) this.text(text, out);
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
        // OpenAI sends a call's name once, whole, in its first delta; some compatible servers repeat it in later ones
        // (joined, `read` became `readread`). The first non-empty name is the call's, as the Vercel AI SDK reads it.
        const name = optString(fn, "name");
        if (name !== undefined && name.length > 0 && call.name.length === 0) call.name = toolName(name);
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
    // Everything that can fail is read before the first call is pushed: a response that fails (its usage malformed
    // included) yields no tool call.
    const parsed = truncated
      ? []
      : this.calls.map((c, i) => {
          if (c.name.length === 0) throw protocolFailure();
          return { id: c.id.length > 0 ? c.id : `call_${i}`, name: c.name, args: c.args.parse() };
        });
    const u = this.usage;
    const usage: ProviderEvent | undefined =
      u === undefined
        ? undefined
        : {
            type: "usage",
            inputTokens: optCount(u, "prompt_tokens") ?? 0,
            outputTokens: optCount(u, "completion_tokens") ?? 0,
            cacheReadTokens: optCount(optObject(u, "prompt_tokens_details"), "cached_tokens") ?? null,
            reasoningTokens: optCount(optObject(u, "completion_tokens_details"), "reasoning_tokens") ?? null,
          };
    for (const c of parsed) out.push({ type: "tool_call", id: c.id, name: c.name, arguments: c.args });
    if (usage !== undefined) out.push(usage);
    const stop = truncated ? "max_tokens" : this.calls.length > 0 ? "tool_use" : "end";
    out.push({ type: "done", stopReason: stop });
    this.finished = true;
  }
}
