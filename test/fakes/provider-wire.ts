/**
 * Wire renderers for the fake provider: turn a scripted turn into the SSE bytes of one of the
 * three provider formats (Anthropic Messages, OpenAI Responses, OpenAI Chat Completions).
 * Pure functions of the script; the server in fake-provider.ts only writes what these return.
 */
import { anthropicStreamError, chatStreamError, ERROR_BODY_SECRET, responsesFailedResponse } from "./stream-errors.js";

export type FakeApi = "anthropic" | "openai-responses" | "openai-chat";

export interface FakeToolCall {
  id?: string;
  name: string;
  /** A JSON text sent verbatim (split into chunks), or an object to serialize. */
  arguments: string | Record<string, unknown>;
  chunks?: number;
}

/** One scripted step of a streamed answer. */
export type FakeStep =
  | { text: string; chunks?: number }
  /** Anthropic: thinking block (+ signature_delta when `signature`); Responses: a reasoning item whose summary is this text (signature → encrypted_content); Chat: reasoning_content deltas. */
  | { thinking: string; chunks?: number; signature?: string }
  | { toolCall: FakeToolCall }
  /** One text-delta event whose SSE `data` is exactly this many bytes. */
  | { sizedText: number }
  /** A raw SSE event with this data (and optional event name). */
  | { sse: string; event?: string }
  /** Raw bytes written as they are. */
  | { raw: string }
  | { malformed: true }
  /**
   * The format's in-stream error event as its servers send it (Anthropic `error`, Responses `response.failed`, Chat
   * `{"error":…}`), named by the dialect's own code or type: stream-errors.ts.
   */
  | { streamError: string }
  | { delayMs: number }
  /** Flush, then write nothing more until this settles (in-process scripts only). */
  | { hold: Promise<unknown> }
  /** Flush, then destroy the socket mid-body. */
  | { disconnect: true }
  /** Stop writing until the client disconnects. */
  | { waitForAbort: true };

export interface FakeUsage {
  input?: number;
  output?: number;
  cacheRead?: number;
  reasoning?: number;
}

/** One scripted provider response. */
export interface FakeTurn {
  /**
   * Non-2xx status: the body (default a JSON error containing a secret marker) is sent instead of a stream. With a
   * 2xx status (or none), `body` is sent as is instead of the rendered stream (a web page, a whole JSON answer), under
   * `headers` (content type `text/event-stream` unless they name one).
   */
  status?: number;
  body?: string;
  headers?: Record<string, string>;
  /**
   * The response's `content-encoding`: gzip, x-gzip, deflate or br compress the body (a rendered stream through a
   * streaming compressor flushed at each write, so events arrive one by one); any other value is sent on the
   * uncompressed body.
   */
  contentEncoding?: string;
  /** Destroy the connection before any response byte (a connection reset). */
  resetBeforeHeaders?: boolean;
  /** Send nothing until the client disconnects (abort before the first byte). */
  waitForAbortBeforeHeaders?: boolean;
  steps?: FakeStep[];
  /** Default: tool_use when the turn has tool calls, else end. */
  stopReason?: "end" | "tool_use" | "max_tokens";
  usage?: FakeUsage;
  /** Delay before each written event (a slow stream). */
  chunkDelayMs?: number;
  /** false: omit the terminal events (the body just ends). Default true. */
  end?: boolean;
  /** Pad with SSE comment lines so the whole body is exactly this many bytes. */
  totalBytes?: number;
  /**
   * Responses only: `response.output_text.done` carries "" instead of repeating the whole text
   * (a real 1 MiB answer's done event would itself exceed the 1 MiB event bound).
   */
  compactDone?: boolean;
  /** Model name echoed in events. */
  model?: string;
}

/** Rendered output: bytes to write, or control actions for the server. */
export type WireItem =
  | string
  | { delayMs: number }
  | { hold: Promise<unknown> }
  | { disconnect: true }
  | { waitForAbort: true };

export { ERROR_BODY_SECRET };

const sse = (data: string, event?: string): string => (event !== undefined ? `event: ${event}\n` : "") + `data: ${data}\n\n`;
const ev = (type: string, payload: Record<string, unknown>, named: boolean): string =>
  sse(JSON.stringify({ type, ...payload }), named ? type : undefined);

export function splitChunks(s: string, chunks: number): string[] {
  const n = Math.max(1, Math.min(chunks, s.length || 1));
  const size = Math.ceil(s.length / n);
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out.length > 0 ? out : [""];
}

/** Builds a JSON event with a padded string field so that `JSON.stringify` is exactly `bytes` long. */
function sized(bytes: number, make: (pad: string) => unknown): string {
  const overhead = Buffer.byteLength(JSON.stringify(make("")));
  if (bytes < overhead) throw new Error(`sizedText needs at least ${overhead} bytes`);
  return JSON.stringify(make("a".repeat(bytes - overhead)));
}

function argsText(c: FakeToolCall): string {
  return typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments);
}

function stopOf(turn: FakeTurn): "end" | "tool_use" | "max_tokens" {
  if (turn.stopReason !== undefined) return turn.stopReason;
  return (turn.steps ?? []).some((s) => "toolCall" in s) ? "tool_use" : "end";
}

/** Control steps shared by every format; returns undefined for content steps. */
function control(step: FakeStep): WireItem | undefined {
  if ("raw" in step) return step.raw;
  if ("sse" in step) return sse(step.sse, step.event);
  if ("malformed" in step) return "data: {this is not json\n\n";
  if ("delayMs" in step) return { delayMs: step.delayMs };
  if ("hold" in step) return { hold: step.hold };
  if ("disconnect" in step) return { disconnect: true };
  if ("waitForAbort" in step) return { waitForAbort: true };
  return undefined;
}

function renderAnthropic(turn: FakeTurn): WireItem[] {
  const items: WireItem[] = [];
  const u = turn.usage ?? {};
  const model = turn.model ?? "fake-model";
  items.push(
    ev("message_start", {
      message: {
        id: "msg_fake", type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null,
        usage: { input_tokens: u.input ?? 10, output_tokens: 1, cache_creation_input_tokens: 0, ...(u.cacheRead !== undefined ? { cache_read_input_tokens: u.cacheRead } : {}) },
      },
    }, true),
  );
  let index = 0;
  let toolN = 0;
  for (const step of turn.steps ?? []) {
    const c = control(step);
    if (c !== undefined) { items.push(c); continue; }
    const i = index++;
    if ("text" in step) {
      items.push(ev("content_block_start", { index: i, content_block: { type: "text", text: "" } }, true));
      for (const t of splitChunks(step.text, step.chunks ?? 1)) items.push(ev("content_block_delta", { index: i, delta: { type: "text_delta", text: t } }, true));
      items.push(ev("content_block_stop", { index: i }, true));
    } else if ("sizedText" in step) {
      items.push(ev("content_block_start", { index: i, content_block: { type: "text", text: "" } }, true));
      items.push(sse(sized(step.sizedText, (pad) => ({ type: "content_block_delta", index: i, delta: { type: "text_delta", text: pad } })), "content_block_delta"));
      items.push(ev("content_block_stop", { index: i }, true));
    } else if ("thinking" in step) {
      items.push(ev("content_block_start", { index: i, content_block: { type: "thinking", thinking: "" } }, true));
      for (const t of splitChunks(step.thinking, step.chunks ?? 1)) items.push(ev("content_block_delta", { index: i, delta: { type: "thinking_delta", thinking: t } }, true));
      if (step.signature !== undefined) items.push(ev("content_block_delta", { index: i, delta: { type: "signature_delta", signature: step.signature } }, true));
      items.push(ev("content_block_stop", { index: i }, true));
    } else if ("toolCall" in step) {
      const tc = step.toolCall;
      items.push(ev("content_block_start", { index: i, content_block: { type: "tool_use", id: tc.id ?? `toolu_${toolN++}`, name: tc.name, input: {} } }, true));
      for (const part of splitChunks(argsText(tc), tc.chunks ?? 3)) items.push(ev("content_block_delta", { index: i, delta: { type: "input_json_delta", partial_json: part } }, true));
      items.push(ev("content_block_stop", { index: i }, true));
    } else if ("streamError" in step) {
      items.push(sse(JSON.stringify(anthropicStreamError(step.streamError)), "error"));
    }
  }
  if (turn.end !== false) {
    const stop = stopOf(turn);
    const sr = stop === "end" ? "end_turn" : stop;
    items.push(ev("message_delta", { delta: { stop_reason: sr, stop_sequence: null }, usage: { output_tokens: u.output ?? 5 } }, true));
    items.push(ev("message_stop", {}, true));
  }
  return items;
}

function renderResponses(turn: FakeTurn): WireItem[] {
  const items: WireItem[] = [];
  let seq = 0;
  const r = (type: string, payload: Record<string, unknown>): string => ev(type, { sequence_number: seq++, ...payload }, true);
  const u = turn.usage ?? {};
  items.push(r("response.created", { response: { id: "resp_fake", object: "response", status: "in_progress", output: [] } }));
  let out = 0;
  for (const step of turn.steps ?? []) {
    const c = control(step);
    if (c !== undefined) { items.push(c); continue; }
    const oi = out++;
    if ("text" in step || "sizedText" in step) {
      const id = `msg_${oi}`;
      items.push(r("response.output_item.added", { output_index: oi, item: { type: "message", id, status: "in_progress", role: "assistant", content: [] } }));
      if ("text" in step) {
        for (const t of splitChunks(step.text, step.chunks ?? 1)) items.push(r("response.output_text.delta", { item_id: id, output_index: oi, content_index: 0, delta: t }));
        items.push(r("response.output_text.done", { item_id: id, output_index: oi, content_index: 0, text: turn.compactDone === true ? "" : step.text }));
      } else {
        items.push(sse(sized(step.sizedText, (pad) => ({ type: "response.output_text.delta", item_id: id, output_index: oi, content_index: 0, delta: pad })), "response.output_text.delta"));
      }
      items.push(r("response.output_item.done", { output_index: oi, item: { type: "message", id, status: "completed", role: "assistant", content: [] } }));
    } else if ("thinking" in step) {
      const id = `rs_${oi}`;
      items.push(r("response.output_item.added", { output_index: oi, item: { type: "reasoning", id, summary: [] } }));
      items.push(r("response.reasoning_summary_part.added", { item_id: id, output_index: oi, summary_index: 0, part: { type: "summary_text", text: "" } }));
      for (const t of splitChunks(step.thinking, step.chunks ?? 1)) items.push(r("response.reasoning_summary_text.delta", { item_id: id, output_index: oi, summary_index: 0, delta: t }));
      items.push(r("response.reasoning_summary_text.done", { item_id: id, output_index: oi, summary_index: 0, text: step.thinking }));
      items.push(r("response.reasoning_summary_part.done", { item_id: id, output_index: oi, summary_index: 0, part: { type: "summary_text", text: step.thinking } }));
      items.push(r("response.output_item.done", { output_index: oi, item: { type: "reasoning", id, summary: [{ type: "summary_text", text: step.thinking }], ...(step.signature !== undefined ? { encrypted_content: step.signature } : {}) } }));
    } else if ("toolCall" in step) {
      const tc = step.toolCall;
      const id = `fc_${oi}`;
      const callId = tc.id ?? `call_${oi}`;
      const args = argsText(tc);
      items.push(r("response.output_item.added", { output_index: oi, item: { type: "function_call", id, call_id: callId, name: tc.name, arguments: "", status: "in_progress" } }));
      for (const part of splitChunks(args, tc.chunks ?? 3)) items.push(r("response.function_call_arguments.delta", { item_id: id, output_index: oi, delta: part }));
      items.push(r("response.function_call_arguments.done", { item_id: id, output_index: oi, arguments: args }));
      items.push(r("response.output_item.done", { output_index: oi, item: { type: "function_call", id, call_id: callId, name: tc.name, arguments: args, status: "completed" } }));
    } else if ("streamError" in step) {
      items.push(r("response.failed", { response: responsesFailedResponse(step.streamError) }));
    }
  }
  if (turn.end !== false) {
    const usage = {
      input_tokens: u.input ?? 10,
      input_tokens_details: { cached_tokens: u.cacheRead ?? 0 },
      output_tokens: u.output ?? 5,
      output_tokens_details: { reasoning_tokens: u.reasoning ?? 0 },
      total_tokens: (u.input ?? 10) + (u.output ?? 5),
    };
    if (stopOf(turn) === "max_tokens") {
      items.push(r("response.incomplete", { response: { id: "resp_fake", status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, usage } }));
    } else {
      items.push(r("response.completed", { response: { id: "resp_fake", status: "completed", usage } }));
    }
  }
  return items;
}

function renderChat(turn: FakeTurn): WireItem[] {
  const items: WireItem[] = [];
  const model = turn.model ?? "fake-model";
  const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
    sse(JSON.stringify({ id: "chatcmpl-fake", object: "chat.completion.chunk", created: 0, model, choices: [{ index: 0, delta, finish_reason: finish }] }));
  items.push(chunk({ role: "assistant", content: "" }));
  let toolIndex = 0;
  for (const step of turn.steps ?? []) {
    const c = control(step);
    if (c !== undefined) { items.push(c); continue; }
    if ("text" in step) {
      for (const t of splitChunks(step.text, step.chunks ?? 1)) items.push(chunk({ content: t }));
    } else if ("sizedText" in step) {
      items.push(sse(sized(step.sizedText, (pad) => ({ id: "chatcmpl-fake", object: "chat.completion.chunk", created: 0, model, choices: [{ index: 0, delta: { content: pad }, finish_reason: null }] }))));
    } else if ("thinking" in step) {
      for (const t of splitChunks(step.thinking, step.chunks ?? 1)) items.push(chunk({ reasoning_content: t }));
    } else if ("toolCall" in step) {
      const tc = step.toolCall;
      const index = toolIndex++;
      items.push(chunk({ tool_calls: [{ index, id: tc.id ?? `call_${index}`, type: "function", function: { name: tc.name, arguments: "" } }] }));
      for (const part of splitChunks(argsText(tc), tc.chunks ?? 3)) items.push(chunk({ tool_calls: [{ index, function: { arguments: part } }] }));
    } else if ("streamError" in step) {
      items.push(sse(JSON.stringify(chatStreamError(step.streamError))));
    }
  }
  if (turn.end !== false) {
    const stop = stopOf(turn);
    items.push(chunk({}, stop === "end" ? "stop" : stop === "tool_use" ? "tool_calls" : "length"));
    const u = turn.usage ?? {};
    items.push(sse(JSON.stringify({
      id: "chatcmpl-fake", object: "chat.completion.chunk", created: 0, model, choices: [],
      usage: {
        prompt_tokens: u.input ?? 10, completion_tokens: u.output ?? 5, total_tokens: (u.input ?? 10) + (u.output ?? 5),
        ...(u.cacheRead !== undefined ? { prompt_tokens_details: { cached_tokens: u.cacheRead } } : {}),
        ...(u.reasoning !== undefined ? { completion_tokens_details: { reasoning_tokens: u.reasoning } } : {}),
      },
    })));
    items.push("data: [DONE]\n\n");
  }
  return items;
}

/** Renders a turn for a wire format, padding to `totalBytes` when set. */
export function renderTurn(api: FakeApi, turn: FakeTurn): WireItem[] {
  const items = api === "anthropic" ? renderAnthropic(turn) : api === "openai-responses" ? renderResponses(turn) : renderChat(turn);
  if (turn.totalBytes !== undefined) {
    let size = 0;
    for (const it of items) if (typeof it === "string") size += Buffer.byteLength(it);
    let need = turn.totalBytes - size;
    if (need < 0 || need === 1) throw new Error(`totalBytes ${turn.totalBytes} cannot be reached (body is ${size} bytes)`);
    // Comment lines ":<pad>\n", each ≤ 32 KiB so no single line nears the event bound.
    const pads: string[] = [];
    while (need > 0) {
      const line = Math.min(need, 32 * 1024);
      const take = need - line === 1 ? line - 1 : line; // never leave a 1-byte remainder
      pads.push(`:${"p".repeat(take - 2)}\n`);
      need -= take;
    }
    items.splice(1, 0, pads.join(""));
  }
  return items;
}
