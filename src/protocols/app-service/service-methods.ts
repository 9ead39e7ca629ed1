/** `initialize`, `status`, `capabilities`: service discovery. */
import { LIMITS } from "./limits.js";
import { utf8Length } from "../../core/utf8.js";
import { isPlainObject } from "../../core/json-bounds.js";
import {
  EVENTS,
  OPERATIONS,
  PROTOCOL_VERSION,
  emptyPayload,
  onlyKeys,
  type MethodDescriptor,
  type MethodFamily,
  type ParseResult,
} from "./descriptor.js";

/** Feature flags advertised with the capabilities; unsupported features stay explicitly false. */
export const ACTIVITY_CAPABILITIES = Object.freeze({
  events: true,
  approvals: false,
  steering: false,
  mcp_server_lifecycle: false,
  mcp_tool_activity: true,
  subagents: true,
  raw_tool_output: false,
  activity_replay: false,
  max_summary_bytes: 2048,
});

export interface ServiceInfo {
  serverName: string;
  serverVersion: string;
  transports: readonly string[];
}

/** Process-wide negotiation state owned by the dispatcher. */
export interface InitState {
  initialized: boolean;
}

export interface ServiceMethodsDeps {
  info: ServiceInfo;
  state: InitState;
  /** Evaluated on every `status` from reloaded settings, auth and env; throws when they cannot be read. */
  providerAuthReady: () => Promise<boolean>;
}

export function capabilitiesPayload(info: ServiceInfo): Record<string, unknown> {
  return {
    protocol_versions: [PROTOCOL_VERSION],
    operations: [...OPERATIONS],
    events: [...EVENTS],
    transports: [...info.transports],
    limits: { ...LIMITS },
    activity: { ...ACTIVITY_CAPABILITIES },
  };
}

interface InitParams {
  requested: string[];
}

/** initialize payload rules: types first (invalid_payload), then list sizes (limit_exceeded), then version, then names. */
export function parseInitialize(p: Record<string, unknown>): ParseResult<InitParams> {
  if (!onlyKeys(p, ["supported_protocol_versions", "requested_capabilities"])) return { ok: false, error: "invalid_payload" };
  const versions = p.supported_protocol_versions;
  if (!Array.isArray(versions)) return { ok: false, error: "invalid_payload" };
  for (const v of versions)
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 0xffff) return { ok: false, error: "invalid_payload" };
  const caps = "requested_capabilities" in p ? p.requested_capabilities : [];
  if (!Array.isArray(caps)) return { ok: false, error: "invalid_payload" };
  for (const c of caps) if (typeof c !== "string") return { ok: false, error: "invalid_payload" };
  if (versions.length === 0 || versions.length > LIMITS.max_negotiation_items) return { ok: false, error: "limit_exceeded" };
  if (caps.length > LIMITS.max_negotiation_items) return { ok: false, error: "limit_exceeded" };
  for (const c of caps as string[]) if (utf8Length(c) > LIMITS.max_name_bytes) return { ok: false, error: "limit_exceeded" };
  if (!versions.includes(PROTOCOL_VERSION)) return { ok: false, error: "unsupported_version" };
  for (const c of caps as string[])
    if (!(OPERATIONS as readonly string[]).includes(c)) return { ok: false, error: "unsupported_capability" };
  return { ok: true, value: { requested: caps as string[] } };
}

export function serviceMethods(deps: ServiceMethodsDeps): MethodFamily {
  const initialize: MethodDescriptor<InitParams> = {
    method: "initialize",
    sessionId: "forbidden",
    preInit: true,
    parse: parseInitialize,
    handle() {
      deps.state.initialized = true;
      const caps = capabilitiesPayload(deps.info);
      return {
        payload: {
          protocol_version: PROTOCOL_VERSION,
          server_name: deps.info.serverName,
          server_version: deps.info.serverVersion,
          limits: { ...LIMITS },
          capabilities: caps,
        },
      };
    },
  };
  const status: MethodDescriptor<Record<string, never>> = {
    method: "status",
    sessionId: "forbidden",
    parse: emptyPayload,
    async handle() {
      try {
        const ready = await deps.providerAuthReady();
        return { payload: { service: "ready", provider_auth_ready: ready === true } };
      } catch {
        return { error: "internal_error" };
      }
    },
  };
  const capabilities: MethodDescriptor<Record<string, never>> = {
    method: "capabilities",
    sessionId: "forbidden",
    parse: emptyPayload,
    handle: () => ({ payload: capabilitiesPayload(deps.info) }),
  };
  return { descriptors: [initialize, status, capabilities] };
}

/** Used by families whose implementation has not landed: validate the payload is an object, answer unsupported_operation. */
export function pendingFamily(methods: ReadonlyArray<MethodDescriptor["method"]>, sessionId: MethodDescriptor["sessionId"] = "optional"): MethodFamily {
  return {
    descriptors: methods.map((method) => ({
      method,
      sessionId,
      parse: (p: Record<string, unknown>) => (isPlainObject(p) ? { ok: true as const, value: p } : { ok: false as const, error: "invalid_payload" as const }),
      handle: () => ({ error: "unsupported_operation" as const }),
    })),
  };
}
