/**
 * Client preflight (§Client preflight, §Advertised limits): decides from a successful `initialize` payload whether
 * this client can safely consume the service, before any mutation is sent.
 *
 * Contract:
 * - The client keeps its own `LocalBounds`. Before initialization they are the decoding bounds; afterwards the
 *   decoding bounds are the advertised ones, which must each be within the local ones (a server that may send a
 *   larger record, payload, string, nesting or collection than this client supports is rejected, never clamped).
 *   Nothing is ever allocated from an advertised number.
 * - All 16 known limits are required positive safe integers with the same value in `limits` and
 *   `capabilities.limits`; unknown limit keys must be positive safe integers too.
 * - The advertised event set must be exactly understood: every advertised name is one of the six v1 events, and
 *   this client supports only the profile that advertises all six (no earlier profile without `turn.activity`).
 * - `activity` is required with its known flags as booleans, `events:true`, and no approval/steering features
 *   (this client cannot answer them); `max_summary_bytes` is a positive integer within `max_string_bytes`.
 * Failures throw `IncompatibleServiceError` (semantic mismatch) or `DecodeError` (malformed payload).
 */
import type { DecodeBounds } from "./envelope.js";
import { IncompatibleServiceError } from "./errors.js";
import { arr, bool, count, countValue, fail, has, obj, str, strValue, type Obj } from "./validate.js";

export const PROTOCOL_VERSION = 1;

export const EVENTS = [
  "turn.started",
  "turn.assistant_delta",
  "turn.activity",
  "turn.terminal",
  "auth.login.progress",
  "auth.login.terminal",
] as const;
export type EventName = (typeof EVENTS)[number];

export type Operation =
  | "initialize" | "status" | "capabilities"
  | "session.list" | "session.create" | "session.open" | "session.replay" | "session.close"
  | "turn.start" | "turn.cancel"
  | "auth.status" | "auth.login.start" | "auth.login.callback" | "auth.login.cancel" | "auth.logout"
  | "catalog.providers" | "catalog.models" | "catalog.refresh" | "config.get" | "config.set";

/** What this client can decode. Advertised output bounds must not exceed these. */
export interface LocalBounds extends DecodeBounds {
  /** Page sizes the client asks for: min(this, advertised). */
  maxPageItems: number;
}

export const DEFAULT_LOCAL_BOUNDS: Readonly<LocalBounds> = Object.freeze({
  maxRecordBytes: 1 << 20,
  maxPayloadBytes: 512 * 1024,
  maxStringBytes: 256 * 1024,
  maxJsonDepth: 64,
  maxArrayItems: 1024,
  maxObjectFields: 1024,
  maxIdBytes: 256,
  maxNameBytes: 128,
  maxErrorMessageBytes: 4096,
  maxPageItems: 32,
});

export const KNOWN_LIMITS = [
  "max_record_bytes",
  "max_payload_bytes",
  "max_error_message_bytes",
  "max_id_bytes",
  "max_name_bytes",
  "max_string_bytes",
  "max_json_depth",
  "max_array_items",
  "max_object_fields",
  "max_negotiation_items",
  "max_session_attachments",
  "max_session_page_items",
  "max_session_replay_page_bytes",
  "max_session_replay_window_bytes",
  "max_session_list_scan_entries",
  "max_catalog_page_items",
] as const;
export type KnownLimit = (typeof KNOWN_LIMITS)[number];
export type ServiceLimits = Record<KnownLimit, number>;

export interface ActivityCapabilities {
  events: boolean;
  approvals: boolean;
  steering: boolean;
  mcp_server_lifecycle: boolean;
  mcp_tool_activity: boolean;
  subagents: boolean;
  raw_tool_output: boolean;
  activity_replay: boolean;
  max_summary_bytes: number;
}

/** The accepted profile: what the rest of the client decodes and sends against. */
export interface Profile {
  protocolVersion: 1;
  serverName: string;
  serverVersion: string;
  limits: ServiceLimits;
  operations: ReadonlySet<string>;
  activity: ActivityCapabilities;
}

/** Decodes one limits map: known keys required, every key a positive safe integer. */
function decodeLimits(v: unknown, what: string): { known: ServiceLimits; all: Map<string, number> } {
  const o = obj(v, what);
  const all = new Map<string, number>();
  for (const [k, val] of Object.entries(o)) {
    if (typeof val !== "number" || !Number.isSafeInteger(val) || val <= 0) fail(`${what}.${k} must be a positive integer`);
    all.set(k, val);
  }
  const known = {} as ServiceLimits;
  for (const k of KNOWN_LIMITS) {
    const n = all.get(k);
    if (n === undefined) fail(`${what}.${k} is required`);
    known[k] = n;
  }
  return { known, all };
}

function nameList(o: Obj, k: string, what: string, maxItems: number, maxBytes: number): string[] {
  return arr(o, k, what, maxItems).map((x, i) => strValue(x, `${what}.${k}[${i}]`, { maxBytes }));
}

const ACTIVITY_FLAGS = ["events", "approvals", "steering", "mcp_server_lifecycle", "mcp_tool_activity", "subagents", "raw_tool_output", "activity_replay"] as const;

export function preflight(payload: Obj, local: LocalBounds, required: readonly Operation[]): Profile {
  const what = "initialize";
  const pv = count(payload, "protocol_version", what);
  const serverName = str(payload, "server_name", what, { maxBytes: 256 });
  const serverVersion = str(payload, "server_version", what, { maxBytes: 256 });
  const top = decodeLimits(has(payload, "limits") ? payload.limits : fail(`${what}.limits is required`), `${what}.limits`);
  const caps = obj(has(payload, "capabilities") ? payload.capabilities : fail(`${what}.capabilities is required`), `${what}.capabilities`);
  const capLimits = decodeLimits(has(caps, "limits") ? caps.limits : fail(`${what}.capabilities.limits is required`), `${what}.capabilities.limits`);
  const maxItems = local.maxArrayItems;
  const versions = arr(caps, "protocol_versions", "capabilities", maxItems).map((x, i) => {
    const n = countValue(x, `capabilities.protocol_versions[${i}]`);
    if (n > 0xffff) fail("capabilities.protocol_versions holds a non-u16 value");
    return n;
  });
  const operations = nameList(caps, "operations", "capabilities", maxItems, local.maxNameBytes);
  const events = nameList(caps, "events", "capabilities", maxItems, local.maxNameBytes);
  const transports = nameList(caps, "transports", "capabilities", maxItems, local.maxNameBytes);
  const act = obj(has(caps, "activity") ? caps.activity : fail("capabilities.activity is required (turn.activity is advertised)"), "capabilities.activity");
  const flags = {} as Record<(typeof ACTIVITY_FLAGS)[number], boolean>;
  for (const f of ACTIVITY_FLAGS) flags[f] = bool(act, f, "capabilities.activity");
  const activity: ActivityCapabilities = { ...flags, max_summary_bytes: count(act, "max_summary_bytes", "capabilities.activity") };

  const incompatible = (reason: string): never => {
    throw new IncompatibleServiceError(reason);
  };
  if (pv !== PROTOCOL_VERSION) incompatible(`selected protocol version ${pv} is not 1`);
  if (!versions.includes(PROTOCOL_VERSION)) incompatible("protocol version 1 is not advertised");
  if (!transports.includes("stdio")) incompatible("the stdio transport is not advertised");
  for (const e of events) if (!(EVENTS as readonly string[]).includes(e)) incompatible(`unknown event '${e.slice(0, 64)}' is advertised`);
  for (const e of EVENTS) if (!events.includes(e)) incompatible(`event '${e}' is not advertised (unsupported profile)`);
  const ops = new Set(operations);
  for (const op of required) if (!ops.has(op)) incompatible(`required operation '${op}' is not advertised`);

  if (top.all.size !== capLimits.all.size) incompatible("the two advertised limit maps differ");
  for (const [k, v] of top.all) if (capLimits.all.get(k) !== v) incompatible(`advertised limit ${k} differs between the two limit maps`);
  const L = top.known;
  const within: Array<[KnownLimit, number]> = [
    ["max_record_bytes", local.maxRecordBytes],
    ["max_payload_bytes", local.maxPayloadBytes],
    ["max_string_bytes", local.maxStringBytes],
    ["max_json_depth", local.maxJsonDepth],
    ["max_array_items", local.maxArrayItems],
    ["max_object_fields", local.maxObjectFields],
    ["max_id_bytes", local.maxIdBytes],
    ["max_name_bytes", local.maxNameBytes],
    ["max_error_message_bytes", local.maxErrorMessageBytes],
    ["max_session_replay_page_bytes", local.maxPayloadBytes],
  ];
  for (const [k, mine] of within) if (L[k] > mine) incompatible(`advertised ${k} exceeds this client's bound`);
  if (L.max_payload_bytes >= L.max_record_bytes) incompatible("max_payload_bytes does not fit in max_record_bytes");

  if (!activity.events) incompatible("turn.activity is advertised but activity.events is false");
  if (activity.approvals || activity.steering) incompatible("approvals/steering are not supported by this client");
  if (activity.max_summary_bytes === 0 || activity.max_summary_bytes > L.max_string_bytes) incompatible("activity.max_summary_bytes is out of range");
  return { protocolVersion: PROTOCOL_VERSION, serverName, serverVersion, limits: L, operations: ops, activity };
}
