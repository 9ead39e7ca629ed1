/**
 * The allowlisted `turn.activity` projection (app-service §Structured activity, §Bounds and privacy).
 * Builds each wire activity object field by field from a runtime event; never serializes runtime records.
 *
 * Contracts:
 * - IDs are namespace-prefixed SHA-256 hex digests (`<ns>-<64 hex>`), never raw names, call IDs or paths.
 *   Stream-level context/usage/reasoning updates reuse one ID per turn; each compaction attempt has its own.
 * - Tool activity: hashed tool/server identities, the built-in name only when allowlisted, status only.
 *   Tool arguments, commands, results, progress lines, error text and provider payloads never appear.
 * - Excluded runtime kinds (`null` result; not counted as drops): tool `proposed` and `progress`.
 * - Reasoning summaries: display-sanitized and redacted, capped at 2,048 UTF-8 bytes without splitting a
 *   character; input over 16,384 bytes → `text:""`, `truncated:true`, `redacted:false`.
 */
import { sha256Hex } from "../../core/sha256.js";
import { truncateUtf8, utf8Length } from "../../core/utf8.js";
import type { RuntimeEvent } from "../../runtime/session/index.js";
import { redactSecrets, sanitizeText } from "./replay-text.js";

export const MAX_SUMMARY_BYTES = 2048;
export const MAX_SUMMARY_INPUT_BYTES = 16384;
/** Built-in tools whose names may appear as `tool_name`. */
export const ALLOWLISTED_TOOLS: ReadonlySet<string> = new Set(["read", "write", "edit", "bash", "grep", "glob", "ls", "todo_write", "task", "read_skill", "web_fetch"]);

/** Recent IDs: a turn's context, usage and reasoning updates and a lifecycle's start and end reuse one ID. */
const recentIds = new Map<string, string>();
const MAX_RECENT_IDS = 256;

export function activityId(ns: string, raw: string): string {
  const input = `berth-activity-v1\u0000${ns}\u0000${raw}`;
  let id = recentIds.get(input);
  if (id === undefined) {
    if (recentIds.size >= MAX_RECENT_IDS) recentIds.clear();
    id = `${ns}-${sha256Hex(input)}`;
    recentIds.set(input, id);
  }
  return id;
}

export function projectSummary(text: string): { text: string; redacted: boolean; truncated: boolean } {
  if (text.length > MAX_SUMMARY_INPUT_BYTES || utf8Length(text) > MAX_SUMMARY_INPUT_BYTES) return { text: "", redacted: false, truncated: true };
  const clean = redactSecrets(sanitizeText(text));
  const capped = truncateUtf8(clean, MAX_SUMMARY_BYTES);
  return { text: capped, redacted: clean !== text, truncated: capped.length !== clean.length };
}

/** The wire activity object for `e` in turn `turnId`, or null when the kind is intentionally excluded. */
export function projectActivity(turnId: string, e: RuntimeEvent): Record<string, unknown> | null {
  switch (e.type) {
    case "assistant_completed":
      return null;
    case "tool": {
      if (e.phase === "proposed" || e.phase === "progress") return null;
      const status = e.phase === "started" ? "running" : e.isError === true ? "failed" : "completed";
      return {
        activity_id: activityId("tool-call", `${turnId}\u0000${e.callId}`),
        kind: "tool",
        tool_id: activityId("tool", e.transport === "mcp" ? `mcp\u0000${e.serverName ?? ""}\u0000${e.name}` : e.name),
        tool_name: e.transport === "local" && ALLOWLISTED_TOOLS.has(e.name) ? e.name : null,
        server_id: e.transport === "mcp" && e.serverName !== undefined ? activityId("mcp-server", e.serverName) : null,
        transport: e.transport,
        status,
        timed_out: e.phase === "completed" && e.parentId === undefined && e.timedOut !== undefined ? e.timedOut : null,
        details_omitted: true,
      };
    }
    case "reasoning_summary":
      return { activity_id: activityId("reasoning", turnId), kind: "reasoning_summary", ...projectSummary(e.text) };
    case "context":
      return {
        activity_id: activityId("context", turnId),
        kind: "context",
        current_tokens: e.currentTokens,
        max_tokens: e.maxTokens,
        reasoning_tokens: e.reasoningTokens,
        request_sequence: e.requestSequence,
        source: e.source,
      };
    case "usage":
      return {
        activity_id: activityId(e.source === "subagent_aggregate" ? "subagent-usage" : "usage", turnId),
        kind: "usage",
        effective_input: e.effectiveInput,
        output: e.output,
        cache_read: e.cacheRead,
        cache_known: e.cacheKnown,
        request_sequence: e.requestSequence,
        final_usage: e.finalUsage,
        source: e.source,
      };
    case "compaction":
      return {
        activity_id: activityId("compaction", `${turnId}\u0000${e.id}`),
        kind: "compaction",
        status: e.status,
        current_tokens: e.currentTokens,
        max_tokens: e.maxTokens,
        replay_required: e.status === "completed" || e.status === "failed" || e.status === "cancelled",
      };
    case "lifecycle": {
      const out: Record<string, unknown> = {
        activity_id: activityId("lifecycle", e.id),
        kind: "lifecycle",
        category: e.finish ? "activity" : e.category,
        status: e.status,
        details_omitted: true,
      };
      if (!e.finish && e.parentId !== undefined) out.parent_activity_id = activityId("lifecycle", e.parentId);
      return out;
    }
  }
}
