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
 *   `invalid_payload`; then `invalid_scope` (`configSetRequest`, which yields the typed request `ConfigService.set`
 *   takes: the payload is decoded once, here), then the catalog/selection codes in `ConfigService.set` order.
 * - Responses are the bounded projection only (no paths, URLs, environment names/values, credentials).
 */
import { configSetRequest, parseConfigSetShape, type ConfigService, type ConfigSetShape } from "../../store/settings/config.js";
import type { CatalogReader } from "../../store/catalog/catalog-reader.js";
import type { CatalogRefresher } from "../../runtime/auth/catalog-refresh.js";
import { catalogDescriptors } from "./catalog.js";
import { ConfigWorker } from "./config-worker.js";
import { emptyPayload, type MethodDescriptor, type MethodFamily, type Outcome, type ParseResult } from "./descriptor.js";

export interface CatalogConfigDeps {
  config: ConfigService;
  reader: CatalogReader;
  refresher: CatalogRefresher;
}

/** Shape-only validation of a `config.set` payload (required-ness is checked after initialization). */
export function parseConfigSetPayload(p: Record<string, unknown>): ParseResult<ConfigSetShape> {
  const r = parseConfigSetShape(p);
  return r.ok ? { ok: true, value: r.value } : { ok: false, error: r.code };
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

  const set: MethodDescriptor<ConfigSetShape> = {
    method: "config.set",
    sessionId: "forbidden",
    mode: "worker",
    parse: parseConfigSetPayload,
    handle: (_ctx, shape) =>
      worker.run(async (): Promise<Outcome> => {
        // Inside the worker, as before: a busy worker answers configuration_busy before these checks.
        const req = configSetRequest(shape);
        if (!req.ok) return { error: req.code };
        const r = await config.set(req.value);
        return r.ok ? { payload: { persisted: r.value.persisted, scope: r.value.scope, effective: { ...r.value.effective } } } : { error: r.code };
      }),
  };

  return {
    descriptors: [...catalogDescriptors({ reader: deps.reader, refresher: deps.refresher, worker }), get, set],
    drain: () => worker.idle(),
  };
}
