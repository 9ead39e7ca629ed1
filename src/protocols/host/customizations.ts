/**
 * Session customizations beside the MCP servers the host derives from `hello.mcpServers`
 * (mcp-channels.ts): backend-owned containers (v6 `resource_action` `session/customizationUpdated`
 * and `session/customizationRemoved`) and the plugins active clients publish in their
 * `session/activeClientSet` entry (AHP: "the host propagates them into this list"). Contracts:
 *  - `SessionState.customizations` is the route's MCP servers first, then these entries in the
 *    order they were first added; an update keeps an entry's place, a new one is appended, so the
 *    official upsert reducer rebuilds exactly the list a fresh snapshot holds;
 *  - a backend may upsert only containers (`plugin`, `directory`) with no `clientId`; IDs are
 *    session-unique across every owner and every container's children; an ID of an MCP server
 *    customization (the host's) is refused with HOST_OWNED, a client's with CLIENT_OWNED;
 *  - at most MAX_BACKEND_CUSTOMIZATIONS backend entries per session, each at most
 *    MAX_CUSTOMIZATION_BYTES encoded (UTF-8); the one past either bound is refused whole;
 *  - backend entries describe the live backend like server tools: in memory only, removed (one
 *    `session/customizationRemoved` each) when the session loses its route;
 *  - a client's plugins appear with its `clientId` (its `nonce` and `childEnablement` are the
 *    client's publication details and stay in its active-client entry); re-setting the entry
 *    publishes only what changed; the client leaving removes them.
 */
import { z } from "zod";
import { clip } from "./inbound.js";
import { mcpHub } from "./mcp-channels.js";
import type { Json, SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { dropToggles } from "./customization-toggles.js";

/** Backend-owned top-level customizations one session may hold, and the largest one (encoded JSON bytes). */
export const MAX_BACKEND_CUSTOMIZATIONS = 256;
export const MAX_CUSTOMIZATION_BYTES = 256 * 1024;

/** The fixed refusal of a backend action that names an MCP server customization (the host owns those). */
export const HOST_OWNED = (id: string): string =>
  `customization ${clip(id)} is an MCP server the host derives from hello.mcpServers; report its state with session/mcpServerStateChanged`;
const CLIENT_OWNED = (id: string, clientId: string): string => `customization ${clip(id)} is contributed by active client ${clip(clientId)}`;

const id = z.string().min(1).max(512);
const text = z.string().max(4096);
const meta = z.record(z.string(), z.unknown()).optional();
const Child = z.object({
  type: z.enum(["agent", "skill", "prompt", "rule", "hook", "mcpServer"]),
  id,
  uri: z.string().min(1).max(4096),
  name: text,
  enabled: z.boolean().optional(),
  _meta: meta,
}).passthrough();
const ContainerFields = {
  id,
  uri: z.string().min(1).max(4096),
  name: text,
  load: z.object({ kind: z.enum(["loading", "loaded", "degraded", "error"]), message: text.optional() }).strict().optional(),
  children: z.array(Child).max(1024).optional(),
  _meta: meta,
};
/** AHP `PluginCustomization` / `DirectoryCustomization` as a backend publishes them (no `clientId`). */
const BackendContainer = z.discriminatedUnion("type", [
  z.object({ type: z.literal("plugin"), ...ContainerFields, version: z.string().max(256).optional() }).passthrough(),
  z.object({ type: z.literal("directory"), ...ContainerFields, enabled: z.boolean(), contents: z.enum(["agent", "skill", "prompt", "rule", "hook", "mcpServer"]), writable: z.boolean() }).passthrough(),
]);
const Updated = z.object({ type: z.literal("session/customizationUpdated"), customization: z.object({}).passthrough() }).strict();
const Removed = z.object({ type: z.literal("session/customizationRemoved"), id }).strict();
/** AHP `ClientPluginCustomization`: clients publish containers shaped as plugins only. */
const ClientPlugin = z.object({ type: z.literal("plugin"), ...ContainerFields, nonce: z.string().max(4096).optional(), childEnablement: z.record(z.string(), z.unknown()).optional() }).passthrough();

interface Entry {
  /** "" for the backend, else the contributing client's ID. */
  owner: string;
  c: Json;
}
const stores = new WeakMap<SessionModel, Map<string, Entry>>();
function store(s: SessionModel): Map<string, Entry> {
  let m = stores.get(s);
  if (!m) stores.set(s, (m = new Map<string, Entry>()));
  return m;
}

/** The customizations of a session beyond its MCP servers, in the order subscribers hold them. */
export function extraCustomizations(s: SessionModel): Json[] {
  const m = stores.get(s);
  return m ? [...m.values()].map((e) => e.c) : [];
}

const idsOf = (c: Json): string[] => [c.id as string, ...(Array.isArray(c.children) ? (c.children as Json[]).map((x) => x.id as string) : [])];

/** Who holds customization `cid` (top level or as a child): "mcp" (the host), "" (the backend), a clientId, or undefined. */
export function customizationOwner(st: HostState, s: SessionModel, cid: string): string | undefined {
  return holder(st, s, cid);
}

/** Which owner already holds `cid` (top level or as a child): "mcp", "" (backend), a clientId, or undefined. */
function holder(st: HostState, s: SessionModel, cid: string, except?: string): string | undefined {
  for (const c of mcpHub(st).customizations(s) ?? []) if (c.id === cid) return "mcp";
  for (const [top, e] of store(s)) if (top !== except && idsOf(e.c).includes(cid)) return e.owner;
  return undefined;
}

/** Why `c`'s IDs (its own and its children's) cannot be used by `owner` replacing entry `except`; null when they can. */
function idConflict(st: HostState, s: SessionModel, c: Json, owner: string, except?: string): string | null {
  const ids = idsOf(c);
  if (new Set(ids).size !== ids.length) return `customization ${clip(c.id)} repeats an ID among itself and its children`;
  for (const x of ids) {
    const h = holder(st, s, x, except);
    if (h === "mcp") return HOST_OWNED(x);
    if (h !== undefined && h !== owner) return h === "" ? `customization ${clip(x)} belongs to the session's backend` : CLIENT_OWNED(x, h);
    if (h === owner) return `customization ID ${clip(x)} is already used by another customization`;
  }
  return null;
}

function upsert(st: HostState, s: SessionModel, owner: string, c: Json): void {
  const prev = store(s).get(c.id as string);
  dropToggles(s, [...idsOf(c), ...(prev ? idsOf(prev.c) : [])]);
  store(s).set(c.id as string, { owner, c });
  st.publish(s.uri, { type: "session/customizationUpdated", customization: c });
  mcpHub(st).heard(s);
}
function remove(st: HostState, s: SessionModel, cid: string): void {
  const prev = store(s).get(cid);
  dropToggles(s, prev ? idsOf(prev.c) : [cid]);
  store(s).delete(cid);
  st.publish(s.uri, { type: "session/customizationRemoved", id: cid });
  mcpHub(st).heard(s);
}

const invalid = (type: string, e: z.ZodError): string => `invalid ${type}: ${e.issues[0]?.path.join(".") ?? ""} ${e.issues[0]?.message ?? ""}`.trim();

/** A v6 backend `session/customizationUpdated` or `session/customizationRemoved`; null, or why it is refused. */
export function backendCustomizationAction(st: HostState, s: SessionModel, action: Json): string | null {
  if (action.type === "session/customizationRemoved") {
    const p = Removed.safeParse(action);
    if (!p.success) return invalid("session/customizationRemoved", p.error);
    const cid = p.data.id;
    const h = holder(st, s, cid);
    if (h === "mcp") return HOST_OWNED(cid);
    if (h === undefined) return `session/customizationRemoved names no customization of this session (${clip(cid)})`;
    if (h !== "") return CLIENT_OWNED(cid, h);
    const top = store(s).get(cid);
    if (top) {
      remove(st, s, cid);
      return null;
    }
    // A child of one of the backend's containers (the official reducer searches every container).
    for (const [key, e] of store(s)) {
      const kids = e.c.children as Json[] | undefined;
      if (e.owner !== "" || !kids?.some((x) => x.id === cid)) continue;
      store(s).set(key, { owner: "", c: { ...e.c, children: kids.filter((x) => x.id !== cid) } });
      dropToggles(s, [cid]);
      st.publish(s.uri, { type: "session/customizationRemoved", id: cid });
      mcpHub(st).heard(s);
      return null;
    }
    return `session/customizationRemoved names no customization of this session (${clip(cid)})`;
  }
  const p = Updated.safeParse(action);
  if (!p.success) return invalid("session/customizationUpdated", p.error);
  const size = Buffer.byteLength(JSON.stringify(p.data.customization));
  if (size > MAX_CUSTOMIZATION_BYTES) return `session/customizationUpdated: the customization is ${size} bytes encoded; at most ${MAX_CUSTOMIZATION_BYTES} are accepted`;
  const raw = p.data.customization;
  if (raw.type === "mcpServer") {
    if (typeof raw.id === "string" && holder(st, s, raw.id) === "mcp") return HOST_OWNED(raw.id);
    return "session/customizationUpdated: a top-level MCP server comes from hello.mcpServers; a backend upserts plugin and directory containers";
  }
  if (raw.clientId !== undefined) return "session/customizationUpdated: clientId marks a client's plugin; a backend customization has none";
  const c = BackendContainer.safeParse(raw);
  if (!c.success) return invalid("session/customizationUpdated", c.error);
  const cust = c.data as Json;
  const cid = cust.id as string;
  const conflict = idConflict(st, s, cust, "", cid);
  if (conflict) return conflict;
  const existing = store(s).get(cid);
  if (existing && existing.owner !== "") return CLIENT_OWNED(cid, existing.owner);
  if (!existing) {
    let n = 0;
    for (const e of store(s).values()) if (e.owner === "") n++;
    if (n >= MAX_BACKEND_CUSTOMIZATIONS) return `session/customizationUpdated: a session holds at most ${MAX_BACKEND_CUSTOMIZATIONS} backend customizations (remove one first)`;
  }
  upsert(st, s, "", cust);
  return null;
}

/** The session lost its backend route: the backend's customizations leave with it. */
export function backendCustomizationsGone(st: HostState, s: SessionModel): void {
  const m = stores.get(s);
  if (!m) return;
  for (const [cid, e] of [...m]) if (e.owner === "") remove(st, s, cid);
}

/** The server-facing shape of one client plugin (its publication details removed, its clientId set). */
function expand(plugin: Json, clientId: string): Json {
  const { nonce: _n, childEnablement: _e, ...rest } = plugin;
  return { ...rest, clientId };
}

/** Why client `clientId`'s plugins cannot be published into the session; null when they can. Checked before its entry is echoed. */
export function clientCustomizationsCheck(st: HostState, s: SessionModel, clientId: string, plugins: Json[] | undefined): string | null {
  const seen = new Set<string>();
  for (const [i, raw] of (plugins ?? []).entries()) {
    const p = ClientPlugin.safeParse(raw);
    if (!p.success) return `invalid activeClient.customizations.${i}: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim();
    for (const x of idsOf(p.data)) {
      if (seen.has(x)) return `activeClient.customizations repeats the ID ${clip(x)}`;
      seen.add(x);
      const h = holder(st, s, x);
      if (h === "mcp") return HOST_OWNED(x);
      if (h === "") return `customization ${clip(x)} belongs to the session's backend`;
      if (h !== undefined && h !== clientId) return CLIENT_OWNED(x, h);
    }
  }
  return null;
}

/** Client `clientId` set its entry (already checked and echoed): publish what changed among its plugins. */
export function clientCustomizationsSet(st: HostState, s: SessionModel, clientId: string, plugins: Json[] | undefined): void {
  const next = new Map<string, Json>();
  for (const p of plugins ?? []) next.set(p.id as string, expand(p, clientId));
  for (const [cid, e] of [...store(s)]) if (e.owner === clientId && !next.has(cid)) remove(st, s, cid);
  for (const [cid, c] of next) {
    const cur = store(s).get(cid);
    if (cur && JSON.stringify(cur.c) === JSON.stringify(c)) continue;
    upsert(st, s, clientId, c);
  }
}

/** Client `clientId` left the session: its plugins leave with it. */
export function clientCustomizationsGone(st: HostState, s: SessionModel, clientId: string): void {
  const m = stores.get(s);
  if (!m) return;
  for (const [cid, e] of [...m]) if (e.owner === clientId) remove(st, s, cid);
}
