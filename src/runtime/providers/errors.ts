/**
 * Provider failures as fixed, safe labels. A provider body, URL, header or credential never
 * becomes part of a label: every `message` a caller sees comes from this file. The one piece of a
 * provider's answer that may be appended is its error category (`authentication_error`,
 * `invalid_api_key`, `model_not_found`): a short identifier checked against `CATEGORY`, never its
 * free-text message (OpenAI's names part of the rejected key).
 */
import { PROVIDER_BOUNDS, type ProviderErrorKind, type ProviderEvent } from "../types.js";

/** A byte count as people read it: `1 MiB`, `256 KiB`, else `N bytes`. */
function sizeText(n: number): `${number} ${"MiB" | "KiB" | "bytes"}` {
  if (n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  if (n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} bytes`;
}

const B = PROVIDER_BOUNDS;

/**
 * Each answer bound's label names the bound's value (`assistant text exceeds 1 MiB`): one fixed text per bound, built
 * from `PROVIDER_BOUNDS` (under a test's tighter `bounds` it still names the default), matched whole or by its start.
 */
export const LABELS = {
  aborted: "request aborted",
  credential: "provider credential unavailable",
  auth: "provider rejected the credential",
  http: "provider returned an error status",
  rateLimited: "provider rate limit",
  overloaded: "provider overloaded or unavailable",
  providerError: "provider reported an error",
  tooLarge: "provider refused the request as too large",
  network: "provider connection failed",
  certificate: "provider TLS certificate not accepted",
  proxy: "provider connection through HTTPS_PROXY failed",
  stalled: "provider sent nothing within its idle timeout",
  heartbeatOnly: "provider sent only keep-alive comments within its idle timeout",
  disconnect: "provider stream ended unexpectedly",
  notStream: "provider did not answer with an event stream",
  malformed: "malformed provider stream",
  eventLimit: `one event of the provider's stream exceeds ${sizeText(B.maxSseEventBytes)}`,
  responseLimit: `provider response exceeds ${sizeText(B.maxResponseBytes)}`,
  textLimit: `assistant text exceeds ${sizeText(B.maxAssistantTextBytes)}`,
  toolArgsLimit: `tool call arguments exceed ${sizeText(B.maxToolArgumentBytes)}`,
  toolCountLimit: `more than ${B.maxToolCallsPerResponse} tool calls in one response`,
  badToolArgs: "tool arguments are not a JSON object",
  toolName: "provider sent a tool name longer than 1024 bytes",
  contentCoding: "provider answered with a content-encoding Berth cannot decode",
  transferCoding: "provider answered with a transfer-encoding Berth cannot decode",
  compressedCorrupt: "provider's compressed response is corrupt",
  compressedTruncated: "provider's compressed response ended early",
} as const;

type BaseLabel = (typeof LABELS)[keyof typeof LABELS];
/**
 * A fixed label, or one with the HTTP status and/or the provider's error category appended
 * (`… (HTTP 404 model_not_found)`, `… (overloaded_error)`): still never provider free text.
 */
export type ProviderLabel = BaseLabel | `${BaseLabel} (${string})`;

/** What an error category may look like: an identifier, so no sentence, URL or key fits. */
const CATEGORY = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;

/** A category that passes `CATEGORY`, else undefined. */
export function safeCategory(v: unknown): string | undefined {
  return typeof v === "string" && CATEGORY.test(v) ? v : undefined;
}

/**
 * The error category of a provider's JSON error body (over HTTP, or an in-stream error event's: `streamErrorFailure`):
 * `CONTEXT_OVERFLOW` when `mayOverflow` and the body says the request was longer than the model's window
 * (`contextOverflow`); else OpenAI `{"error":{"code","type"}}` (the more specific `code` first) and Anthropic
 * `{"type":"error","error":{"type"}}`, then Google's `{"error":{"status"}}`; of a JSON array (Gemini's OpenAI-compatible
 * endpoint: `[{"error":{"code":400,"message","status":"INVALID_ARGUMENT"}}]`), its first element's. Undefined when the body has
 * none of these or it is not an identifier. `mayOverflow` is
 * the status's or the in-stream error's own say (`overflowStatus`; not a rate limit, overload or credential refusal):
 * a 429 whose message speaks of "tokens per minute" is a rate limit, never an overflow.
 */
export function errorCategory(answer: unknown, mayOverflow: boolean): string | undefined {
  // Gemini's OpenAI-compatible endpoint answers with a JSON array of Google errors: its first is the error.
  const body: unknown = Array.isArray(answer) ? answer[0] : answer;
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined;
  if (mayOverflow && contextOverflow(body as Record<string, unknown>)) return CONTEXT_OVERFLOW;
  const err = (body as Record<string, unknown>)["error"];
  if (typeof err !== "object" || err === null) return undefined;
  const e = err as Record<string, unknown>;
  // Google's errors (Gemini) carry a number as `code` and say what kind in `status`: INVALID_ARGUMENT,
  // FAILED_PRECONDITION (a region or billing refusal), NOT_FOUND (the model), PERMISSION_DENIED (the key).
  return safeCategory(e["code"]) ?? safeCategory(e["type"]) ?? safeCategory(e["status"]);
}

/** The category named for a request the provider refused as longer than the model's context window. */
export const CONTEXT_OVERFLOW = "context_length_exceeded";

/**
 * Whether an HTTP status may carry a refusal as over the window: 400 (the request is invalid: OpenAI, Anthropic, vLLM,
 * llama.cpp, LM Studio, OpenRouter, Mistral) or 413 (too large). Never a 429 or a 5xx, whose "tokens" are a rate or a
 * load: retrying later is their fix, not compacting.
 */
export const overflowStatus = (status: number): boolean => status === 400 || status === 413;

/** Error codes and types that mean a context overflow (OpenAI and Groq's code, llama.cpp's server's type). */
const OVERFLOW_CODES = new Set(["context_length_exceeded", "exceed_context_size_error"]);
/**
 * Phrases of the servers that say it only in their message, matched, never shown: Anthropic "prompt is too long: N
 * tokens > M maximum", OpenAI Responses "Your input exceeds the context window of this model", vLLM, OpenRouter and
 * Mistral "maximum context length", llama.cpp "exceeds the available context size",
 * LM Studio "context length of only N tokens", Bedrock "Input is too long for requested model", Google (Gemini, also
 * through its OpenAI-compatible endpoint) "The input token count (N) exceeds the maximum number of tokens allowed (M)".
 */
const OVERFLOW_TEXT =
  /prompt is too long|maximum context length|context (?:length|window|size)|input is too long for requested model|input token count\b.{0,40}\bexceeds the maximum number of tokens/i;
/**
 * The error types (or codes) of a request refused as invalid, the only kind a phrase is read in: OpenAI's and
 * Anthropic's `invalid_request_error`, Responses' `invalid_prompt`, vLLM's `BadRequestError`, Bedrock's
 * `ValidationException`, Google's `INVALID_ARGUMENT`; or a numeric code 400 or 413 (vLLM, llama.cpp, OpenRouter). An error of another kind (a rate
 * limit's `rate_limit_error` or `tokens`, an overload) is not an overflow whatever its message says.
 */
const INVALID_REQUEST = /^(?:invalid_request(?:_error)?|invalid_prompt|BadRequestError|bad_request|ValidationException|INVALID_ARGUMENT)$/;

/**
 * Whether an error body says the request was longer than the model's context window: an overflow code or type; or a
 * known phrase in its message (`{"error":{"message"}}`, `{"error":"…"}`, or vLLM's top-level `{"message"}`) when every
 * type and code it names is an invalid request's (`INVALID_REQUEST`) or it names none.
 */
function contextOverflow(body: Record<string, unknown>): boolean {
  const err = body["error"];
  const e = typeof err === "object" && err !== null ? (err as Record<string, unknown>) : {};
  // Anthropic's top-level `type` is always "error": the kind is in `error.type`.
  const kinds = [e["code"], e["type"], e["status"], body["code"], body["type"] === "error" ? undefined : body["type"]].filter((v) => v !== undefined && v !== null);
  if (kinds.some((v) => typeof v === "string" && OVERFLOW_CODES.has(v))) return true;
  const invalidRequest = kinds.every((v) => (typeof v === "string" ? INVALID_REQUEST.test(v) : v === 400 || v === 413));
  if (!invalidRequest) return false;
  const texts = [typeof err === "string" ? err : e["message"], body["message"]];
  return texts.some((t) => typeof t === "string" && OVERFLOW_TEXT.test(t.slice(0, 1024)));
}

/** A dialect's in-stream error codes or types that mean a passing overload or a rate limit (retried), or a refused credential. */
export interface StreamErrorCodes {
  overloaded?: ReadonlySet<string>;
  rateLimited?: ReadonlySet<string>;
  auth?: ReadonlySet<string>;
}

/**
 * A provider's in-stream error event as a failure (Anthropic's `error` event, Responses' `error` and `response.failed`,
 * a Chat Completions `{"error":…}` chunk). `body` is the object that holds the error as an HTTP error body would
 * (`{"error":{…}}`, or the error's own fields at its top): its category is `errorCategory`'s, so a refusal as over the
 * window is `context_length_exceeded` whether the server says it by code, type or message, exactly as in an HTTP body.
 * `own` is the dialect's code or type, which decides what `codes` name (as an HTTP status does): a passing overload or
 * rate limit (retried), a refused credential, none of them an overflow whatever the body says; anything else is
 * `provider reported an error`, not retried. The category appended is `errorCategory`'s, else `own`; never the
 * message.
 */
export function streamErrorFailure(body: unknown, own: unknown, codes: StreamErrorCodes = {}): ProviderFailure {
  const c = typeof own === "string" ? own : "";
  const passing = codes.overloaded?.has(c) === true || codes.rateLimited?.has(c) === true || codes.auth?.has(c) === true;
  const category = errorCategory(body, !passing) ?? safeCategory(own);
  if (codes.overloaded?.has(c) === true) return new ProviderFailure("http", withCategory(LABELS.overloaded, category), true);
  if (codes.rateLimited?.has(c) === true) return new ProviderFailure("http", withCategory(LABELS.rateLimited, category), true);
  if (codes.auth?.has(c) === true) return new ProviderFailure("auth", withCategory(LABELS.auth, category), false);
  return new ProviderFailure("http", withCategory(LABELS.providerError, category), false);
}

/** `label (category)`, or the label alone without a category. */
export function withCategory(label: BaseLabel, category: unknown): ProviderLabel {
  const c = safeCategory(category);
  return c === undefined ? label : `${label} (${c})`;
}

/**
 * Internal failure signal. Thrown only inside provider modules and turned into one in-band
 * `error` event by the stream driver; it never escapes `Provider.stream()`.
 */
export class ProviderFailure extends Error {
  constructor(
    readonly kind: ProviderErrorKind,
    readonly label: ProviderLabel,
    readonly retryable: boolean,
    /** Server-suggested delay (Retry-After), ms; only meaningful when `retryable`. */
    readonly retryAfterMs?: number,
  ) {
    super(label);
    this.name = "ProviderFailure";
  }

  /**
   * The same failure, its label saying how many attempts were made (`… (HTTP 500; 3 attempts)`, `… (3 attempts)`). A
   * consumer matching a label's end or whole text matches `withoutAttempts` of it.
   */
  afterAttempts(n: number): ProviderFailure {
    const l: string = this.label;
    const label = (l.endsWith(")") ? `${l.slice(0, -1)}; ${n} attempts)` : `${l} (${n} attempts)`) as ProviderLabel;
    return new ProviderFailure(this.kind, label, this.retryable, this.retryAfterMs);
  }

  toEvent(): ProviderEvent {
    return { type: "error", kind: this.kind, retryable: this.retryable, message: this.label };
  }
}

/** A label as it was before `afterAttempts`: its `; N attempts` (or ` (N attempts)`) tail taken off. */
export function withoutAttempts(label: string): string {
  return label.replace(/ \(\d+ attempts\)$/, "").replace(/; \d+ attempts\)$/, ")");
}

/** Node's codes for a TLS certificate it would not accept (OpenSSL's verify errors, and a name mismatch). */
const CERTIFICATE_CODE = /CERT|SELF_SIGNED|UNABLE_TO_(?:VERIFY|GET_ISSUER)|ALTNAME/;

/**
 * A request that got no response: the connection failed (its error code appended when node gave one: `ECONNREFUSED`,
 * `ENOTFOUND`, `ECONNRESET`…), retried; or the provider's TLS certificate was not accepted (its code appended), not
 * retried, since another attempt would be refused alike. A code is an identifier (`safeCategory`), never free text.
 */
export function connectFailure(err: unknown): ProviderFailure {
  const code = typeof err === "object" && err !== null ? (err as { code?: unknown }).code : undefined;
  if (typeof code === "string" && CERTIFICATE_CODE.test(code)) return new ProviderFailure("network", withCategory(LABELS.certificate, code), false);
  // The proxy's refusal (`PROXY_HTTP_407`…) or an unusable proxy setting: named apart from the provider's connection.
  if (typeof code === "string" && code.startsWith("PROXY_")) return new ProviderFailure("network", withCategory(LABELS.proxy, code), !/^PROXY_(?:SCHEME|URL)_/.test(code));
  return new ProviderFailure("network", withCategory(LABELS.network, code), true);
}

/**
 * A stream that sent no event for `ms` (before its response head, or between two events), cut off: retried while
 * nothing was yielded, like a connection failure. The label names the timeout (`… (300 s)`), a number we chose, and
 * says when the server did send SSE comments meanwhile (`heartbeats`: a proxy keeping a dead upstream's stream open).
 */
export function stalledFailure(ms: number, heartbeats = false): ProviderFailure {
  const span = ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
  return new ProviderFailure("network", `${heartbeats ? LABELS.heartbeatOnly : LABELS.stalled} (${span})`, true);
}

/**
 * A 2xx answer that is not a server-sent event stream (a web page, a whole JSON body), judged by its content type:
 * not retried (the same request gets the same answer). The label names the kind of body from a fixed list, never
 * the header's own text: `… (HTML page)`, `… (JSON body)`, `… (plain text)`, `… (no content type)`, `… (other content)`.
 */
export function notStreamFailure(contentType: string | null): ProviderFailure {
  const t = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  const kind =
    t === ""
      ? "no content type"
      : t === "text/html" || t === "application/xhtml+xml"
        ? "HTML page"
        : t === "application/json" || t.endsWith("+json")
          ? "JSON body"
          : t === "text/plain"
            ? "plain text"
            : "other content";
  return new ProviderFailure("protocol", `${LABELS.notStream} (${kind})`, false);
}

/** Whether a response's content type says it is an event stream (`text/event-stream`, parameters aside). */
export function isEventStream(contentType: string | null): boolean {
  return (contentType ?? "").split(";")[0]!.trim().toLowerCase() === "text/event-stream";
}

export const limitFailure = (label: ProviderLabel): ProviderFailure => new ProviderFailure("limit", label, false);
export const protocolFailure = (): ProviderFailure => new ProviderFailure("protocol", LABELS.malformed, false);
export const abortedFailure = (): ProviderFailure => new ProviderFailure("aborted", LABELS.aborted, false);

/**
 * Maps a non-success HTTP status to a failure; `retryAfterMs` comes from the caller's header parse,
 * `category` from `errorCategory` of the error body (appended after the status when present).
 */
export function statusFailure(status: number, retryAfterMs?: number, category?: string): ProviderFailure {
  // The status is a number we parsed and the category an identifier, so the label holds no provider text.
  const c = safeCategory(category);
  const tail = `(HTTP ${status}${c === undefined ? "" : ` ${c}`})` as const;
  if (status === 401 || status === 403) return new ProviderFailure("auth", `${LABELS.auth} ${tail}`, false);
  if (status === 429) return new ProviderFailure("http", `${LABELS.rateLimited} ${tail}`, true, retryAfterMs);
  // Too many bytes (Anthropic's `request_too_large` past 32 MB, a proxy's body limit): not a provider outage.
  if (status === 413) return new ProviderFailure("http", `${LABELS.tooLarge} ${tail}`, false);
  if (status === 408 || status >= 500) return new ProviderFailure("http", `${LABELS.overloaded} ${tail}`, true, retryAfterMs);
  return new ProviderFailure("http", `${LABELS.http} ${tail}`, false);
}
