/**
 * Typed client failures. Each says who is at fault:
 * - `IncompatibleServiceError`: client preflight rejection. The service answered `initialize`, but this client
 *   cannot safely consume what it advertised (version, transport, operations, events, limits). Every later
 *   request is refused locally with this error; nothing is sent.
 * - `ProtocolError`: a received record broke the wire contract. The stream is no longer trusted: every pending
 *   request, turn and login fails with it, the client stops reading and sends nothing more.
 * - `ConnectionClosedError`: the service's output ended or broke. A turn or login still open is *not* complete.
 * - `ServiceError`: a valid, correlated error response. `known` is false for an unfamiliar code (still a failure).
 * - `RequestError`: the caller's request fails a local bound or rule and was not sent.
 */
export class IncompatibleServiceError extends Error {
  constructor(readonly reason: string) {
    super(`the service is incompatible with this client: ${reason}`);
    this.name = "IncompatibleServiceError";
  }
}

export class ProtocolError extends Error {
  constructor(readonly reason: string) {
    super(`protocol mismatch: ${reason}`);
    this.name = "ProtocolError";
  }
}

export class ConnectionClosedError extends Error {
  constructor(reason = "the service output ended") {
    super(reason);
    this.name = "ConnectionClosedError";
  }
}

/** The error codes of app-service v1 (§Errors and validation). */
export const KNOWN_ERROR_CODES = [
  "invalid_json",
  "record_too_large",
  "invalid_request",
  "payload_too_large",
  "limit_exceeded",
  "unsupported_version",
  "unsupported_capability",
  "unsupported_operation",
  "not_initialized",
  "invalid_payload",
  "duplicate_request_id",
  "too_many_active_turns",
  "session_busy",
  "session_unavailable",
  "invalid_session_id",
  "unknown_turn",
  "auth_busy",
  "unknown_login",
  "provider_unavailable",
  "confirmation_required",
  "configuration_unavailable",
  "configuration_busy",
  "catalog_refresh_failed",
  "settings_write_failed",
  "invalid_scope",
  "invalid_selection",
  "unsupported_reasoning",
  "catalog_unavailable",
  "catalog_stale",
  "internal_error",
] as const;
export type KnownErrorCode = (typeof KNOWN_ERROR_CODES)[number];

export class ServiceError extends Error {
  /** Whether `code` is one of the v1 codes; an unknown code is a generic failure, never retried automatically. */
  readonly known: boolean;
  constructor(
    readonly method: string,
    readonly code: string,
    readonly serviceMessage: string,
  ) {
    super(`${method} failed: ${code}`);
    this.name = "ServiceError";
    this.known = (KNOWN_ERROR_CODES as readonly string[]).includes(code);
  }
}

export class RequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RequestError";
  }
}
