/**
 * `berth/client`: the app-service v1 client library. Depends only on the wire contract (and src/core helpers);
 * it never reads MC_HOME, settings, auth or session files.
 */
export { AppServiceClient, DEFAULT_REQUIRED_OPERATIONS, type ClientOptions, type ReplayOptions, type ReplayStep } from "./client.js";
export { spawnService, type SpawnOptions, type ServiceHandle } from "./spawn.js";
export { ConnectionClosedError, IncompatibleServiceError, ProtocolError, RequestError, ServiceError, KNOWN_ERROR_CODES } from "./errors.js";
export { Turn, Login, type TurnUpdate } from "./streams.js";
export type { Activity, TurnTerminal, TurnStatus, LoginProgress, LoginTerminal, LoginTerminalState } from "./events.js";
export type * from "./payloads.js";
export { DEFAULT_LOCAL_BOUNDS, EVENTS, KNOWN_LIMITS, type LocalBounds, type Operation, type Profile, type ServiceLimits, type ActivityCapabilities } from "./preflight.js";
