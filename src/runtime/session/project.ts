/**
 * Runtime events of one turn → neutral `SessionEvent`s (bounded tool data, compaction totals) and terminal
 * outcomes → failure codes. Pure helpers of `SessionRuntime`.
 */
import { truncateUtf8, utf8Length } from "../../core/utf8.js";
import type { FailureReason, RuntimeEvent, TurnOutcome } from "../events.js";
import { storageProblem } from "../../store/sessions/errors.js";
import { LABELS, withoutAttempts } from "../providers/errors.js";
import { PROGRESS_MAX_BYTES, TOOL_ARGUMENTS_MAX_BYTES, TOOL_OUTPUT_MAX_BYTES, type FailureCode, type SessionEvent, type TurnOrigin } from "./types.js";

type Ref = { sessionId: string; turnId: string };

export function boundArguments(args: Record<string, unknown>): { arguments: Record<string, unknown>; truncated: boolean } {
  let size: number;
  try {
    size = utf8Length(JSON.stringify(args));
  } catch {
    return { arguments: {}, truncated: true };
  }
  return size <= TOOL_ARGUMENTS_MAX_BYTES ? { arguments: args, truncated: false } : { arguments: {}, truncated: true };
}

export function boundOutput(s: string): { output: string; truncated: boolean } {
  if (s.length * 3 <= TOOL_OUTPUT_MAX_BYTES || utf8Length(s) <= TOOL_OUTPUT_MAX_BYTES) return { output: s, truncated: false };
  return { output: truncateUtf8(s, TOOL_OUTPUT_MAX_BYTES), truncated: true };
}

/** Tracks one turn's compaction attempts so `context_compacted` can report the size before. */
export class TurnProjector {
  private readonly before = new Map<string, number>();
  constructor(private readonly ref: Ref) {}

  /** The neutral events for one runtime event (possibly none). */
  project(e: RuntimeEvent): SessionEvent[] {
    const r = this.ref;
    switch (e.type) {
      case "assistant_completed":
        return [{ ...r, type: "assistant_completed", text: e.text }];
      case "compaction":
        if (e.status === "triggered" && e.currentTokens !== null) this.before.set(e.id, e.currentTokens);
        if (e.status !== "completed") return [];
        return [{ ...r, type: "context_compacted", beforeTokens: this.before.get(e.id) ?? 0, afterTokens: e.afterTokens ?? e.currentTokens ?? 0, removedMessages: e.removedMessages ?? 0 }];
      case "tool": {
        const p = e.parentId !== undefined ? { parentId: e.parentId } : {};
        switch (e.phase) {
          case "proposed":
            return [{ ...r, type: "tool_proposed", callId: e.callId, name: e.name, ...boundArguments(e.arguments ?? {}), ...p }];
          case "started":
            return [{ ...r, type: "tool_started", callId: e.callId, name: e.name, ...p }];
          case "progress":
            return e.line === undefined ? [] : [{ ...r, type: "tool_progress", callId: e.callId, text: truncateUtf8(e.line, PROGRESS_MAX_BYTES), ...p }];
          case "completed":
            return [
              {
                ...r,
                type: "tool_completed",
                callId: e.callId,
                name: e.name,
                success: e.isError !== true,
                ...boundOutput(e.output ?? ""),
                ...(e.isError === true ? { error: e.errorKind ?? "failed" } : {}),
                ...(e.timedOut !== undefined ? { timedOut: e.timedOut } : {}),
                ...(e.jobs !== undefined ? { jobs: e.jobs } : {}),
                ...p,
              },
            ];
        }
        return [];
      }
      case "context":
      case "lifecycle":
      case "reasoning_summary":
      case "usage":
      default: // an event type newer than this projection (a runtime value outside the union) projects to nothing
        return [];
    }
  }
}

const CODES: Record<FailureReason, FailureCode> = {
  provider: "provider_error",
  provider_limit: "response_limit",
  tool_limit: "tool_limit",
  credential: "provider_error",
  selection: "provider_error",
  output_limit: "response_limit",
  step_limit: "step_limit",
  persistence: "internal_error",
  compaction: "context_limit",
  history: "history_limit",
  internal: "internal_error",
};

const MESSAGES: Record<FailureReason, string> = {
  provider: "the provider request failed",
  provider_limit: "the provider response exceeded a size limit",
  tool_limit: "the provider's tool calls exceeded a size or count limit",
  credential: "the provider credential is missing or was rejected; sign in again or set the API key",
  selection: "no usable provider and model are selected; choose one in settings",
  output_limit: "the assistant message exceeded the size this client accepts",
  step_limit: "the agent reached its step limit",
  persistence: "the session could not be written to disk",
  compaction: "the conversation no longer fits the model's context window, even after compaction",
  history: "the session history is too large to load; clear the session or start a new one",
  internal: "internal error",
};

/** Reasons whose message carries the provider failure's label (a fixed text from the provider layer). */
const DETAILED = new Set<FailureReason>(["provider", "credential", "provider_limit", "tool_limit"]);
const CREDENTIAL_HEAD = "the provider credential is missing or was rejected";
const CREDENTIAL_FIX = "sign in again or set the API key";
/** A custom provider's credential label naming its unset key variable (driver.ts). */
const MISSING_KEY_ENV = new RegExp(`^${LABELS.credential} \\(([A-Za-z][A-Za-z0-9_]*)\\)$`);
const CERTIFICATE_FIX = "if the provider's certificate comes from a private CA, set NODE_EXTRA_CA_CERTS to that CA's PEM file";
const NOT_FOUND_FIX = "check the provider's base_url in settings.json (OpenAI-compatible servers usually want it to end in /v1) and the model name";
const NOT_STREAM_FIX =
  "check the provider's base_url in settings.json: it must name the API (for OpenAI-compatible servers usually ending in /v1), not a web page, on a server that streams answers (server-sent events)";
/** A compressed answer Berth could not read (providers/content-coding.ts). */
const CODING_FIX = "configure the server, or the proxy in front of it, to send identity (no compression), gzip, deflate or br";
const TRANSFER_FIX = "configure the server, or the proxy in front of it, to send the stream with no transfer coding but chunked (or with gzip or deflate before chunked)";
const COMPRESSED_FIX = "if it persists, configure the server, or the proxy in front of it, to send the stream uncompressed (identity)";
const TOOL_NAME_FIX = "the model or server sent a malformed tool call: retry, or try another model or server";
/** An HTTP 413 that compacting the history did not cure (providers/errors.ts `statusFailure`). */
const TOO_LARGE_FIX =
  "the request is larger in bytes than the provider, or a proxy in front of it, accepts (Anthropic: 32 MB): attach fewer or smaller images, or clear the session; behind a proxy, raise its request body size limit";
/** The fix of a provider failure, by its label. */
const LABEL_FIXES: ReadonlyArray<readonly [string, string]> = [
  [LABELS.certificate, CERTIFICATE_FIX],
  [LABELS.notStream, NOT_STREAM_FIX],
  [LABELS.contentCoding, CODING_FIX],
  [LABELS.transferCoding, TRANSFER_FIX],
  [LABELS.compressedCorrupt, COMPRESSED_FIX],
  [LABELS.compressedTruncated, COMPRESSED_FIX],
  [LABELS.toolName, TOOL_NAME_FIX],
  [LABELS.tooLarge, TOO_LARGE_FIX],
];
/** The fix of each answer bound (runtime/types.ts `PROVIDER_BOUNDS`). */
const LIMIT_FIXES: ReadonlyArray<readonly [string, string]> = [
  [LABELS.responseLimit, "ask for a shorter answer, or split the task into smaller steps"],
  [LABELS.textLimit, "ask for a shorter answer, or split the task into smaller steps"],
  [LABELS.eventLimit, "check the provider's base_url in settings.json: a server that streams answers sends small events"],
  [LABELS.toolArgsLimit, "ask the model to write large content in several smaller tool calls"],
  [LABELS.toolCountLimit, "ask the model for fewer tool calls at a time"],
];
const OVERFLOW_HEAD = "the provider refused the request as longer than the model's context window";
const OVERFLOW_FIX =
  "Berth compacts from its own estimate against the window it knows for the model, which is larger than the real one: set this model's context_window in settings.json to its real size, or clear the session";

/**
 * The terminal event of an outcome. Its `origin.jobs` names the jobs whose results the model saw in the turn: those
 * of a turn that completed, or whose first provider response came in full (`answered`: the model saw the prompt, so a
 * report turn that then failed or was cancelled still settled them); a report turn that ended before that names none
 * (its jobs stay unsettled, docs/scv.md).
 */
export function terminalEvent(ref: Ref, o: TurnOutcome, origin: TurnOrigin | undefined, answered = false): SessionEvent {
  const shown = origin?.jobs !== undefined && o.status !== "completed" && !answered ? { ...origin, jobs: [] } : origin;
  const base = { ...ref, text: o.assistantText, usage: o.usage, steps: o.usage.requests, ...(shown !== undefined ? { origin: shown } : {}) };
  if (o.status === "completed") return { ...base, type: "turn_completed" };
  if (o.status === "cancelled") return { ...base, type: "turn_cancelled" };
  const reason = o.reason ?? (o.status === "compaction_required" ? "compaction" : "internal");
  return { ...base, type: "turn_failed", code: CODES[reason], message: failureMessage(reason, o.message), reason, status: o.status, ...(o.providerUrl !== undefined ? { providerUrl: o.providerUrl } : {}) };
}

/** A failed turn's message: the reason's fixed text, with the failure's safe detail where the reason carries one. */
function failureMessage(reason: FailureReason, detail: string | undefined): string {
  // A context failure the provider reported (its label: status and category) rather than Berth's own estimate.
  if (reason === "compaction" && detail !== undefined) return `${OVERFLOW_HEAD} (${detail}); ${OVERFLOW_FIX}`;
  // A selection failure's detail (a settings file that cannot be used), or an internal one's (a turn that could not be
  // admitted: session/deps.ts), is a whole sentence naming the cause and fix.
  if ((reason === "selection" || reason === "internal") && detail !== undefined) return detail;
  // A failed session write's detail is the file system's code (a full disk, a read-only file system, …).
  const storage = reason === "persistence" ? storageProblem(detail) : undefined;
  if (storage !== undefined) return `${MESSAGES.persistence}: ${storage}`;
  // The provider's safe label (status, category, which limit) follows the fixed text.
  if (detail === undefined || !DETAILED.has(reason)) return MESSAGES[reason];
  // Matched as the label was before a retry added `; N attempts` (shown as it is).
  const bare = withoutAttempts(detail);
  if (reason === "credential") {
    const unset = MISSING_KEY_ENV.exec(bare)?.[1];
    if (unset !== undefined)
      return `the provider credential is missing: ${unset} (the provider's api_key_env in settings.json) is not set in the environment of the process running this session; set it and restart that process`;
    return `${CREDENTIAL_HEAD}: ${detail}; ${CREDENTIAL_FIX}`;
  }
  // A bound Berth enforces on the answer: what to do about it (the label says which bound).
  const limitFix = LIMIT_FIXES.find(([label]) => bare.startsWith(label))?.[1];
  if (limitFix !== undefined && (reason === "provider_limit" || reason === "tool_limit")) return `${MESSAGES[reason]}: ${detail}; ${limitFix}`;
  // A bare 404 (no error category: not the provider's "unknown model" answer) is almost always a wrong base_url.
  const fix = bare === `${LABELS.http} (HTTP 404)` ? NOT_FOUND_FIX : (LABEL_FIXES.find(([label]) => bare.startsWith(label))?.[1] ?? null);
  return fix === null ? `${MESSAGES[reason]}: ${detail}` : `${MESSAGES[reason]}: ${detail}; ${fix}`;
}
