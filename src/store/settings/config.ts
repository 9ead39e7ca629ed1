/**
 * `config.get` / `config.set` as protocol-neutral operations returning outcomes (never throwing
 * for expected failures). The wire adapter maps `{ok:false, code}` to the error code verbatim.
 *
 * `set` check order (fixed here, tested): payload shape (`invalid_payload`) → scope
 * (`invalid_scope`: unknown scope, or `fast` with project scope — the whole request fails) →
 * settings readable (`settings_write_failed`) → selection/reasoning against the cache-only
 * catalog (`invalid_selection` for unsafe/unknown provider or unknown/disabled model,
 * `catalog_unavailable`, `catalog_stale`, `unsupported_reasoning`) → locked write
 * (`settings_write_failed`). `persisted:true` is returned only after the atomic replacement.
 */
import type { EnvLike } from "../home.js";
import type { CatalogCache } from "../catalog/cache.js";
import { isSafeId } from "../catalog/ids.js";
import { configuredThinking, fastSetting, lookupModel, resolveSelection, resolveThinking, type Selection } from "./effective.js";
import { THINKING_LEVELS, type ThinkingLevel } from "../../core/thinking.js";
import { SettingsSchema, type ThinkingLevelValue } from "./schema.js";
import type { SettingsLayers, SettingsScope, SettingsStore } from "./settings-store.js";

export interface EffectiveConfig {
  selection: { provider_id: string; model_id: string };
  thinking_level: ThinkingLevelValue;
  configured_thinking_level: ThinkingLevelValue;
  available_thinking_levels: ThinkingLevelValue[];
  fast: boolean;
  precedence: ["environment", "project", "global"];
  writable_scopes: ["global", "project"];
  global_only: ["fast"];
}

export type ConfigErrorCode =
  | "invalid_payload"
  | "invalid_scope"
  | "invalid_selection"
  | "unsupported_reasoning"
  | "catalog_unavailable"
  | "catalog_stale"
  | "settings_write_failed"
  | "configuration_unavailable";

export type Outcome<T> = { ok: true; value: T } | { ok: false; code: ConfigErrorCode };

export interface ConfigSetRequest {
  scope: SettingsScope;
  selection?: { provider_id: string; model_id: string };
  thinking_level?: ThinkingLevelValue;
  fast?: boolean;
}

export interface ConfigSetResult {
  persisted: true;
  scope: SettingsScope;
  effective: EffectiveConfig;
}

/** What a turn worker needs, resolved from reloaded settings (cache-only, no network). */
export interface RuntimeSelection {
  provider_id: string;
  model_id: string | null;
  thinking_level: ThinkingLevelValue;
  fast: boolean;
  context_window: number | null;
  max_output_tokens: number | null;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A `config.set` payload whose members have the right types; which members are required is checked later. */
export interface ConfigSetShape {
  scope?: string;
  selection?: { provider_id: string; model_id: string };
  thinking_level?: ThinkingLevel;
  fast?: boolean;
}

const SET_KEYS: readonly string[] = ["scope", "selection", "thinking_level", "fast"];
const LEVELS: readonly string[] = THINKING_LEVELS;
const isLevel = (v: unknown): v is ThinkingLevel => typeof v === "string" && LEVELS.includes(v);

/**
 * Shape check (the only place a `config.set` payload is decoded): unknown fields, explicit `null`, wrong types
 * and unknown reasoning values are `invalid_payload`. A door may run it before initialization.
 */
export function parseConfigSetShape(payload: unknown): { ok: true; value: ConfigSetShape } | { ok: false; code: "invalid_payload" } {
  const bad = { ok: false as const, code: "invalid_payload" as const };
  if (!isPlainObject(payload)) return bad;
  for (const k of Object.keys(payload)) if (!SET_KEYS.includes(k)) return bad;
  const { scope, selection, thinking_level, fast } = payload;
  const shape: ConfigSetShape = {};
  if ("scope" in payload) {
    if (typeof scope !== "string") return bad;
    shape.scope = scope;
  }
  if ("selection" in payload) {
    if (!isPlainObject(selection)) return bad;
    const keys = Object.keys(selection);
    if (keys.length !== 2 || typeof selection["provider_id"] !== "string" || typeof selection["model_id"] !== "string") return bad;
    shape.selection = { provider_id: selection["provider_id"], model_id: selection["model_id"] };
  }
  if ("thinking_level" in payload) {
    if (!isLevel(thinking_level)) return bad;
    shape.thinking_level = thinking_level;
  }
  if ("fast" in payload) {
    if (typeof fast !== "boolean") return bad;
    shape.fast = fast;
  }
  return { ok: true, value: shape };
}

/** Required members and scope rules on a shaped payload: the typed request `ConfigService.set` takes. */
export function configSetRequest(shape: ConfigSetShape): { ok: true; value: ConfigSetRequest } | { ok: false; code: "invalid_payload" | "invalid_scope" } {
  const { scope, selection, thinking_level, fast } = shape;
  if (scope === undefined || (selection === undefined && thinking_level === undefined && fast === undefined)) return { ok: false, code: "invalid_payload" };
  if (scope !== "global" && scope !== "project") return { ok: false, code: "invalid_scope" };
  if (scope === "project" && fast !== undefined) return { ok: false, code: "invalid_scope" };
  return {
    ok: true,
    value: {
      scope,
      ...(selection === undefined ? {} : { selection }),
      ...(thinking_level === undefined ? {} : { thinking_level }),
      ...(fast === undefined ? {} : { fast }),
    },
  };
}

/** Both steps at once, in the module comment's order (for callers that hold a whole payload). */
export function parseConfigSet(payload: unknown): { ok: true; value: ConfigSetRequest } | { ok: false; code: "invalid_payload" | "invalid_scope" } {
  const shape = parseConfigSetShape(payload);
  return shape.ok ? configSetRequest(shape.value) : shape;
}

export interface ConfigServiceOptions {
  settings: SettingsStore;
  cache: CatalogCache;
  env: EnvLike;
}

export class ConfigService {
  constructor(private readonly opts: ConfigServiceOptions) {}

  async get(): Promise<Outcome<EffectiveConfig>> {
    let layers: SettingsLayers;
    try {
      layers = await this.opts.settings.load();
    } catch {
      return { ok: false, code: "configuration_unavailable" };
    }
    const eff = await this.project(layers);
    return eff === null ? { ok: false, code: "configuration_unavailable" } : { ok: true, value: eff };
  }

  /**
   * Selection, reasoning and fast for a new turn; throws `SettingsError` when settings are unreadable. From
   * `preloaded` when the caller already loaded the layers for this turn (one settings read per turn).
   */
  async runtimeSelection(preloaded?: SettingsLayers, top?: { provider?: string | undefined; model?: string | undefined }): Promise<RuntimeSelection> {
    const layers = preloaded ?? (await this.opts.settings.load());
    const sel = resolveSelection(layers, top);
    const look = await lookupModel(layers, this.opts.cache, this.opts.env, sel.provider_id, sel.model_id);
    return {
      provider_id: sel.provider_id,
      model_id: sel.model_id,
      thinking_level: resolveThinking(configuredThinking(layers), look.meta.levels),
      fast: fastSetting(layers),
      context_window: look.meta.context_window,
      max_output_tokens: look.meta.max_output_tokens,
    };
  }

  /** Applies a decoded request (`parseConfigSet`, or a door's `parseConfigSetShape` + `configSetRequest`). */
  async set(req: ConfigSetRequest): Promise<Outcome<ConfigSetResult>> {
    let layers: SettingsLayers;
    try {
      layers = await this.opts.settings.load();
    } catch {
      return { ok: false, code: "settings_write_failed" };
    }
    if (req.selection !== undefined || req.thinking_level !== undefined) {
      const target: Selection = req.selection ?? resolveSelection(layers);
      const check = await this.validateTarget(layers, target, req.thinking_level);
      if (check !== null) return { ok: false, code: check };
    }
    let effective: EffectiveConfig | null = null;
    try {
      await this.opts.settings.update(req.scope, async (doc) => {
        if (req.selection !== undefined) {
          doc["provider"] = req.selection.provider_id;
          doc["model"] = req.selection.model_id;
          doc["thinking_level"] = req.thinking_level ?? "default";
        } else if (req.thinking_level !== undefined) {
          doc["thinking_level"] = req.thinking_level;
        }
        if (req.fast !== undefined) doc["fast"] = req.fast;
        // Validate the resulting projection before committing.
        const next = SettingsSchema.safeParse(doc);
        if (!next.success) throw new Error("invalid result");
        effective = await this.project({ ...layers, [req.scope]: next.data });
        if (effective === null) throw new Error("invalid projection");
      });
    } catch {
      return { ok: false, code: "settings_write_failed" };
    }
    // Re-project from disk so concurrent writers to the other scope are reflected.
    const after = await this.get();
    const eff = after.ok ? after.value : effective;
    if (eff === null) return { ok: false, code: "settings_write_failed" };
    return { ok: true, value: { persisted: true, scope: req.scope, effective: eff } };
  }

  private async validateTarget(
    layers: SettingsLayers,
    target: Selection,
    level: ThinkingLevelValue | undefined,
  ): Promise<ConfigErrorCode | null> {
    if (!isSafeId(target.provider_id) || target.model_id === null || !isSafeId(target.model_id)) return "invalid_selection";
    const look = await lookupModel(layers, this.opts.cache, this.opts.env, target.provider_id, target.model_id);
    if (look.entry === undefined) return "invalid_selection";
    if (look.state === "unavailable") return "catalog_unavailable";
    if (look.state === "stale") return "catalog_stale";
    if (look.cached === undefined || look.cached.disabled) return "invalid_selection";
    if (level !== undefined && !look.cached.available_thinking_levels.includes(level)) return "unsupported_reasoning";
    return null;
  }

  /** The bounded `config.get` projection, or null when the effective selection is unsafe/unresolvable. */
  private async project(layers: SettingsLayers): Promise<EffectiveConfig | null> {
    const sel = resolveSelection(layers);
    if (!isSafeId(sel.provider_id) || sel.model_id === null || !isSafeId(sel.model_id)) return null;
    const look = await lookupModel(layers, this.opts.cache, this.opts.env, sel.provider_id, sel.model_id);
    const configured = configuredThinking(layers);
    return {
      selection: { provider_id: sel.provider_id, model_id: sel.model_id },
      thinking_level: resolveThinking(configured, look.meta.levels),
      configured_thinking_level: configured,
      available_thinking_levels: [...look.meta.levels],
      fast: fastSetting(layers),
      precedence: ["environment", "project", "global"],
      writable_scopes: ["global", "project"],
      global_only: ["fast"],
    };
  }
}
