/**
 * Protected-resource authentication review (spec "Protected-resource authentication review"):
 * the read-only `paratenic/authContext` extension and the official root `authenticate` command.
 * Contracts:
 *  - a review is a change-detection digest over the host identity, the target's logical backend
 *    registration, the target and the complete challenge metadata; it is not a credential;
 *  - `authenticate` recomputes the review right before admission: any change is refused before
 *    anything is sent. Without a review, exactly one advertised target must match the resource
 *    (at most 8192 entries are visited); a token is never distributed to several targets;
 *  - the token (at most 64 KiB) travels only in the one backend command frame: it is never stored,
 *    logged, echoed or put in a receipt;
 *  - queue refusal means not sent; after admission a deadline or lost connection answers
 *    `data.outcome: "indeterminate"` with the command ID and is never retried; an explicit backend
 *    refusal answers fixed text, never the backend's.
 */
import { createHash } from "node:crypto";
import { z } from "zod";
import { ErrorCodes, ROOT } from "./ahp-constants.js";
import { RpcError } from "./ahp-requests.js";
import { mcpHub } from "./mcp-channels.js";
import { RESOURCE_MIN_VERSION } from "./mcp-lifecycle.js";
import { findTool, type CommandOutcome, type Json, type SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import type { BackendConn } from "./backend-conn.js";
import type { LogicalRoute } from "./logical-route.js";
import { hostRefused } from "./commands.js";

/** Largest accepted token, in UTF-8 bytes. */
export const MAX_TOKEN_BYTES = 64 * 1024;
/** Largest encoded challenge metadata a review may bind. */
export const MAX_REVIEW_BYTES = 64 * 1024;
/** Entries a legacy (unreviewed) lookup may visit. */
export const LEGACY_LOOKUP_BOUND = 8192;
export const MAX_SCOPES = 64;

const id = z.string().min(1).max(512);
const Target = z.discriminatedUnion("type", [
  z.object({ type: z.literal("provider"), provider: id }).strict(),
  z.object({ type: z.literal("mcp_server"), session: id, serverId: id }).strict(),
  z.object({ type: z.literal("tool_call"), session: id, chat: id, turnId: id, toolCallId: id }).strict(),
]);
type Target = z.infer<typeof Target>;
const resource = z.string().min(1).max(4096);
const AuthContextParams = z.object({ channel: z.literal(ROOT), resource, target: Target });
const AuthenticateParams = z.object({
  channel: z.literal(ROOT).optional(),
  resource,
  token: z.string(),
  scopes: z.array(z.string().min(1).max(256)).max(MAX_SCOPES).optional(),
  _meta: z.object({ paratenicAuth: z.object({ review: z.string().max(256), target: Target }).optional() }).passthrough().optional(),
});

interface Resolved {
  /** The owning session (MCP-server and tool-call targets) or provider route (provider targets). */
  session?: SessionModel;
  /** The chat of a tool-call target (the command names it). */
  chat?: string;
  route: LogicalRoute | BackendConn;
  registration: string;
  version: number;
  target: Target;
  challenge: Json;
}

/** The target's current challenge, or why it has none. */
function resolve(st: HostState, res: string, target: Target): Resolved | string {
  if (target.type === "tool_call") {
    // An active MCP tool call paused by the backend's `chat/toolCallAuthRequired`.
    const s = st.sessions.get(target.session);
    const route = s?.route as LogicalRoute | undefined;
    const chat = st.chatIndex.get(target.chat);
    if (!s || !route || !chat || chat.sessionUri !== s.uri) return "no such chat in a connected session";
    const t = chat.activeTurn;
    const tc = t && t.id === target.turnId ? findTool(t, target.toolCallId) : undefined;
    if (!tc) return "no such tool call in the chat's active turn";
    if (tc.status !== "auth-required") return "the tool call is not waiting for authentication";
    const auth = tc.auth as Json;
    if ((auth.resource as Json | undefined)?.resource !== res) return "the resource does not match the tool call's challenge";
    return { session: s, chat: chat.uri, route, registration: route.logicalId, version: route.version, target, challenge: auth };
  }
  if (target.type === "provider") {
    const conn = st.providers.get(target.provider) as BackendConn | undefined;
    const info = conn?.providers.find((p) => p.id === target.provider);
    const challenge = info?.protectedResources?.find((r) => r.resource === res);
    if (!conn || !challenge) return "the provider does not advertise that protected resource";
    return { route: conn, registration: conn.connectionId, version: conn.version, target, challenge };
  }
  const s = st.sessions.get(target.session);
  const route = s?.route as LogicalRoute | undefined;
  const server = s ? mcpHub(st).server(s, target.serverId) : undefined;
  if (!s || !route || !server) return "no such MCP server in a connected session";
  const state = server.state;
  if (state.kind !== "authRequired") return "the MCP server is not waiting for authentication";
  if ((state.resource as Json | undefined)?.resource !== res) return "the resource does not match the server's challenge";
  return { session: s, route, registration: route.logicalId, version: route.version, target, challenge: state };
}

function reviewOf(st: HostState, r: Resolved, res: string): string {
  const bound = JSON.stringify({ host: st.hostId, registration: r.registration, instance: r.route.instanceId, target: r.target, resource: res, challenge: r.challenge });
  if (Buffer.byteLength(bound) > MAX_REVIEW_BYTES) throw new RpcError(ErrorCodes.InvalidParams, "the challenge metadata is too large to review (64 KiB bound)");
  return `v1.${createHash("sha256").update(bound).digest("base64url")}`;
}

/** `paratenic/authContext`: the non-secret review and the required scopes of one target. */
export function authContext(st: HostState, params: Json): Json {
  const p = AuthContextParams.safeParse(params);
  if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, "paratenic/authContext needs channel ahp-root://, resource and a typed target");
  const r = resolve(st, p.data.resource, p.data.target);
  if (typeof r === "string") throw new RpcError(ErrorCodes.NotFound, r);
  const scopes = r.target.type === "provider" ? undefined : r.challenge.requiredScopes;
  return { review: reviewOf(st, r, p.data.resource), required_scopes: Array.isArray(scopes) ? scopes : null };
}

/** Exactly one advertised target for a resource, for an unreviewed (legacy) request. */
function legacyTarget(st: HostState, res: string): Resolved {
  const found: Resolved[] = [];
  let visited = 0;
  const hub = mcpHub(st);
  const many = () => new RpcError(ErrorCodes.InvalidParams, "several targets advertise that resource: review one with paratenic/authContext first");
  for (const id of st.providers.keys()) {
    if (++visited > LEGACY_LOOKUP_BOUND) break;
    const r = resolve(st, res, { type: "provider", provider: id });
    if (typeof r !== "string") found.push(r);
    if (found.length > 1) throw many();
  }
  outer: for (const s of st.sessions.values()) {
    if (++visited > LEGACY_LOOKUP_BOUND) break;
    for (const c of hub.customizations(s) ?? []) {
      if (++visited > LEGACY_LOOKUP_BOUND) break outer;
      const r = resolve(st, res, { type: "mcp_server", session: s.uri, serverId: c.id as string });
      if (typeof r !== "string") found.push(r);
      if (found.length > 1) throw many();
    }
    for (const chat of s.chats.values()) {
      const t = chat.activeTurn;
      if (!t) continue;
      for (const part of t.responseParts) {
        if (++visited > LEGACY_LOOKUP_BOUND) break outer;
        const tc = part.kind === "toolCall" ? (part.toolCall as Json) : undefined;
        if (tc?.status !== "auth-required") continue;
        const r = resolve(st, res, { type: "tool_call", session: s.uri, chat: chat.uri, turnId: t.id, toolCallId: tc.toolCallId as string });
        if (typeof r !== "string") found.push(r);
        if (found.length > 1) throw many();
      }
    }
  }
  if (found.length === 0) throw new RpcError(ErrorCodes.InvalidParams, "no advertised target is waiting for that resource");
  return found[0]!;
}

/** The official root `authenticate` command. */
export async function authenticate(st: HostState, params: Json): Promise<Json> {
  const p = AuthenticateParams.safeParse(params);
  if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, "authenticate needs resource and token (and, when reviewed, _meta.paratenicAuth {review, target})");
  const { resource: res, token, scopes } = p.data;
  if (Buffer.byteLength(token) > MAX_TOKEN_BYTES) throw new RpcError(ErrorCodes.InvalidParams, "the token exceeds the 64 KiB bound; nothing was sent");
  const reviewed = p.data._meta?.paratenicAuth;
  let r: Resolved;
  if (reviewed) {
    const cur = resolve(st, res, reviewed.target);
    if (typeof cur === "string" || reviewOf(st, cur, res) !== reviewed.review)
      throw new RpcError(ErrorCodes.InvalidParams, "the reviewed authentication context changed; nothing was sent (call paratenic/authContext again)", { reason: "review_changed" });
    r = cur;
  } else r = legacyTarget(st, res);
  if (r.version < RESOURCE_MIN_VERSION) throw new RpcError(ErrorCodes.InvalidParams, "the target's backend does not accept credentials (needs backend protocol 6); nothing was sent");
  const command: Json = { type: "authenticate", resource: res, token, target: r.target };
  if (scopes !== undefined) command.scopes = scopes; // granted scopes only; required scopes are never invented
  const frame: Json = r.session
    ? { type: "command", backendInstanceId: r.route.instanceId, session: r.session.uri, ...(r.chat && r.version >= 3 ? { chat: r.chat } : {}), command }
    : { type: "provider_command", backendInstanceId: r.route.instanceId, provider: (r.target as { provider: string }).provider, command };
  let commandId = "";
  const o = await new Promise<CommandOutcome>((done) => {
    commandId = st.sendCommand(r.route, frame, done);
  });
  if (o.kind === "accepted") return {};
  if (o.kind === "rejected" && o.notSent) throw new RpcError(ErrorCodes.InternalError, hostRefused(o.error), { outcome: "rejected", sent: false });
  if (o.kind === "rejected") throw new RpcError(ErrorCodes.InternalError, "the backend refused the credential", { outcome: "rejected", commandId });
  throw new RpcError(ErrorCodes.InternalError, "the credential's outcome is indeterminate; it is not retried (inspect the backend's receipt)", { outcome: "indeterminate", commandId });
}
