/**
 * `session/customizationToggled` (AHP: "a client toggled a customization on or off"; this host
 * accepts it from the backend too). Contracts:
 *  - both shapes the negotiated AHP types define are read: `{id, enabled}` (0.9, 1.0) and
 *    `{id, enablement}` (1.1: scoped decisions). The host keeps each toggled ID's decisions
 *    (`enabled: b` is the session-scoped decision `[{kind: "session", enabled: b}]`) and sends each
 *    client the shape its version defines: the action as two envelopes (one per shape, each
 *    delivered only to the clients reading it) and snapshots shaped per connection, so either
 *    reducer rebuilds exactly what a fresh snapshot holds;
 *  - a toggle matches a top-level customization first, then a child of a container (the official
 *    reducers' search). The backend may toggle any customization but a client's plugin; a client's
 *    toggle goes to the session's v6+ backend as `apply_resource_action` (decisions form) and is
 *    applied and echoed only once the backend accepts;
 *  - a customization replaced or removed loses its decisions (the reducers replace it whole);
 *    decisions live in memory with the host's session, like the customizations they apply to;
 *  - an MCP server whose decisive decision is `enabled: false` cannot be started
 *    (mcp-lifecycle.ts); stopping it stays possible.
 */
import { z } from "zod";
import { clip } from "./inbound.js";
import { forwardResourceAction } from "./ahp-requests.js";
import { enablementShape, forShape, type EnablementShape } from "./ahp-version.js";
import { customizationOwner } from "./customizations.js";
import type { Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { NOT_CONNECTED_REFUSAL } from "./commands.js";

const id = z.string().min(1).max(512);
/** AHP `CustomizationEnablement` (1.1 types): one explicit decision per scope. */
const Enablement = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("session"), enabled: z.boolean() }).strict(),
  z.object({ kind: z.literal("workspace"), uri: z.string().min(1).max(4096), enabled: z.boolean() }).strict(),
  z.object({ kind: z.literal("global"), enabled: z.boolean() }).strict(),
]);
const Toggled = z.union([
  z.object({ type: z.literal("session/customizationToggled"), id, enabled: z.boolean() }).strict(),
  z.object({ type: z.literal("session/customizationToggled"), id, enablement: z.array(Enablement).max(3) }).strict(),
]);
type Decision = z.infer<typeof Enablement>;

const toggles = new WeakMap<SessionModel, Map<string, Decision[]>>();
function table(s: SessionModel): Map<string, Decision[]> {
  let m = toggles.get(s);
  if (!m) toggles.set(s, (m = new Map<string, Decision[]>()));
  return m;
}

/** Whether customization `cid`'s decisive decision disables it. */
export function isDisabled(s: SessionModel, cid: string): boolean {
  return toggles.get(s)?.get(cid)?.[0]?.enabled === false;
}

/** Customizations `ids` were replaced or removed: their decisions go with them. */
export function dropToggles(s: SessionModel, ids: string[]): void {
  const m = toggles.get(s);
  if (m) for (const x of ids) m.delete(x);
}

/** One entry with decisions `d` applied as the reducer of `shape` would. */
function applyOne(c: Json, d: Decision[], shape: EnablementShape): Json {
  if (shape === "enablement" && (c.type === "plugin" || c.type === "mcpServer")) {
    if (d.length > 0) return { ...c, enablement: d.map((x) => ({ ...x })) };
    const { enablement: _e, ...rest } = c;
    return rest;
  }
  return { ...c, enabled: d[0]?.enabled ?? true };
}

/** A customization list as clients reading `shape` hold it (decisions applied). */
export function shapeList(s: SessionModel, list: Json[], shape: EnablementShape): Json[] {
  const m = toggles.get(s);
  if (!m || m.size === 0) return list;
  return list.map((c) => {
    let out = m.has(c.id as string) ? applyOne(c, m.get(c.id as string)!, shape) : c;
    const kids = out.children as Json[] | undefined;
    if (c.type !== "mcpServer" && Array.isArray(kids) && kids.some((x) => m.has(x.id as string)))
      out = { ...out, children: kids.map((x) => (m.has(x.id as string) ? applyOne(x, m.get(x.id as string)!, shape) : x)) };
    return out;
  });
}

/** Publish an action built per shape: one envelope when both shapes agree, else one for each. */
export function publishShaped(st: HostState, channel: string, build: (shape: EnablementShape) => Json, origin?: Origin): void {
  const a = build("enabled");
  const b = build("enablement");
  if (JSON.stringify(a) === JSON.stringify(b)) {
    st.publish(channel, a, origin);
    return;
  }
  st.publish(channel, forShape(a, "enabled"), origin);
  st.publish(channel, forShape(b, "enablement"), origin);
}

/** A snapshot for a connection that negotiated `version`: a session's customizations in that version's shape. */
export function shapeSnapshot(st: HostState, snap: Json | undefined, version: string | null): Json | undefined {
  const s = snap ? st.sessions.get(snap.resource as string) : undefined;
  const state = snap?.state as Json | undefined;
  if (!s || !state || !Array.isArray(state.customizations) || !toggles.get(s)?.size) return snap;
  return { ...snap, state: { ...state, customizations: shapeList(s, state.customizations as Json[], enablementShape(version)) } };
}

function parse(action: Json): { cid: string; decisions: Decision[] } | string {
  const p = Toggled.safeParse(action);
  if (!p.success) return "invalid session/customizationToggled: it carries id and exactly one of enabled (a boolean) or enablement (at most 3 scoped decisions)";
  const d = p.data;
  return { cid: d.id, decisions: "enabled" in d ? [{ kind: "session", enabled: d.enabled }] : d.enablement };
}

function apply(st: HostState, s: SessionModel, cid: string, decisions: Decision[], origin?: Origin): void {
  table(s).set(cid, decisions);
  publishShaped(st, s.uri, (shape) => (shape === "enabled" ? { type: "session/customizationToggled", id: cid, enabled: decisions[0]?.enabled ?? true } : { type: "session/customizationToggled", id: cid, enablement: decisions.map((x) => ({ ...x })) }), origin);
}

/** A v6 backend `session/customizationToggled`; null, or why it is refused. */
export function backendToggle(st: HostState, s: SessionModel, action: Json): string | null {
  const p = parse(action);
  if (typeof p === "string") return p;
  const owner = customizationOwner(st, s, p.cid);
  if (owner === undefined) return `session/customizationToggled names no customization of this session (${clip(p.cid)})`;
  if (owner !== "mcp" && owner !== "") return `customization ${clip(p.cid)} is contributed by active client ${clip(owner)}; its client decides its enablement`;
  apply(st, s, p.cid, p.decisions);
  return null;
}

/**
 * A client's `session/customizationToggled`: validated, sent to the session's backend as
 * `apply_resource_action {channel: <session>, action: {type, id, enablement}}`, and applied and
 * echoed (in each client's shape) only once the backend accepts.
 */
export function clientToggle(st: HostState, s: SessionModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const p = parse(action);
  if (typeof p === "string") return reject(p);
  if (customizationOwner(st, s, p.cid) === undefined) return reject(`no customization ${clip(p.cid)} in this session`);
  const route = s.route;
  if (!route) return reject(NOT_CONNECTED_REFUSAL);
  if (route.version < 6) return reject("the session's backend does not accept resource actions (needs backend protocol 6)");
  const forwarded = { type: "session/customizationToggled", id: p.cid, enablement: p.decisions };
  forwardResourceAction(st, s, undefined, forwarded, reject, () => {
    if (customizationOwner(st, s, p.cid) === undefined) return reject("the customization left the session meanwhile");
    apply(st, s, p.cid, p.decisions, origin);
  });
}
