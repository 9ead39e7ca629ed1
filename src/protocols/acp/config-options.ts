/**
 * Session modes and config options (`session/set_mode`, `session/set_config_option`).
 *
 * Contracts:
 * - Modes are Berth's approval modes: `ask-all` (every tool asks, reads too), `ask` (reads run; edits, commands,
 *   delegation and MCP tools ask), `auto-edit` (reads and file edits run; commands, delegation and MCP tools ask),
 *   `full` (nothing asks). A session starts in the mode of settings' `approval_policy` (`modeOfPolicy`: `always`,
 *   `on-risk` (the default), `never`), with the project rule of every door (store/settings/approval-policy.ts).
 * - Config options, always all three and kept consistent with `modes`: `mode` (category `mode`), `model` (category
 *   `model`: the selected provider's cached catalog models, then the models settings.json declares for it (Berth's
 *   known models for a built-in provider), plus the current one; at most `MAX_MODEL_OPTIONS`) and
 *   `reasoning` (category `thought_level`: Berth's six reasoning levels).
 * - A change applies to the session's next turn; one made while a turn runs waits for that turn to end.
 *   Changes stay with this session (settings.json is not written).
 */
import type { SessionConfigOption, SessionModeState } from "@agentclientprotocol/sdk";
import type { ApprovalMode } from "../../runtime/session/index.js";
import { THINKING_LEVELS, type ThinkingLevel } from "../../runtime/types.js";
import type { CatalogReader } from "../../store/catalog/catalog-reader.js";
import { bundledModelIds } from "../../store/catalog/fallback.js";
import { findProvider } from "../../store/catalog/providers.js";
import type { ConfigService } from "../../store/settings/config.js";
import type { SettingsStore } from "../../store/settings/settings-store.js";
import type { ApprovalPolicySetting } from "../../store/settings/schema.js";

export const MODE_IDS = ["ask-all", "ask", "auto-edit", "full"] as const;
export type ModeId = (typeof MODE_IDS)[number];

const MODES: Record<ModeId, { name: string; description: string; approval: ApprovalMode }> = {
  "ask-all": { name: "Ask for everything", description: "Every tool asks first, reads too", approval: "always" },
  ask: { name: "Ask", description: "Reads run freely; edits, commands, delegation and MCP tools ask first", approval: "on-risk" },
  "auto-edit": { name: "Auto-edit", description: "Reads and file edits run; commands, delegation and MCP tools ask first", approval: "edits" },
  full: { name: "Full access", description: "Every tool runs without asking", approval: "never" },
};

export const MAX_MODEL_OPTIONS = 100;

export const approvalOf = (m: ModeId): ApprovalMode => MODES[m].approval;

/** The mode a session starts in under settings' `approval_policy`. */
export function modeOfPolicy(p: ApprovalPolicySetting): ModeId {
  return p === "always" ? "ask-all" : p === "never" ? "full" : "ask";
}

export function isModeId(v: string): v is ModeId {
  return (MODE_IDS as readonly string[]).includes(v);
}

export function isThinkingLevel(v: string): v is ThinkingLevel {
  return (THINKING_LEVELS as readonly string[]).includes(v);
}

/** What the session chose (null: follow the settings). */
export interface SessionChoices {
  mode: ModeId;
  model: string | null;
  reasoning: ThinkingLevel | null;
}

export function modeState(c: SessionChoices): SessionModeState {
  return { currentModeId: c.mode, availableModes: MODE_IDS.map((id) => ({ id, name: MODES[id].name, description: MODES[id].description })) };
}

export interface ConfigSources {
  config: ConfigService;
  catalog: CatalogReader;
  settings: SettingsStore;
}

/** Models the settings declare (custom providers) or Berth knows (built-ins), not disabled. */
async function declaredModels(src: ConfigSources, providerId: string): Promise<Array<{ value: string; name: string }>> {
  const entry = findProvider((await src.settings.load()).global, providerId);
  if (entry === undefined) return [];
  if (entry.builtin) return bundledModelIds(entry.id).map((id) => ({ value: id, name: id }));
  return entry.def.models.filter((m) => m.disabled !== true).map((m) => ({ value: m.id, name: m.label ?? m.id }));
}

/** The effective model and reasoning level when the session chose none (settings), and the model choices. */
async function effective(src: ConfigSources): Promise<{ model: string | null; reasoning: ThinkingLevel; models: Array<{ value: string; name: string }> }> {
  let sel;
  try {
    sel = await src.config.runtimeSelection();
  } catch {
    return { model: null, reasoning: "default", models: [] };
  }
  let models: Array<{ value: string; name: string }> = [];
  try {
    const listed = await src.catalog.models(sel.provider_id);
    models = (listed?.entries ?? []).filter((m) => m.available).map((m) => ({ value: m.model_id, name: m.label }));
    for (const m of await declaredModels(src, sel.provider_id)) if (!models.some((x) => x.value === m.value)) models.push(m);
  } catch {
    // the current model alone
  }
  return { model: sel.model_id, reasoning: sel.thinking_level, models };
}

export async function configOptions(src: ConfigSources, c: SessionChoices): Promise<SessionConfigOption[]> {
  const eff = await effective(src);
  const model = c.model ?? eff.model;
  const models = eff.models.slice(0, MAX_MODEL_OPTIONS);
  if (model !== null && !models.some((m) => m.value === model)) models.unshift({ value: model, name: model });
  if (models.length > MAX_MODEL_OPTIONS) models.pop();
  const options: SessionConfigOption[] = [
    {
      id: "mode",
      name: "Approval mode",
      category: "mode",
      type: "select",
      currentValue: c.mode,
      options: MODE_IDS.map((id) => ({ value: id, name: MODES[id].name, description: MODES[id].description })),
    },
  ];
  if (model !== null) options.push({ id: "model", name: "Model", category: "model", type: "select", currentValue: model, options: models });
  options.push({
    id: "reasoning",
    name: "Reasoning",
    category: "thought_level",
    type: "select",
    currentValue: c.reasoning ?? eff.reasoning,
    options: THINKING_LEVELS.map((l) => ({ value: l, name: l === "default" ? "Model default" : l.replace("_", " ") })),
  });
  return options;
}

/** The values `model` accepts right now (the same list `configOptions` shows). */
export async function modelChoices(src: ConfigSources, c: SessionChoices): Promise<string[]> {
  const opts = await configOptions(src, c);
  const m = opts.find((o) => o.id === "model");
  return m !== undefined && m.type === "select" ? (m.options as Array<{ value: string }>).map((o) => o.value) : [];
}
