/**
 * In-stream errors as each dialect's servers send them, for the fake's `streamError` step (provider-wire.ts).
 *
 * Contract: the step names the dialect's own code or type (Anthropic `error.type`, Responses `response.error.code`,
 * Chat Completions `error.code`, or `error.type` when OpenAI sends no code); the fake sends the whole error its servers
 * send for it, message included, with ` (ERROR_BODY_SECRET)` appended so a test can check no provider text reaches a
 * label. A name no server of the dialect sends throws: a script naming one would test a shape nobody meets.
 *
 * Sources: Anthropic's error types (docs "Errors": `event: error` / `{"type":"error","error":{"type":"overloaded_error",
 * "message":"Overloaded"}}`; an over-long prompt is an `invalid_request_error` "prompt is too long: N tokens > M
 * maximum"); OpenAI's error object `{"message","type","param","code"}` (Chat Completions; `context_length_exceeded`
 * is a `code` under type `invalid_request_error`; a TPM limit is code `rate_limit_exceeded` under type `tokens`); the
 * Responses `response.failed` error codes (API reference, plus the ChatGPT backend's that Codex handles).
 */

export const ERROR_BODY_SECRET = "SECRET-ERROR-BODY-MARKER";

const withSecret = (message: string): string => `${message} (${ERROR_BODY_SECRET})`;

/** Anthropic `error.type` → its message. */
const ANTHROPIC: Record<string, string> = {
  overloaded_error: "Overloaded",
  api_error: "Internal server error",
  rate_limit_error:
    "This request would exceed the rate limit for your organization of 40,000 input tokens per minute. Please reduce the prompt length or the maximum tokens requested, or try again later.",
  invalid_request_error: "prompt is too long: 210000 tokens > 200000 maximum",
  authentication_error: "invalid x-api-key",
  permission_error: "Your API key does not have permission to use the specified resource.",
};

/** Responses `response.error.code` → its message. */
const RESPONSES: Record<string, string> = {
  server_error: "An error occurred while processing your request. You can retry your request, or contact us through our help center if the error persists.",
  rate_limit_exceeded: "Rate limit reached for gpt-4o in organization org-fake on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.",
  context_length_exceeded: "Your input exceeds the context window of this model. Please adjust your input and try again.",
  server_is_overloaded: "Our servers are currently overloaded. Please try again later.",
  slow_down: "Please slow down.",
  insufficient_quota: "You exceeded your current quota, please check your plan and billing details.",
  invalid_prompt: "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
};

/** Chat Completions `error.code` (or `error.type` when OpenAI sends no code) → the whole error object. */
const CHAT: Record<string, { message: string; type: string; param: string | null; code: string | null }> = {
  server_error: { message: "The server had an error while processing your request. Sorry about that!", type: "server_error", param: null, code: null },
  context_length_exceeded: {
    message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.",
    type: "invalid_request_error",
    param: "messages",
    code: "context_length_exceeded",
  },
  rate_limit_exceeded: {
    message: "Rate limit reached for gpt-4o in organization org-fake on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.",
    type: "tokens",
    param: null,
    code: "rate_limit_exceeded",
  },
};

/** Anthropic's `error` event data for `type`. */
export function anthropicStreamError(type: string): Record<string, unknown> {
  const message = ANTHROPIC[type];
  if (message === undefined) throw new Error(`Anthropic sends no in-stream error of type ${type} (known: ${Object.keys(ANTHROPIC).join(", ")})`);
  return { type: "error", error: { type, message: withSecret(message) } };
}

/** The `response` of a Responses `response.failed` event for `code`. */
export function responsesFailedResponse(code: string): Record<string, unknown> {
  const message = RESPONSES[code];
  if (message === undefined) throw new Error(`Responses sends no in-stream error of code ${code} (known: ${Object.keys(RESPONSES).join(", ")})`);
  return { id: "resp_fake", object: "response", status: "failed", error: { code, message: withSecret(message) }, incomplete_details: null, output: [] };
}

/** A Chat Completions error chunk for `code`. */
export function chatStreamError(code: string): Record<string, unknown> {
  const e = CHAT[code];
  if (e === undefined) throw new Error(`Chat Completions sends no in-stream error of code ${code} (known: ${Object.keys(CHAT).join(", ")})`);
  return { error: { ...e, message: withSecret(e.message) } };
}
