/**
 * Shared provider/model fallback rules: the bundled table of well-known models and the
 * normalization of reasoning levels to the six wire values.
 * Contract: metadata precedence is (1) a custom provider's static `models` entry, (2) fresh
 * discovered metadata, (3) this bundled table, (4) the provider default. Level lists are always
 * a subset of the six wire values, in canonical order, and always contain `default`.
 */
import { THINKING_LEVELS } from "../../core/thinking.js";
import type { ModelDef, ThinkingLevelValue } from "../settings/schema.js";

export const WIRE_LEVELS: readonly ThinkingLevelValue[] = THINKING_LEVELS;

export function normalizeLevels(levels: readonly unknown[] | undefined): ThinkingLevelValue[] {
  const set = new Set<string>(["default"]);
  for (const l of levels ?? []) if (typeof l === "string") set.add(l);
  return WIRE_LEVELS.filter((l) => set.has(l));
}

export interface ModelMeta {
  context_window: number | null;
  max_output_tokens: number | null;
  levels: ThinkingLevelValue[];
  label?: string;
}

interface TableRow {
  provider: string;
  /** Matches the model ID exactly or as a prefix followed by `-` (dated snapshots). */
  id: string;
  meta: ModelMeta;
}

const CLAUDE_THINKING: ThinkingLevelValue[] = ["default", "low", "medium", "high", "max"];
const GPT5: ThinkingLevelValue[] = ["default", "low", "medium", "high"];
const GPT5_XHIGH: ThinkingLevelValue[] = ["default", "low", "medium", "high", "x_high"];

/** Deliberately small: well-known families only; anything else uses the provider default. */
const TABLE: TableRow[] = [
  { provider: "anthropic", id: "claude-opus-4-5", meta: { context_window: 200_000, max_output_tokens: 64_000, levels: CLAUDE_THINKING, label: "Claude Opus 4.5" } },
  { provider: "anthropic", id: "claude-opus-4-1", meta: { context_window: 200_000, max_output_tokens: 32_000, levels: CLAUDE_THINKING, label: "Claude Opus 4.1" } },
  { provider: "anthropic", id: "claude-opus-4", meta: { context_window: 200_000, max_output_tokens: 32_000, levels: CLAUDE_THINKING, label: "Claude Opus 4" } },
  { provider: "anthropic", id: "claude-sonnet-4-5", meta: { context_window: 200_000, max_output_tokens: 64_000, levels: CLAUDE_THINKING, label: "Claude Sonnet 4.5" } },
  { provider: "anthropic", id: "claude-sonnet-4", meta: { context_window: 200_000, max_output_tokens: 64_000, levels: CLAUDE_THINKING, label: "Claude Sonnet 4" } },
  { provider: "anthropic", id: "claude-haiku-4-5", meta: { context_window: 200_000, max_output_tokens: 64_000, levels: CLAUDE_THINKING, label: "Claude Haiku 4.5" } },
  { provider: "anthropic", id: "claude-3-7-sonnet", meta: { context_window: 200_000, max_output_tokens: 64_000, levels: CLAUDE_THINKING, label: "Claude Sonnet 3.7" } },
  { provider: "anthropic", id: "claude-3-5-haiku", meta: { context_window: 200_000, max_output_tokens: 8_192, levels: ["default"], label: "Claude Haiku 3.5" } },
  { provider: "openai-codex", id: "gpt-5.1-codex-max", meta: { context_window: 400_000, max_output_tokens: 128_000, levels: GPT5_XHIGH, label: "GPT-5.1 Codex Max" } },
  { provider: "openai-codex", id: "gpt-5.1-codex-mini", meta: { context_window: 400_000, max_output_tokens: 128_000, levels: ["default", "medium", "high"], label: "GPT-5.1 Codex Mini" } },
  { provider: "openai-codex", id: "gpt-5.1-codex", meta: { context_window: 400_000, max_output_tokens: 128_000, levels: GPT5, label: "GPT-5.1 Codex" } },
  { provider: "openai-codex", id: "gpt-5-codex", meta: { context_window: 400_000, max_output_tokens: 128_000, levels: GPT5, label: "GPT-5 Codex" } },
  { provider: "openai-codex", id: "gpt-5.2", meta: { context_window: 400_000, max_output_tokens: 128_000, levels: GPT5_XHIGH, label: "GPT-5.2" } },
  { provider: "openai-codex", id: "gpt-5.1", meta: { context_window: 400_000, max_output_tokens: 128_000, levels: GPT5, label: "GPT-5.1" } },
  { provider: "openai-codex", id: "gpt-5", meta: { context_window: 400_000, max_output_tokens: 128_000, levels: GPT5, label: "GPT-5" } },
];

/**
 * Provider default when neither static, discovered nor bundled metadata knows the model. A Map: a provider ID comes
 * from clients and settings, and `constructor` or `toString` must not find `Object.prototype`'s members.
 */
const PROVIDER_DEFAULT_LEVELS = new Map<string, ThinkingLevelValue[]>([
  ["anthropic", ["default"]],
  ["openai-codex", GPT5],
]);

/** Bundled metadata for a well-known model, or null. Longest matching prefix wins. */
export function bundledMeta(providerId: string, modelId: string): ModelMeta | null {
  let best: TableRow | null = null;
  for (const row of TABLE) {
    if (row.provider !== providerId) continue;
    if (modelId === row.id || modelId.startsWith(row.id + "-")) {
      if (best === null || row.id.length > best.id.length) best = row;
    }
  }
  return best === null ? null : { ...best.meta, levels: [...best.meta.levels] };
}

/** The bundled well-known model IDs of a built-in provider, in table order. */
export function bundledModelIds(providerId: string): string[] {
  return TABLE.filter((r) => r.provider === providerId).map((r) => r.id);
}

/**
 * Metadata by the fallback rules (no discovery): static def, then bundled table, then provider
 * default (unknown token limits, `["default"]` unless the provider has a known default).
 */
export function fallbackMeta(providerId: string, modelId: string, staticDef?: ModelDef): ModelMeta {
  const bundled = bundledMeta(providerId, modelId);
  const base: ModelMeta = bundled ?? {
    context_window: null,
    max_output_tokens: null,
    levels: [...(PROVIDER_DEFAULT_LEVELS.get(providerId) ?? ["default"])],
  };
  if (staticDef === undefined) return base;
  return {
    context_window: staticDef.context_window ?? base.context_window,
    max_output_tokens: staticDef.max_output_tokens ?? base.max_output_tokens,
    levels: staticDef.thinking_levels !== undefined ? normalizeLevels(staticDef.thinking_levels) : base.levels,
    ...(staticDef.label !== undefined ? { label: staticDef.label } : base.label !== undefined ? { label: base.label } : {}),
  };
}
