/**
 * App-service error codes and their fixed messages. Messages never include request data.
 * One table: adding a code here is the only way to make it reachable on the wire.
 */
export const ERROR_MESSAGES = {
  invalid_json: "The record is not valid JSON.",
  record_too_large: "The JSONL record exceeds the record limit.",
  invalid_request: "The request envelope is invalid.",
  payload_too_large: "The compact JSON payload exceeds its byte limit.",
  limit_exceeded: "A protocol limit was exceeded.",
  unsupported_version: "The protocol version is unsupported.",
  unsupported_capability: "A requested capability is unsupported.",
  unsupported_operation: "The method is not implemented.",
  not_initialized: "Initialization has not completed successfully.",
  invalid_payload: "The payload is invalid for this operation.",
  duplicate_request_id: "The request ID is already in flight.",
  too_many_active_turns: "The service has reached its active-turn limit.",
  session_busy: "The session is busy.",
  session_unavailable: "The session is unavailable.",
  invalid_session_id: "The session ID is invalid.",
  unknown_turn: "The turn is unknown or already terminal.",
  auth_busy: "A login is already active or its callback was already submitted.",
  unknown_login: "The login is unknown or already terminal.",
  provider_unavailable: "The provider does not support this operation.",
  confirmation_required: "Logout needs explicit confirmation.",
  configuration_unavailable: "Settings could not be read.",
  configuration_busy: "A catalog or configuration request is running; retry after its response.",
  catalog_refresh_failed: "Catalog refresh failed; check provider readiness and retry.",
  settings_write_failed: "The settings update could not be persisted; inspect local settings and retry.",
  invalid_scope: "The scope is unknown or the setting requires global scope.",
  invalid_selection: "The provider or model is unknown, unsafe, or disabled.",
  unsupported_reasoning: "The reasoning choice is unsupported for the target model.",
  catalog_unavailable: "A usable catalog is required; refresh first.",
  catalog_stale: "A fresh catalog is required; refresh first.",
  internal_error: "The service could not handle the request.",
} as const;

export type ErrorCode = keyof typeof ERROR_MESSAGES;

export interface WireError {
  code: ErrorCode;
  message: string;
}

export function wireError(code: ErrorCode): WireError {
  return { code, message: ERROR_MESSAGES[code] };
}

/** A typed failure a store/runtime function can throw for the adapter to map to a wire code. */
export class BerthError extends Error {
  constructor(
    readonly code: ErrorCode,
    detail?: string,
  ) {
    super(detail ?? ERROR_MESSAGES[code]);
    this.name = "BerthError";
  }
}
