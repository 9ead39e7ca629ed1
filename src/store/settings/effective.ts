/**
 * Effective selection and reasoning resolution shared by `config.get`, `config.set`, `status`
 * and turn workers. Pure apart from cache-only catalog reads.
 *
 * Selection rule (documented choice; the spec fixes only the layer order):
 * - provider = first of env `MC_PROVIDER`, project `provider`, global `provider`, else `anthropic`.
 * - model = from the highest-precedence layer that sets `model` AND whose own provider context
 *   (its `provider`, else the next lower layer's, else the default) equals the resolved provider;
 *   so `MC_PROVIDER=openai-codex` never pairs with a Claude model saved globally.
 *   Otherwise the provider's default: `claude-sonnet-4-5` (anthropic), `gpt-5-codex`
 *   (openai-codex), a custom provider's first non-disabled static model, else `null`.
 * Reasoning: configured = project `thinking_level` ?? global ?? `default`; resolved = configured if
 * the model's available levels contain it, else `default`. Fast: global `fast` ?? false (a
 * project `fast` is ignored: fast is global-only).
 */
import type { EnvLike } from "../home.js";
import type { CatalogCache, CatalogModel, CatalogState } from "../catalog/cache.js";
import { fallbackMeta, type ModelMeta } from "../catalog/fallback.js";
import { findProvider, isBuiltin, providerFingerprint, type ProviderEntry } from "../catalog/providers.js";
import { APPROVAL_POLICIES, type ApprovalPolicySetting, type ThinkingLevelValue } from "./schema.js";
import type { SettingsLayers } from "./settings-store.js";

export const DEFAULT_PROVIDER_ID = "anthropic";
export const DEFAULT_MODEL_IDS: Readonly<Record<string, string>> = {
  anthropic: "claude-sonnet-4-5",
  "openai-codex": "gpt-5-codex",
};

export interface Selection {
  provider_id: string;
  /** `null` only for a custom provider with no configured model and no static models. */
  model_id: string | null;
}

/**
 * `top`: a session's own choice (SCV `session.start`'s `provider` / `model`), above every layer and by the same rule:
 * a session that names only another provider gets that provider's model from the layers that select it, else its
 * default, never the settings' model of a different provider.
 */
export function resolveSelection(layers: SettingsLayers, top: { provider?: string | undefined; model?: string | undefined } = {}): Selection {
  const order = [
    { provider: top.provider, model: top.model },
    { provider: layers.env.provider, model: layers.env.model },
    { provider: layers.project.provider, model: layers.project.model },
    { provider: layers.global.provider, model: layers.global.model },
  ];
  const providerFrom = (i: number): string => order.slice(i).find((l) => l.provider !== undefined)?.provider ?? DEFAULT_PROVIDER_ID;
  const provider = providerFrom(0);
  for (let i = 0; i < order.length; i++) {
    const model = order[i]?.model;
    if (model !== undefined && providerFrom(i) === provider) return { provider_id: provider, model_id: model };
  }
  return { provider_id: provider, model_id: defaultModel(provider, layers) };
}

function defaultModel(providerId: string, layers: SettingsLayers): string | null {
  if (isBuiltin(providerId)) return DEFAULT_MODEL_IDS[providerId] ?? null;
  // Own members only: `constructor` must not find Object.prototype's.
  const providers = layers.global.providers;
  const def = providers !== undefined && Object.hasOwn(providers, providerId) ? providers[providerId] : undefined;
  return def?.models.find((m) => m.disabled !== true)?.id ?? null;
}

export function configuredThinking(layers: SettingsLayers): ThinkingLevelValue {
  return layers.project.thinking_level ?? layers.global.thinking_level ?? "default";
}

/** The effective `approval_policy`, and a project value that was not applied because it would loosen it. */
export interface EffectiveApprovalPolicy {
  policy: ApprovalPolicySetting;
  /** The project layer's looser value, ignored (say so: the user may have expected it to apply). */
  ignoredProject: ApprovalPolicySetting | null;
}

/**
 * `approval_policy`: the global layer's, else `on-risk`; a project layer (`<cwd>/.berth/settings.json`, which a
 * cloned repository can ship) may make it stricter, never looser, as it cannot declare providers, MCP servers or the
 * tool policy: a repository saying `"never"` must not run its own instructions' commands unasked.
 */
export function approvalPolicyOf(layers: Pick<SettingsLayers, "global" | "project">): EffectiveApprovalPolicy {
  const base = layers.global.approval_policy ?? "on-risk";
  const project = layers.project.approval_policy;
  if (project === undefined || project === base) return { policy: base, ignoredProject: null };
  const rank = (p: ApprovalPolicySetting): number => APPROVAL_POLICIES.indexOf(p);
  return rank(project) > rank(base) ? { policy: project, ignoredProject: null } : { policy: base, ignoredProject: project };
}

/** The one line a door prints when `approvalPolicyOf` ignored a project value. */
export function ignoredApprovalPolicyNote(ignored: ApprovalPolicySetting, policy: ApprovalPolicySetting, file = "this directory's .berth/settings.json"): string {
  return (
    `ignoring approval_policy "${ignored}" in ${file}: a project's settings may only make ` +
    `approvals stricter (using "${policy}"); set it in MC_HOME's settings.json to apply it everywhere`
  );
}

export function fastSetting(layers: SettingsLayers): boolean {
  return layers.global.fast ?? false;
}

export interface ModelLookup {
  entry: ProviderEntry | undefined;
  state: CatalogState;
  /** The cached model when the provider's cache (any state but unavailable) lists it. */
  cached: CatalogModel | undefined;
  /** Metadata by the shared rules: fresh cache, else static/bundled/provider fallback. */
  meta: ModelMeta;
}

/** Cache-only lookup of one model's metadata (no network, no credential use). */
export async function lookupModel(
  layers: SettingsLayers,
  cache: CatalogCache,
  env: EnvLike,
  providerId: string,
  modelId: string | null,
): Promise<ModelLookup> {
  const entry = findProvider(layers.global, providerId);
  const staticDef = entry !== undefined && !entry.builtin ? entry.def.models.find((m) => m.id === modelId) : undefined;
  if (entry === undefined) {
    return { entry, state: "unavailable", cached: undefined, meta: fallbackMeta(providerId, modelId ?? "", staticDef) };
  }
  const view = await cache.read(providerId, providerFingerprint(entry, env));
  const cached = modelId === null ? undefined : view.models.find((m) => m.model_id === modelId);
  const meta: ModelMeta =
    view.state === "fresh_cache" && cached !== undefined
      ? { context_window: cached.context_window, max_output_tokens: cached.max_output_tokens, levels: cached.available_thinking_levels, label: cached.label }
      : fallbackMeta(providerId, modelId ?? "", staticDef);
  return { entry, state: view.state, cached, meta };
}

export function resolveThinking(configured: ThinkingLevelValue, available: readonly ThinkingLevelValue[]): ThinkingLevelValue {
  return available.includes(configured) ? configured : "default";
}
