/**
 * Success-payload decoders, one per method (§Operations, §Sessions, §Authentication, §Catalogs and configuration).
 * Each validates every documented member fully and ignores unknown members. Types here are the client's public
 * result types; identities inside payloads are checked against the request by the client, not here.
 */
import type { Profile } from "./preflight.js";
import { arr, bool, count, countValue, enumValue, fail, literal, nullableCount, nullableStr, obj, oneOf, str, strValue, timestamp, type Obj } from "./validate.js";

/** Provider/model selection IDs: nonempty, ≤ 256 ASCII bytes of letters, digits and `-._/:`. */
export function selectionId(o: Obj, k: string, what: string): string {
  const v = str(o, k, what, { maxBytes: 256 });
  if (!/^[A-Za-z0-9._/:-]+$/.test(v)) fail(`${what}.${k} is not a valid selection ID`);
  return v;
}

const id = (o: Obj, k: string, what: string, p: Profile): string => str(o, k, what, { maxBytes: p.limits.max_id_bytes });
const cursor = (o: Obj, k: string, what: string): string => str(o, k, what, { maxBytes: 128 });

export interface StatusResult { service: "ready"; provider_auth_ready: boolean }
export function decodeStatus(o: Obj): StatusResult {
  return { service: literal(o, "service", "status", "ready"), provider_auth_ready: bool(o, "provider_auth_ready", "status") };
}

export interface SessionSummary { session_id: string; title: string | null; updated_at: string }
export interface SessionListPage { sessions: SessionSummary[]; next_after: string | null; truncated: boolean; incomplete: boolean }
export function decodeSessionList(o: Obj, p: Profile, limit: number): SessionListPage {
  const sessions = arr(o, "sessions", "session.list", limit).map((x, i) => {
    const s = obj(x, `session.list.sessions[${i}]`);
    const w = "session.list.sessions[]";
    return { session_id: id(s, "session_id", w, p), title: nullableStr(s, "title", w, { maxBytes: p.limits.max_string_bytes, empty: true }), updated_at: timestamp(s, "updated_at", w) };
  });
  return {
    sessions,
    next_after: nullableStr(o, "next_after", "session.list", { maxBytes: 128 }),
    truncated: bool(o, "truncated", "session.list"),
    incomplete: bool(o, "incomplete", "session.list"),
  };
}

export interface SessionState { session_id: string; status: "open" | "closed" | "closing" }
export function decodeSessionState(o: Obj, p: Profile, allowed: ReadonlyArray<SessionState["status"]>, what: string): SessionState {
  return { session_id: id(o, "session_id", what, p), status: oneOf(o, "status", what, allowed) };
}

export type ReplayItem =
  | { cursor: string; kind: "message"; role: "user" | "assistant"; text: string; part: number; last_part: boolean }
  | { cursor: string; kind: "summary"; text: string; part: number; last_part: boolean }
  | { cursor: string; kind: "terminal"; status: "completed" | "cancelled" | "failed" | "compaction_required" };
export interface ReplayPage { events: ReplayItem[]; next_cursor: string; snapshot_cursor: string; truncated: boolean; gap: boolean; resync_required: boolean }

export function decodeReplayPage(o: Obj, p: Profile, limit: number): ReplayPage {
  const w = "session.replay";
  if (JSON.stringify(o).length > p.limits.max_session_replay_page_bytes && Buffer.byteLength(JSON.stringify(o)) > p.limits.max_session_replay_page_bytes)
    fail("replay page exceeds max_session_replay_page_bytes");
  const events = arr(o, "events", w, limit).map((x): ReplayItem => {
    const e = obj(x, "replay event");
    const we = "replay event";
    const c = cursor(e, "cursor", we);
    const kind = oneOf(e, "kind", we, ["message", "summary", "terminal"] as const);
    if (kind === "terminal") return { cursor: c, kind, status: oneOf(e, "status", we, ["completed", "cancelled", "failed", "compaction_required"] as const) };
    const text = str(e, "text", we, { maxBytes: 2048, empty: true });
    const part = count(e, "part", we);
    const last_part = bool(e, "last_part", we);
    if (kind === "summary") return { cursor: c, kind, text, part, last_part };
    return { cursor: c, kind, role: oneOf(e, "role", we, ["user", "assistant"] as const), text, part, last_part };
  });
  const page: ReplayPage = {
    events,
    next_cursor: cursor(o, "next_cursor", w),
    snapshot_cursor: cursor(o, "snapshot_cursor", w),
    truncated: bool(o, "truncated", w),
    gap: bool(o, "gap", w),
    resync_required: bool(o, "resync_required", w),
  };
  if (page.resync_required && events.length > 0) fail("a resync_required replay page must contain no events");
  return page;
}

export interface TurnAccepted { turn_id: string; session_id: string; status: "accepted" }
export function decodeTurnAccepted(o: Obj, p: Profile): TurnAccepted {
  return { turn_id: id(o, "turn_id", "turn.start", p), session_id: id(o, "session_id", "turn.start", p), status: literal(o, "status", "turn.start", "accepted") };
}

export interface CancellationRequested { status: "cancellation_requested" }
export function decodeCancellation(o: Obj, what: string): CancellationRequested {
  return { status: literal(o, "status", what, "cancellation_requested") };
}

export interface ProviderAuth {
  provider_id: string;
  auth_method: "oauth" | "api_key" | "none";
  source: "shared_store" | "environment" | "none";
  readiness: "ready" | "missing" | "needs_login";
  ready: boolean;
}
export function decodeAuthStatus(o: Obj, p: Profile): { providers: ProviderAuth[] } {
  const providers = arr(o, "providers", "auth.status", p.limits.max_array_items).map((x) => {
    const e = obj(x, "auth.status.providers[]");
    const w = "auth.status.providers[]";
    const r: ProviderAuth = {
      provider_id: selectionId(e, "provider_id", w),
      auth_method: oneOf(e, "auth_method", w, ["oauth", "api_key", "none"] as const),
      source: oneOf(e, "source", w, ["shared_store", "environment", "none"] as const),
      readiness: oneOf(e, "readiness", w, ["ready", "missing", "needs_login"] as const),
      ready: bool(e, "ready", w),
    };
    if (r.ready !== (r.readiness === "ready")) fail(`${w}.ready contradicts readiness`);
    return r;
  });
  return { providers };
}

export interface LoginStarted { login_id: string; provider_id: string; status: "started" }
export function decodeLoginStarted(o: Obj, p: Profile): LoginStarted {
  const w = "auth.login.start";
  return { login_id: id(o, "login_id", w, p), provider_id: selectionId(o, "provider_id", w), status: literal(o, "status", w, "started") };
}

export interface LogoutResult { provider_id: string; status: "logged_out"; removed: boolean; environment_unchanged: true }
export function decodeLogout(o: Obj): LogoutResult {
  const w = "auth.logout";
  return {
    provider_id: selectionId(o, "provider_id", w),
    status: literal(o, "status", w, "logged_out"),
    removed: bool(o, "removed", w),
    environment_unchanged: literal(o, "environment_unchanged", w, true),
  };
}

export { THINKING_LEVELS, type ThinkingLevel } from "../../core/thinking.js";
import { THINKING_LEVELS, type ThinkingLevel } from "../../core/thinking.js";
const levels = (o: Obj, k: string, w: string): ThinkingLevel[] => arr(o, k, w, 6).map((x) => enumValue(x, `${w}.${k}[]`, THINKING_LEVELS));

export interface CatalogProvidersPage { entries: Array<{ provider_id: string; label: string }>; next_offset: number | null; refresh: "cache_only" }
export function decodeCatalogProviders(o: Obj, limit: number): CatalogProvidersPage {
  const w = "catalog.providers";
  const entries = arr(o, "entries", w, limit).map((x) => {
    const e = obj(x, `${w}.entries[]`);
    return { provider_id: selectionId(e, "provider_id", w), label: str(e, "label", w, { maxBytes: 256 }) };
  });
  return { entries, next_offset: nullableCount(o, "next_offset", w), refresh: literal(o, "refresh", w, "cache_only") };
}

export interface ModelEntry {
  provider_id: string;
  model_id: string;
  label: string;
  available: boolean;
  context_window: number | null;
  max_output_tokens: number | null;
  available_thinking_levels: ThinkingLevel[];
}
export type CatalogState = "fresh_cache" | "stale" | "unavailable";
const CATALOG_STATES = ["fresh_cache", "stale", "unavailable"] as const;
export interface CatalogModelsPage { entries: ModelEntry[]; next_offset: number | null; state: CatalogState; refresh: "cache_only" }
export function decodeCatalogModels(o: Obj, limit: number): CatalogModelsPage {
  const w = "catalog.models";
  const entries = arr(o, "entries", w, limit).map((x): ModelEntry => {
    const e = obj(x, `${w}.entries[]`);
    return {
      provider_id: selectionId(e, "provider_id", w),
      model_id: selectionId(e, "model_id", w),
      label: str(e, "label", w, { maxBytes: 256 }),
      available: bool(e, "available", w),
      context_window: nullableCount(e, "context_window", w),
      max_output_tokens: nullableCount(e, "max_output_tokens", w),
      available_thinking_levels: levels(e, "available_thinking_levels", w),
    };
  });
  const state = oneOf(o, "state", w, CATALOG_STATES);
  if (state === "unavailable" && entries.length > 0) fail(`${w}: an unavailable catalog has no entries`);
  return { entries, next_offset: nullableCount(o, "next_offset", w), state, refresh: literal(o, "refresh", w, "cache_only") };
}

export function decodeCatalogRefresh(o: Obj): { provider_id: string; state: CatalogState } {
  return { provider_id: selectionId(o, "provider_id", "catalog.refresh"), state: oneOf(o, "state", "catalog.refresh", CATALOG_STATES) };
}

export type Scope = "global" | "project";
export interface EffectiveConfig {
  selection: { provider_id: string; model_id: string };
  thinking_level: ThinkingLevel;
  configured_thinking_level: ThinkingLevel;
  available_thinking_levels: ThinkingLevel[];
  fast: boolean;
  precedence: Array<"environment" | "project" | "global">;
  writable_scopes: Scope[];
  global_only: string[];
}
export function decodeConfig(o: Obj, w = "config.get"): EffectiveConfig {
  const sel = obj(o.selection ?? fail(`${w}.selection is required`), `${w}.selection`);
  return {
    selection: { provider_id: selectionId(sel, "provider_id", w), model_id: selectionId(sel, "model_id", w) },
    thinking_level: oneOf(o, "thinking_level", w, THINKING_LEVELS),
    configured_thinking_level: oneOf(o, "configured_thinking_level", w, THINKING_LEVELS),
    available_thinking_levels: levels(o, "available_thinking_levels", w),
    fast: bool(o, "fast", w),
    precedence: arr(o, "precedence", w, 8).map((x) => enumValue(x, `${w}.precedence[]`, ["environment", "project", "global"] as const)),
    writable_scopes: arr(o, "writable_scopes", w, 8).map((x) => enumValue(x, `${w}.writable_scopes[]`, ["global", "project"] as const)),
    global_only: arr(o, "global_only", w, 64).map((x) => strValue(x, `${w}.global_only[]`, { maxBytes: 64 })),
  };
}

export interface ConfigSetResult { persisted: true; scope: Scope; effective: EffectiveConfig }
export function decodeConfigSet(o: Obj): ConfigSetResult {
  return {
    persisted: literal(o, "persisted", "config.set", true),
    scope: oneOf(o, "scope", "config.set", ["global", "project"] as const),
    effective: decodeConfig(obj(o.effective, "config.set.effective"), "config.set.effective"),
  };
}

export { countValue };
