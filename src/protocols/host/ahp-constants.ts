/**
 * AHP constants the host needs at start: the root channel and the JSON-RPC error codes. Apart from ahp-schema.ts so
 * that modules using only these do not build the whole wire schema (hundreds of zod objects, ~100 ms of a daemon's
 * start) when they load.
 */
export const ROOT = "ahp-root://";

export const ErrorCodes = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  SessionNotFound: -32001,
  ProviderNotFound: -32002,
  SessionAlreadyExists: -32003,
  TurnInProgress: -32004,
  UnsupportedProtocolVersion: -32005,
  NotFound: -32008,
  PermissionDenied: -32009,
  AlreadyExists: -32010,
} as const;
