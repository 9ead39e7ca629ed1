/**
 * `config.get`, `config.set` (app-service v1 §Read effective settings, §Persist a scoped change), and the
 * catalog/config family that shares one configuration worker between these and the three catalog routes.
 * Wire projection only: `ConfigService` (src/store/settings/config.ts) owns validation order and the locked write.
 *
 * Contracts:
 * - Worker mode; one job at a time across all five routes (`configuration_busy`); EOF drains the running job
 *   without cancelling its write or refresh.
 * - `config.set` shape checks before initialization: unknown fields, explicit `null`, wrong types and unknown
 *   reasoning values → `invalid_payload`. Once initialized: missing `scope`, an empty mutation →
 *   `invalid_payload`; then `invalid_scope` and the catalog/selection codes in `ConfigService.set` order.
 * - Responses are the bounded projection only (no paths, URLs, environment names/values, credentials).
 */
import { THINKING_LEVELS as LEVELS } from "../../core/thinking.js";
import type { ConfigService } from "../../store/settings/config.js";
import type { CatalogReader } from "../../store/catalog/catalog-reader.js";
import type { CatalogRefresher } from "../../runtime/auth/catalog-refresh.js";
import { catalogDescriptors } from "./catalog.js";
import { ConfigWorker } from "./config-worker.js";
import { emptyPayload, onlyKeys, type MethodDescriptor, type MethodFamily, type Outcome, type ParseResult } from "./descriptor.js";

export interface CatalogConfigDeps {
  config: ConfigService;
  reader: CatalogReader;
  refresher: CatalogRefresher;
}

const THINKING_LEVELS: readonly string[] = LEVELS;

/** Shape-only validation of a `config.set` payload (required-ness is checked after initialization). */
export function parseConfigSetShape(p: Record<string, unknown>): ParseResult<Record<string, unknown>> {
  const bad = { ok: false as const, error: "invalid_payload" as const };
  if (!onlyKeys(p, ["scope", "selection", "thinking_level", "fast"])) return bad;
  if ("scope" in p && typeof p.scope !== "string") return bad;
  if ("thinking_level" in p && (typeof p.thinking_level !== "string" || !THINKING_LEVELS.includes(p.thinking_level))) return bad;
  if ("fast" in p && typeof p.fast !== "boolean") return bad;
  if ("selection" in p) {
    const s = p.selection;
    if (typeof s !== "object" || s === null || Array.isArray(s)) return bad;
    const sel = s as Record<string, unknown>;
    if (!onlyKeys(sel, ["provider_id", "model_id"]) || typeof sel.provider_id !== "string" || typeof sel.model_id !== "string") return bad;
  }
  return { ok: true, value: p };
}

export function catalogConfigMethods(deps: CatalogConfigDeps): MethodFamily {
  const worker = new ConfigWorker();
  const { config } = deps;

  const get: MethodDescriptor<Record<string, never>> = {
    method: "config.get",
    sessionId: "forbidden",
    mode: "worker",
    parse: emptyPayload,
    handle: () =>
      worker.run(async (): Promise<Outcome> => {
        const r = await config.get();
        return r.ok ? { payload: { ...r.value } } : { error: r.code };
      }),
  };

  const set: MethodDescriptor<Record<string, unknown>> = {
    method: "config.set",
    sessionId: "forbidden",
    mode: "worker",
    parse: parseConfigSetShape,
    handle: (_ctx, p) =>
      worker.run(async (): Promise<Outcome> => {
        const r = await config.set(p);
        return r.ok ? { payload: { persisted: r.value.persisted, scope: r.value.scope, effective: { ...r.value.effective } } } : { error: r.code };
      }),
  };

  return {
    descriptors: [...catalogDescriptors({ reader: deps.reader, refresher: deps.refresher, worker }), get, set],
    drain: () => worker.idle(),
  };
}
