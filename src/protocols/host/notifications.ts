/**
 * Backend protocol v6 typed `notification` frames and provider `root_action` (spec "Events"):
 * `root/progress`, `otlp/export{Logs,Traces,Metrics}` and `auth/required` relayed to AHP clients,
 * and `root/configChanged` published on the root channel. Contracts:
 *  - checked in this order: version, method, official payload shape, a duplicated `channel`
 *    field agreeing, ownership, capability advertisement, then the subscription relayed to;
 *  - `root/progress` goes only to the client whose `createSession` carried that `progressToken`,
 *    to that session's provider, and only while that client is subscribed to the root channel;
 *    progress never decreases, and the frame with `progress === total` retires the token;
 *  - `otlp/*` is accepted only from a provider connection that advertised the signal in its v6
 *    `provider_hello.telemetry`, and relayed to subscribers of the host's one `ahp-otlp://` channel
 *    per signal;
 *  - `auth/required` names a channel the sender owns: its session or one of its chats, or, for a
 *    provider connection, the root channel or a session it currently routes;
 *  - nothing here is sequenced or replayed (AHP protocol notifications are ephemeral).
 */
import { z } from "zod";
import { ROOT } from "./ahp-constants.js";
import { RESOURCE_MIN_VERSION } from "./mcp-lifecycle.js";
import type { Json, Subscriber } from "./model.js";
import type { HostState } from "./state.js";
import type { BackendConn } from "./backend-conn.js";

export const OTLP_SIGNALS = { logs: "otlp/exportLogs", traces: "otlp/exportTraces", metrics: "otlp/exportMetrics" } as const;
type Signal = keyof typeof OTLP_SIGNALS;
export const otlpChannel = (signal: Signal): string => `ahp-otlp://berth/${signal}`;
/** Progress tokens tracked at once (the oldest is forgotten first). */
export const MAX_PROGRESS_TOKENS = 1024;

const Telemetry = z.object({ logs: z.boolean().optional(), traces: z.boolean().optional(), metrics: z.boolean().optional() }).strict();
const Progress = z.object({
  channel: z.literal(ROOT),
  progressToken: z.string().min(1).max(512),
  progress: z.number().min(0),
  total: z.number().min(0).optional(),
  message: z.string().max(4096).optional(),
}).strict();
const Otlp = z.object({ channel: z.string(), payload: z.record(z.string(), z.unknown()) }).strict();
const AuthRequired = z.object({
  channel: z.string().min(1).max(4096),
  resource: z.object({ resource: z.string().min(1).max(4096) }).passthrough(),
  reason: z.enum(["required", "expired"]).optional(),
}).strict();
const RootConfigChanged = z.object({ type: z.literal("root/configChanged"), config: z.record(z.string(), z.unknown()), replace: z.boolean().optional() }).strict();

interface ProgressEntry {
  provider: string;
  sub: Subscriber;
  last: number;
}

class Notifications {
  readonly telemetry = new WeakMap<BackendConn, Set<Signal>>();
  readonly progress = new Map<string, ProgressEntry>();
  rootConfig: Json | undefined;
  constructor(readonly st: HostState) {}

  /** Signals some live provider connection advertises (for `InitializeResult.telemetry`). */
  advertised(conns: Iterable<BackendConn>): Json | undefined {
    const out: Json = {};
    for (const c of conns) for (const s of this.telemetry.get(c) ?? []) out[s] = otlpChannel(s);
    return Object.keys(out).length > 0 ? out : undefined;
  }
}
const all = new WeakMap<HostState, Notifications>();
function hub(st: HostState): Notifications {
  let n = all.get(st);
  if (!n) all.set(st, (n = new Notifications(st)));
  return n;
}

/** A v6 `provider_hello.telemetry` advertisement; null, or why it is refused. */
export function providerTelemetry(st: HostState, conn: BackendConn, version: number, raw: unknown): string | null {
  if (raw === undefined) return null;
  if (version < RESOURCE_MIN_VERSION) return "telemetry requires protocol version 6";
  const p = Telemetry.safeParse(raw);
  if (!p.success) return "telemetry must be an object of logs/traces/metrics booleans";
  const set = new Set<Signal>();
  for (const s of Object.keys(OTLP_SIGNALS) as Signal[]) if (p.data[s]) set.add(s);
  hub(st).telemetry.set(conn, set);
  return null;
}

/** `InitializeResult.telemetry` for a new client, or undefined when no provider exports any signal. */
export function initializeTelemetry(st: HostState): Json | undefined {
  return hub(st).advertised(new Set(st.providers.values()) as Set<BackendConn>);
}

export function isOtlpChannel(uri: string): boolean {
  return (Object.keys(OTLP_SIGNALS) as Signal[]).some((s) => otlpChannel(s) === uri);
}

/** Remember a `createSession` progress token for the provider it goes to and the asking client. */
export function registerProgress(st: HostState, params: Json, sub: Subscriber): void {
  const token = params.progressToken;
  if (typeof token !== "string" || token.length === 0 || token.length > 512) return;
  const provider = typeof params.provider === "string" ? params.provider : st.providers.size === 1 ? [...st.providers.keys()][0] : undefined;
  if (provider === undefined) return;
  const n = hub(st);
  n.progress.delete(token);
  n.progress.set(token, { provider, sub, last: -1 });
  if (n.progress.size > MAX_PROGRESS_TOKENS) n.progress.delete(n.progress.keys().next().value as string);
}

function relay(subs: Iterable<Subscriber> | undefined, method: string, params: Json): void {
  if (!subs) return;
  const text = JSON.stringify({ jsonrpc: "2.0", method, params });
  for (const s of subs) s.sendRaw(text);
}

/** A backend `notification` frame. */
export function onNotification(st: HostState, conn: BackendConn, f: Json): void {
  const version = conn.kind === "session" ? (conn.route?.version ?? conn.version) : conn.version;
  if (version < RESOURCE_MIN_VERSION) return conn.error("unsupported_version", "notification requires protocol version 6");
  const method = f.method;
  const params = f.params as Json | undefined;
  const known = method === "root/progress" || method === "auth/required" || Object.values(OTLP_SIGNALS).includes(method as never);
  if (typeof method !== "string" || !known) return conn.error("validation_error", "unknown notification method (root/progress, auth/required, otlp/exportLogs, otlp/exportTraces, otlp/exportMetrics)");
  if (!params || typeof params !== "object" || Array.isArray(params)) return conn.error("validation_error", "notification needs params");
  if (f.channel !== undefined && f.channel !== params.channel) return conn.error("validation_error", "the frame's channel and params.channel disagree");
  const n = hub(st);
  if (method === "root/progress") {
    const p = Progress.safeParse(params);
    if (!p.success) return conn.error("validation_error", `invalid root/progress: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim());
    if (conn.kind !== "provider") return conn.error("authority_error", "root/progress is only valid on a provider connection");
    const e = n.progress.get(p.data.progressToken);
    if (!e || !conn.providers.some((x) => x.id === e.provider) || st.providers.get(e.provider) !== conn)
      return conn.error("authority_error", "that progress token does not belong to a creation sent to this provider");
    if (p.data.progress < e.last) return conn.error("validation_error", "progress must not decrease");
    if (p.data.total !== undefined && p.data.progress > p.data.total) return conn.error("validation_error", "progress must not exceed total");
    e.last = p.data.progress;
    if (p.data.total !== undefined && p.data.progress === p.data.total) n.progress.delete(p.data.progressToken);
    if (st.subs.get(ROOT)?.has(e.sub)) relay([e.sub], method, p.data);
    return;
  }
  if (method === "auth/required") {
    const p = AuthRequired.safeParse(params);
    if (!p.success) return conn.error("validation_error", `invalid auth/required: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim());
    if (!owns(st, conn, p.data.channel)) return conn.error("authority_error", "auth/required names a channel this connection does not own");
    return relay(st.subs.get(p.data.channel), method, p.data);
  }
  const signal = (Object.keys(OTLP_SIGNALS) as Signal[]).find((s) => OTLP_SIGNALS[s] === method)!;
  const p = Otlp.safeParse(params);
  if (!p.success) return conn.error("validation_error", `invalid ${method}: params are {channel, payload}`);
  if (conn.kind !== "provider") return conn.error("authority_error", `${method} is only valid on a provider connection`);
  if (!n.telemetry.get(conn)?.has(signal)) return conn.error("validation_error", `${method} was not advertised in provider_hello.telemetry`);
  if (p.data.channel !== otlpChannel(signal)) return conn.error("validation_error", `${method} must name the host's channel ${otlpChannel(signal)}`);
  relay(st.subs.get(p.data.channel), method, p.data);
}

function owns(st: HostState, conn: BackendConn, channel: string): boolean {
  const routes = conn.kind === "session" ? (conn.route ? [conn.route] : []) : [...conn.current.values()];
  if (conn.kind === "provider" && channel === ROOT) return conn.providers.some((p) => st.providers.get(p.id) === conn);
  const session = st.sessions.get(channel) ?? st.sessions.get(st.chatIndex.get(channel)?.sessionUri ?? "");
  return session !== undefined && routes.some((r) => r.retired === "no" && session.route === r);
}

/** A provider `root_action`: only an official `root/configChanged`, merged (or replaced) into the root config. */
export function onRootAction(st: HostState, conn: BackendConn, f: Json): void {
  if (conn.kind !== "provider") return conn.error("protocol_error", "root_action is only valid on a provider connection");
  if (conn.version < RESOURCE_MIN_VERSION) return conn.error("unsupported_version", "root_action requires protocol version 6");
  const p = RootConfigChanged.safeParse(f.action);
  if (!p.success) return conn.error("validation_error", "root_action carries only an official root/configChanged {config, replace?}");
  const n = hub(st);
  n.rootConfig = p.data.replace ? { ...p.data.config } : { ...(n.rootConfig ?? {}), ...p.data.config };
  st.publish(ROOT, p.data);
}

/** The root state's `config` ({schema, values}) once a provider set any value; else undefined. */
export function rootConfig(st: HostState): Json | undefined {
  const values = hub(st).rootConfig;
  if (!values) return undefined;
  const properties: Json = {};
  for (const [k, v] of Object.entries(values)) properties[k] = { type: v === null ? "null" : Array.isArray(v) ? "array" : typeof v === "object" ? "object" : typeof v, title: k };
  return { schema: { type: "object", properties }, values };
}
