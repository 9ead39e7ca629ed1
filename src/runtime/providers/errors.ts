/**
 * Provider failures as fixed, safe labels. A provider body, URL, header or credential never
 * becomes part of a label: every `message` a caller sees comes from this file.
 */
import type { ProviderErrorKind, ProviderEvent } from "../types.js";

export const LABELS = {
  aborted: "request aborted",
  credential: "provider credential unavailable",
  auth: "provider rejected the credential",
  http: "provider returned an error status",
  rateLimited: "provider rate limit",
  overloaded: "provider overloaded or unavailable",
  providerError: "provider reported an error",
  network: "provider connection failed",
  disconnect: "provider stream ended unexpectedly",
  malformed: "malformed provider stream",
  eventLimit: "provider event exceeds size limit",
  responseLimit: "provider response exceeds size limit",
  textLimit: "assistant text exceeds size limit",
  toolArgsLimit: "tool arguments exceed size limit",
  toolCountLimit: "too many tool calls in one response",
  badToolArgs: "tool arguments are not a JSON object",
} as const;

export type ProviderLabel = (typeof LABELS)[keyof typeof LABELS];

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

  toEvent(): ProviderEvent {
    return { type: "error", kind: this.kind, retryable: this.retryable, message: this.label };
  }
}

export const limitFailure = (label: ProviderLabel): ProviderFailure => new ProviderFailure("limit", label, false);
export const protocolFailure = (): ProviderFailure => new ProviderFailure("protocol", LABELS.malformed, false);
export const abortedFailure = (): ProviderFailure => new ProviderFailure("aborted", LABELS.aborted, false);

/** Maps a non-success HTTP status to a failure; `retryAfterMs` comes from the caller's header parse. */
export function statusFailure(status: number, retryAfterMs?: number): ProviderFailure {
  if (status === 401 || status === 403) return new ProviderFailure("auth", LABELS.auth, false);
  if (status === 429) return new ProviderFailure("http", LABELS.rateLimited, true, retryAfterMs);
  if (status === 408 || status >= 500) return new ProviderFailure("http", LABELS.overloaded, true, retryAfterMs);
  return new ProviderFailure("http", LABELS.http, false);
}
