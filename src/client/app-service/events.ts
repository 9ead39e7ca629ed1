/**
 * Event-payload decoders (§turn.started … §Structured activity, §Codex login). Correlation (turn/login identity,
 * sequence order, nothing after terminal) is enforced by the client against its attached turns and logins;
 * these functions validate shapes and enums only.
 */
import type { Profile } from "./preflight.js";
import { bool, count, fail, has, literal, nullableCount, nullableStr, obj, oneOf, str, type Obj } from "./validate.js";

const LIFECYCLE_STATUS = ["queued", "running", "writing", "completed", "failed", "cancelled"] as const;
const LIFECYCLE_CATEGORY = ["tool", "hook", "context_injection", "subagent_batch", "subagent_task", "assistant", "diagnostic", "compaction", "activity"] as const;

export type Activity = { activity_id: string; parent_activity_id?: string } & (
  | { kind: "lifecycle"; category: (typeof LIFECYCLE_CATEGORY)[number]; status: (typeof LIFECYCLE_STATUS)[number]; details_omitted: true }
  | {
      kind: "tool";
      tool_id: string;
      tool_name: string | null;
      server_id: string | null;
      transport: "local" | "mcp" | "unknown";
      status: (typeof LIFECYCLE_STATUS)[number];
      timed_out: boolean | null;
      details_omitted: true;
    }
  | { kind: "reasoning_summary"; text: string; redacted: boolean; truncated: boolean }
  | {
      kind: "context";
      current_tokens: number;
      max_tokens: number;
      reasoning_tokens: number | null;
      request_sequence: number;
      source: "fallback_estimate" | "tokenizer_estimate" | "fallback_projection" | "tokenizer_projection" | "last_provider_usage" | "provider_exact" | "provider_partial";
    }
  | {
      kind: "usage";
      effective_input: number;
      output: number;
      cache_read: number;
      cache_known: boolean;
      request_sequence: number;
      final_usage: boolean;
      source: "provider_request" | "subagent_aggregate";
    }
  | {
      kind: "compaction";
      status: "triggered" | "running" | "completed" | "failed" | "cancelled";
      current_tokens: number | null;
      max_tokens: number | null;
      replay_required: boolean;
    }
);

export function decodeActivity(v: unknown, p: Profile): Activity {
  const w = "activity";
  const a = obj(v, w);
  const idRule = { maxBytes: p.limits.max_string_bytes };
  const activity_id = str(a, "activity_id", w, idRule);
  const base: { activity_id: string; parent_activity_id?: string } = { activity_id };
  // Omitted means no supplied parent; `null` is not a parent ID.
  if (has(a, "parent_activity_id")) base.parent_activity_id = str(a, "parent_activity_id", w, idRule);
  const kind = oneOf(a, "kind", w, ["lifecycle", "tool", "reasoning_summary", "context", "usage", "compaction"] as const);
  switch (kind) {
    case "lifecycle":
      return {
        ...base,
        kind,
        category: oneOf(a, "category", w, LIFECYCLE_CATEGORY),
        status: oneOf(a, "status", w, LIFECYCLE_STATUS),
        details_omitted: literal(a, "details_omitted", w, true),
      };
    case "tool": {
      const t = a.timed_out;
      if (!has(a, "timed_out") || (t !== null && typeof t !== "boolean")) fail(`${w}.timed_out must be a boolean or null`);
      return {
        ...base,
        kind,
        tool_id: str(a, "tool_id", w, idRule),
        tool_name: nullableStr(a, "tool_name", w, { maxBytes: 256 }),
        server_id: nullableStr(a, "server_id", w, idRule),
        transport: oneOf(a, "transport", w, ["local", "mcp", "unknown"] as const),
        status: oneOf(a, "status", w, LIFECYCLE_STATUS),
        timed_out: t,
        details_omitted: literal(a, "details_omitted", w, true),
      };
    }
    case "reasoning_summary":
      return {
        ...base,
        kind,
        text: str(a, "text", w, { maxBytes: p.activity.max_summary_bytes, empty: true }),
        redacted: bool(a, "redacted", w),
        truncated: bool(a, "truncated", w),
      };
    case "context":
      return {
        ...base,
        kind,
        current_tokens: count(a, "current_tokens", w),
        max_tokens: count(a, "max_tokens", w),
        reasoning_tokens: nullableCount(a, "reasoning_tokens", w),
        request_sequence: count(a, "request_sequence", w),
        source: oneOf(a, "source", w, ["fallback_estimate", "tokenizer_estimate", "fallback_projection", "tokenizer_projection", "last_provider_usage", "provider_exact", "provider_partial"] as const),
      };
    case "usage":
      return {
        ...base,
        kind,
        effective_input: count(a, "effective_input", w),
        output: count(a, "output", w),
        cache_read: count(a, "cache_read", w),
        cache_known: bool(a, "cache_known", w),
        request_sequence: count(a, "request_sequence", w),
        final_usage: bool(a, "final_usage", w),
        source: oneOf(a, "source", w, ["provider_request", "subagent_aggregate"] as const),
      };
    case "compaction": {
      const status = oneOf(a, "status", w, ["triggered", "running", "completed", "failed", "cancelled"] as const);
      const r = {
        ...base,
        kind,
        status,
        current_tokens: nullableCount(a, "current_tokens", w),
        max_tokens: nullableCount(a, "max_tokens", w),
        replay_required: bool(a, "replay_required", w),
      };
      const settled = status === "completed" || status === "failed" || status === "cancelled";
      if (r.replay_required !== settled) fail(`${w}.replay_required contradicts the compaction status`);
      return r;
    }
  }
}

export type TurnStatus = "completed" | "cancelled" | "failed";

export interface TurnTerminal {
  turn_id: string;
  session_id: string;
  status: TurnStatus;
  /** Authoritative assembled assistant text (partial for cancelled/failed turns). */
  assistant_text: string;
  sequence: number;
  activity_dropped: number;
  activity_replay_available: boolean;
  replay_required: boolean;
}

/** `{turn_id, sequence}` common to every turn event; the rest per event. */
export function decodeTurnCommon(o: Obj, w: string, p: Profile): { turn_id: string; sequence: number } {
  return { turn_id: str(o, "turn_id", w, { maxBytes: p.limits.max_id_bytes }), sequence: count(o, "sequence", w) };
}

export function decodeStarted(o: Obj, p: Profile): { turn_id: string; session_id: string; sequence: number } {
  const w = "turn.started";
  const c = decodeTurnCommon(o, w, p);
  literal(o, "status", w, "started");
  if (c.sequence !== 0) fail("turn.started.sequence must be 0");
  return { ...c, session_id: str(o, "session_id", w, { maxBytes: p.limits.max_id_bytes }) };
}

export function decodeDelta(o: Obj, p: Profile): { turn_id: string; sequence: number; text: string } {
  const w = "turn.assistant_delta";
  return { ...decodeTurnCommon(o, w, p), text: str(o, "text", w, { maxBytes: p.limits.max_string_bytes, empty: true }) };
}

export function decodeActivityEvent(o: Obj, p: Profile): { turn_id: string; sequence: number; activity: Activity } {
  const w = "turn.activity";
  return { ...decodeTurnCommon(o, w, p), activity: decodeActivity(has(o, "activity") ? o.activity : fail(`${w}.activity is required`), p) };
}

export function decodeTerminal(o: Obj, p: Profile): TurnTerminal {
  const w = "turn.terminal";
  return {
    ...decodeTurnCommon(o, w, p),
    session_id: str(o, "session_id", w, { maxBytes: p.limits.max_id_bytes }),
    status: oneOf(o, "status", w, ["completed", "cancelled", "failed"] as const),
    assistant_text: str(o, "assistant_text", w, { maxBytes: p.limits.max_string_bytes, empty: true }),
    activity_dropped: count(o, "activity_dropped", w),
    activity_replay_available: bool(o, "activity_replay_available", w),
    replay_required: bool(o, "replay_required", w),
  };
}

export const LOGIN_PROGRESS_STATES = ["authorization_url", "waiting", "callback_received", "callback_accepted"] as const;
export const LOGIN_TERMINAL_STATES = ["exchange_succeeded", "cancelled", "callback_timeout", "callback_failed", "exchange_failed", "auth_changed", "storage_failed", "internal_error"] as const;
export type LoginTerminalState = (typeof LOGIN_TERMINAL_STATES)[number];

export type LoginProgress =
  | { login_id: string; provider_id: string; state: "authorization_url"; url: string; open_browser: boolean }
  | { login_id: string; provider_id: string; state: "waiting" | "callback_received" | "callback_accepted" };

export function decodeLoginProgress(o: Obj, p: Profile): LoginProgress {
  const w = "auth.login.progress";
  const login_id = str(o, "login_id", w, { maxBytes: p.limits.max_id_bytes });
  const provider_id = str(o, "provider_id", w, { maxBytes: 256 });
  const state = oneOf(o, "state", w, LOGIN_PROGRESS_STATES);
  if (state !== "authorization_url") return { login_id, provider_id, state };
  const url = str(o, "url", w, { maxBytes: p.limits.max_string_bytes });
  let scheme: string;
  try {
    scheme = new URL(url).protocol;
  } catch {
    return fail(`${w}.url is not a URL`);
  }
  if (scheme !== "https:" && scheme !== "http:") fail(`${w}.url is not an http(s) URL`);
  return { login_id, provider_id, state, url, open_browser: bool(o, "open_browser", w) };
}

export interface LoginTerminal { login_id: string; provider_id: string; state: LoginTerminalState; cleanup_complete: true }
export function decodeLoginTerminal(o: Obj, p: Profile): LoginTerminal {
  const w = "auth.login.terminal";
  return {
    login_id: str(o, "login_id", w, { maxBytes: p.limits.max_id_bytes }),
    provider_id: str(o, "provider_id", w, { maxBytes: 256 }),
    state: oneOf(o, "state", w, LOGIN_TERMINAL_STATES),
    cleanup_complete: literal(o, "cleanup_complete", w, true),
  };
}
