/**
 * Backend protocol v6 MCP lifecycle requests and backend resource actions (spec "MCP lifecycle
 * request outcomes", "Events"). Contracts:
 *  - a client's `session/mcpServerStartRequested` / `session/mcpServerStopRequested` targets an
 *    advertised MCP customization of a ready session whose route speaks v6+; it is forwarded
 *    verbatim as `apply_resource_action` and its optimistic reducer is never applied here;
 *  - a definitive acceptance publishes the state-neutral `paratenic/mcpLifecycleAccepted`
 *    (with the original client origin); a refusal echoes the original action as rejected; an
 *    indeterminate outcome publishes nothing and keeps that client sequence blocked: no
 *    deadline or reconnection invents a retry;
 *  - one request per server may be unresolved, at most 32 per client and 128 in all;
 *  - `paratenic/dispatchOutcome` answers what became of one such dispatch;
 *  - only the backend's `session/mcpServerStateChanged` (a v6 `resource_action`) changes the
 *    reported lifecycle; the host, not the backend, decides the `mcp://` channel.
 */
import { z } from "zod";
import { ErrorCodes } from "./ahp-constants.js";
import { RpcError, routeCommand } from "./ahp-requests.js";
import { mcpHub } from "./mcp-channels.js";
import { changesetResourceAction } from "./resources.js";
import { chatResourceAction, sessionResourceAction } from "./resource-actions.js";
import { viewResourceAction } from "./view-families.js";
import type { Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import type { LogicalRoute } from "./logical-route.js";
import { isDisabled } from "./customization-toggles.js";
import { NOT_CONNECTED_REFUSAL, refusal } from "./commands.js";

export const RESOURCE_MIN_VERSION = 6;
/** Unresolved session actions one client may hold, and the host in all. */
export const MAX_UNRESOLVED_PER_CLIENT = 32;
export const MAX_UNRESOLVED_GLOBAL = 128;
/** Settled dispatch outcomes kept for `paratenic/dispatchOutcome` (oldest dropped first). */
export const OUTCOME_HISTORY = 4096;

type Outcome = "pending" | "accepted" | "rejected" | "indeterminate";
interface Dispatch {
  session: string;
  clientId: string;
  clientSeq: number;
  action: Json;
  outcome: Outcome;
  serverSeq?: number;
  /** An indeterminate request whose server the backend has since reported authoritatively. */
  released?: boolean;
}

/**
 * The durable unresolved-sequence markers, under the `meta` key the spec keeps for disk
 * compatibility (older hosts suppress reuse of those sequences whatever the action family).
 */
export const MARKER_KEY = "unresolvedConfigurations";
const Marker = z.object({ session: z.string(), clientId: z.string(), clientSeq: z.number().int(), action: z.object({ type: z.string(), id: z.string() }) });

class Lifecycle {
  /** Dispatches by `clientId \0 clientSeq`. */
  readonly dispatches = new Map<string, Dispatch>();
  /** Unresolved (pending or indeterminate) server keys `session \0 id`. */
  readonly busy = new Set<string>();
  constructor(private readonly st: HostState) {
    // Restore: every marker left by an earlier run is an uncertain dispatch (the host stopped
    // before a definitive answer), so its sequence and its server stay blocked.
    const raw = st.store.getMeta(MARKER_KEY);
    if (raw === undefined) return;
    let list: unknown;
    try {
      list = JSON.parse(raw);
    } catch {
      list = [];
    }
    let bad = 0;
    for (const m of Array.isArray(list) ? list : []) {
      const p = Marker.safeParse(m);
      if (!p.success) {
        bad++;
        continue;
      }
      this.dispatches.set(`${p.data.clientId}\0${p.data.clientSeq}`, { ...p.data, action: p.data.action, outcome: "indeterminate" });
      this.busy.add(`${p.data.session}\0${p.data.action.id}`);
    }
    if (bad > 0 || !Array.isArray(list)) st.log(`mcp lifecycle: ${bad} unreadable unresolved-sequence marker(s) ignored`);
  }
  unresolved(clientId?: string): number {
    let n = 0;
    for (const d of this.dispatches.values())
      if ((d.outcome === "pending" || (d.outcome === "indeterminate" && !d.released)) && (clientId === undefined || d.clientId === clientId) && this.st.sessions.has(d.session)) n++;
    return n;
  }
  /** Write the unresolved markers durably (before a dispatch is sent). */
  persist(): void {
    const markers = [...this.dispatches.values()]
      .filter((d) => d.outcome === "pending" || (d.outcome === "indeterminate" && !d.released))
      .map((d) => ({ session: d.session, clientId: d.clientId, clientSeq: d.clientSeq, action: d.action }));
    this.st.store.putMetaNow(MARKER_KEY, JSON.stringify(markers));
  }
  /** The backend reported the server's state: an indeterminate request no longer holds its server. */
  serverReported(session: string, id: string): void {
    let changed = false;
    for (const d of this.dispatches.values())
      if (d.session === session && d.action.id === id && d.outcome === "indeterminate" && !d.released) {
        d.released = true;
        changed = true;
      }
    if (!changed) return;
    this.busy.delete(`${session}\0${id}`);
    this.persist();
  }
  remember(key: string, d: Dispatch): void {
    this.dispatches.set(key, d);
    if (this.dispatches.size <= OUTCOME_HISTORY) return;
    for (const [k, v] of this.dispatches) {
      if (this.dispatches.size <= OUTCOME_HISTORY) break;
      if (v.outcome === "accepted" || v.outcome === "rejected") this.dispatches.delete(k);
    }
  }
}
const states = new WeakMap<HostState, Lifecycle>();
function lifecycle(st: HostState): Lifecycle {
  let l = states.get(st);
  if (!l) states.set(st, (l = new Lifecycle(st)));
  return l;
}

/** Handle a client `session/mcpServer{Start,Stop}Requested` (called from ahp-actions.ts). */
export function mcpLifecycleRequest(st: HostState, s: SessionModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const L = lifecycle(st);
  const operation = action.type === "session/mcpServerStartRequested" ? "start" : "stop";
  const key = `${origin.clientId}\0${origin.clientSeq}`;
  if (L.dispatches.has(key)) return reject("this client sequence was already dispatched; its outcome is available from paratenic/dispatchOutcome");
  if (typeof action.id !== "string" || Object.keys(action).some((k) => k !== "type" && k !== "id")) return reject(`invalid ${String(action.type)}`);
  if (s.lifecycle !== "ready") return reject("session is not ready");
  const route = s.route as LogicalRoute | undefined;
  if (!route) return reject(NOT_CONNECTED_REFUSAL);
  const server = mcpHub(st).server(s, action.id);
  if (!server) return reject("no MCP server customization with that id in this session");
  if (operation === "start" && isDisabled(s, action.id)) return reject("the MCP server is disabled (session/customizationToggled); enable it before starting it");
  if (route.version < RESOURCE_MIN_VERSION) return reject("the session's backend does not accept MCP lifecycle requests (needs backend protocol 6)");
  const busyKey = `${s.uri}\0${action.id}`;
  if (L.busy.has(busyKey)) return reject("a lifecycle request for this MCP server is still unresolved");
  if (L.unresolved(origin.clientId) >= MAX_UNRESOLVED_PER_CLIENT) return reject(`too many unresolved session actions for this client (limit ${MAX_UNRESOLVED_PER_CLIENT})`);
  if (L.unresolved() >= MAX_UNRESOLVED_GLOBAL) return reject(`too many unresolved session actions on this host (limit ${MAX_UNRESOLVED_GLOBAL})`);
  const forwarded: Json = { type: action.type, id: action.id };
  const d: Dispatch = { session: s.uri, clientId: origin.clientId, clientSeq: origin.clientSeq, action: forwarded, outcome: "pending" };
  L.remember(key, d);
  L.busy.add(busyKey);
  try {
    L.persist(); // the marker is durable before anything is sent
  } catch (e) {
    L.dispatches.delete(key);
    L.busy.delete(busyKey);
    st.poison(`could not record an MCP lifecycle request: ${e instanceof Error ? e.message : String(e)}`);
    return reject("the host could not record the request durably; nothing was sent");
  }
  void routeCommand(st, s, undefined, { type: "apply_resource_action", channel: s.uri, action: forwarded }, (o) => {
    if (o.kind !== "indeterminate") L.busy.delete(busyKey);
    if (o.kind === "indeterminate") {
      d.outcome = "indeterminate"; // the same-server guard and the sequence stay blocked
      return;
    }
    const settle = (outcome: "accepted" | "rejected") => {
      d.outcome = outcome;
      try {
        L.persist();
      } catch (e) {
        st.poison(`could not clear an MCP lifecycle marker: ${e instanceof Error ? e.message : String(e)}`);
      }
    };
    if (!st.sessions.has(s.uri)) return settle(o.kind);
    if (o.kind === "rejected") {
      settle("rejected");
      d.serverSeq = st.publish(s.uri, action, origin, refusal(o, "backend refused the MCP lifecycle request")).serverSeq;
      return;
    }
    settle("accepted");
    d.serverSeq = st.publish(s.uri, { type: "paratenic/mcpLifecycleAccepted", id: action.id, operation }, origin).serverSeq;
  });
}

const DispatchOutcomeParams = z.object({ channel: z.string(), clientSeq: z.number().int(), clientId: z.string().max(512).optional() });

/** `paratenic/dispatchOutcome {channel, clientSeq, clientId?}` (clientId defaults to the caller). */
export function dispatchOutcome(st: HostState, callerId: string, params: Json): Json {
  const p = DispatchOutcomeParams.safeParse(params);
  if (!p.success) throw new RpcError(ErrorCodes.InvalidParams, "paratenic/dispatchOutcome needs channel and clientSeq");
  const d = lifecycle(st).dispatches.get(`${p.data.clientId ?? callerId}\0${p.data.clientSeq}`);
  if (!d || d.session !== p.data.channel) throw new RpcError(ErrorCodes.NotFound, "no tracked dispatch with that client sequence on that channel");
  const out: Json = { outcome: d.outcome, action: d.action };
  if (d.serverSeq !== undefined) out.serverSeq = d.serverSeq;
  return out;
}

// ── Backend resource actions (v6) ─────────────────────────────────────────
const ProtectedResource = z.object({ resource: z.string().min(1).max(4096) }).passthrough();
const StateValue = z.discriminatedUnion("kind", [
  // AHP 0.9 `McpServerStartingState.blocking`: the start holds message processing (mcp-background.ts).
  z.object({ kind: z.literal("starting"), blocking: z.boolean().optional() }),
  z.object({ kind: z.literal("ready") }),
  z.object({
    kind: z.literal("authRequired"),
    reason: z.enum(["required", "expired", "insufficientScope"]),
    resource: ProtectedResource,
    requiredScopes: z.array(z.string().max(256)).max(64).optional(),
    description: z.string().max(4096).optional(),
  }),
  z.object({ kind: z.literal("error"), error: z.object({ errorType: z.string().max(256), message: z.string().max(4096) }) }),
  z.object({ kind: z.literal("stopped") }),
]);
const McpStateChanged = z.object({ type: z.literal("session/mcpServerStateChanged"), id: z.string().min(1).max(512), state: StateValue, channel: z.string().optional() });

/**
 * A v6 `resource_action` event: an official AHP action for a channel the route owns. Returns a
 * semantic-rejection message or null. This host projects `session/mcpServerStateChanged` here,
 * changeset and annotations actions in resources.ts, other session and chat families in
 * resource-actions.ts (which refuses the families the host derives from neutral events).
 */
export function resourceAction(st: HostState, s: SessionModel, raw: Json): string | null {
  const channel = raw.channel ?? s.uri;
  const action = raw.action as Json | undefined;
  if (typeof channel !== "string" || !action || typeof action !== "object" || typeof action.type !== "string") return "resource_action needs an action object";
  const view = viewResourceAction(st, s, channel, action); // status flags and working directories (view-families.ts)
  if (view !== undefined) return view;
  if (channel === s.uri && action.type !== "session/mcpServerStateChanged" && action.type !== "session/changesetsChanged") return sessionResourceAction(st, s, action);
  const chat = st.chatIndex.get(channel);
  if (chat && chat.sessionUri === s.uri) return chatResourceAction(st, s, chat, action);
  if (channel !== s.uri || action.type !== "session/mcpServerStateChanged") return changesetResourceAction(st, s, channel, action);
  const p = McpStateChanged.safeParse(action);
  if (!p.success) return `invalid session/mcpServerStateChanged: ${p.error.issues[0]?.message ?? "invalid"}`;
  const err = mcpHub(st).setServerState(s, p.data.id, p.data.state);
  if (err === null) lifecycle(st).serverReported(s.uri, p.data.id);
  return err;
}
