/**
 * Context accounting. Estimates are deliberately simple (≈ 4 characters per token, labelled
 * `fallback_estimate`); provider usage replaces them as `provider_exact` once a response reports it.
 */
import { toolSchemaChars } from "./providers/tool-json.js";
import type { Message, ToolSpec } from "./types.js";

/** Used when the model's window is unknown (documented in docs/runtime.md). */
export const FALLBACK_CONTEXT_WINDOW = 128_000;

function messageChars(m: Message): number {
  if (m.role === "tool") return m.content.length + 32;
  let n = 16;
  for (const b of m.content) {
    if (b.type === "text") n += b.text.length;
    else if (b.type === "image") n += 4000; // a flat per-image allowance (≈ 1,000 tokens)
    else if (b.type === "thinking") n += b.text.length;
    else n += b.name.length + JSON.stringify(b.arguments).length + 32;
  }
  return n;
}

/** Estimated prompt tokens of one request. */
export function estimateTokens(system: string, messages: readonly Message[], tools: readonly ToolSpec[]): number {
  let chars = system.length;
  for (const m of messages) chars += messageChars(m);
  for (const t of tools) chars += t.name.length + t.description.length + toolSchemaChars(t);
  return Math.ceil(chars / 4);
}

/** A compaction summary's byte bound (compaction.ts; session/trim.ts without loading the compactor). */
export const MAX_SUMMARY_BYTES = 64 * 1024;
