/**
 * The turn loop's side of compaction (compaction.ts does the work): one call shape for both triggers — proactive
 * (the estimate reached `compactAtRatio` of the window) and reactive (the provider refused a request as longer than
 * the model's window, or as too large in bytes) — and the mapping of a provider failure to the turn's failure reason.
 */
import { compact, type CompactResult } from "./compaction.js";
import { estimateTokens } from "./context.js";
import type { FailureReason } from "./events.js";
import { CONTEXT_OVERFLOW, LABELS, withoutAttempts } from "./providers/errors.js";
import type { LoopOptions } from "./turn-loop.js";
import type { Message, ProviderErrorKind, ToolSpec, UserContent } from "./types.js";

export interface TurnCompaction {
  /** The context now (summarized whole mid-turn; at turn start all but its last message, the prompt). */
  messages: Message[];
  /** This turn's prompt content. */
  prompt: UserContent[];
  /** Compaction between provider steps of the turn (step > 0). */
  midTurn: boolean;
  acceptedText: string;
  specs: ToolSpec[];
  /** The estimate that is reported as the size before (`triggered`). */
  currentTokens: number;
}

/** Runs one compaction attempt of the turn with the loop's provider, model, sink, recorder and signal. */
export function compactTurn(o: LoopOptions, c: TurnCompaction): Promise<CompactResult> {
  return compact({
    id: o.newId(),
    provider: o.provider,
    model: o.model,
    messages: c.messages,
    prompt: c.prompt,
    midTurn: c.midTurn,
    acceptedText: c.acceptedText,
    tools: c.specs,
    signal: o.signal,
    sink: o.sink,
    recorder: o.recorder,
    currentTokens: c.currentTokens,
    maxTokens: o.contextWindow,
    ...(o.maxOutputTokens !== undefined ? { maxOutputTokens: o.maxOutputTokens } : {}),
    ...(o.fast === true ? { fast: true } : {}),
    estimate: (m) => estimateTokens(o.system, m, c.specs),
  });
}

/**
 * Whether a provider failure's label says the request was longer than the model's window: the category `errors.ts`
 * names such a refusal, after HTTP 400 or 413 (`… (HTTP 400 context_length_exceeded)`) or alone in an in-stream error
 * (`provider reported an error (context_length_exceeded)`); after a retried failure too (`…; 2 attempts)`). Never a
 * rate limit's or an overload's label, whatever category it carries.
 */
export function isContextOverflow(label: string): boolean {
  const l = withoutAttempts(label);
  return (
    l === `${LABELS.http} (HTTP 400 ${CONTEXT_OVERFLOW})` ||
    l === `${LABELS.tooLarge} (HTTP 413 ${CONTEXT_OVERFLOW})` ||
    l === `${LABELS.providerError} (${CONTEXT_OVERFLOW})`
  );
}

/**
 * Whether a provider failure's label says the request was refused as too large in bytes (HTTP 413: Anthropic's
 * `request_too_large` past 32 MB, a proxy's body limit). Not a context overflow (its failure stays `provider`, since
 * the window is not what was exceeded), but compacting the history shrinks the request too: `refusalCompacts`.
 */
export function isRequestTooLarge(label: string): boolean {
  return label.startsWith(`${LABELS.tooLarge} (HTTP 413`);
}

/** Whether a request refused with this label is compacted once and sent again (reactive compaction, turn-loop.ts). */
export function refusalCompacts(label: string): boolean {
  return isContextOverflow(label) || isRequestTooLarge(label);
}

export function failureOf(kind: ProviderErrorKind, label: string): FailureReason {
  const l = withoutAttempts(label);
  if (kind === "limit") return l === LABELS.toolArgsLimit || l === LABELS.toolCountLimit ? "tool_limit" : "provider_limit";
  // The provider refused the request as longer than the model's window: a context failure, not a provider outage.
  if (isContextOverflow(label)) return "compaction";
  return kind === "auth" ? "credential" : "provider";
}
