/**
 * `catalog.providers`, `catalog.models`, `catalog.refresh` (app-service v1 §Provider and model catalogs).
 * Wire projection only; cache reads live in src/store/catalog, discovery in src/runtime/auth/catalog-refresh.ts.
 *
 * Contracts:
 * - All three run on the shared configuration worker (`configuration_busy` while it is occupied) in `worker`
 *   mode, so turn output and cancellation stay available during a refresh.
 * - Payload rules, checked before initialization: unknown fields, wrong types, a non-integer or negative
 *   `offset`, `offset` > 100000, `limit` < 1 → `invalid_payload`; `limit` > 32 → `limit_exceeded` (the catalog
 *   page limit). A missing `provider_id` is `invalid_payload` once initialized.
 * - An unknown, unsafe or unconfigured provider ID → `invalid_selection` (`catalog.models`, `catalog.refresh`).
 * - Unreadable settings → `configuration_unavailable`; a failed refresh → `catalog_refresh_failed` (no details).
 * - `providers`/`models` are cache-only (`refresh:"cache_only"`): no discovery, no credential use.
 */
import { LIMITS } from "./limits.js";
import { isSafeId } from "../../store/catalog/ids.js";
import { page, type CatalogState } from "../../store/catalog/cache.js";
import type { CatalogReader } from "../../store/catalog/catalog-reader.js";
import type { CatalogRefresher } from "../../runtime/auth/catalog-refresh.js";
import { onlyKeys, type MethodDescriptor, type Outcome, type ParseResult } from "./descriptor.js";
import type { ConfigWorker } from "./config-worker.js";

export const MAX_CATALOG_OFFSET = 100_000;

export interface CatalogDescriptorsDeps {
  reader: CatalogReader;
  refresher: CatalogRefresher;
  worker: ConfigWorker;
}

interface PageParams {
  provider_id?: string;
  offset: number;
  limit: number;
}

/** `{provider_id?, offset?, limit?}` with the module's bounds; `withProvider` admits `provider_id`. */
export function parseCatalogPage(p: Record<string, unknown>, withProvider: boolean): ParseResult<PageParams> {
  const bad = { ok: false as const, error: "invalid_payload" as const };
  if (!onlyKeys(p, withProvider ? ["provider_id", "offset", "limit"] : ["offset", "limit"])) return bad;
  const offset = p.offset === undefined ? 0 : p.offset;
  const limit = p.limit === undefined ? LIMITS.max_catalog_page_items : p.limit;
  if (typeof offset !== "number" || !Number.isInteger(offset) || offset < 0 || offset > MAX_CATALOG_OFFSET) return bad;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1) return bad;
  if (limit > LIMITS.max_catalog_page_items) return { ok: false, error: "limit_exceeded" };
  const out: PageParams = { offset, limit };
  if ("provider_id" in p) {
    if (typeof p.provider_id !== "string") return bad;
    out.provider_id = p.provider_id;
  }
  return { ok: true, value: out };
}

export function parseRefresh(p: Record<string, unknown>): ParseResult<{ provider_id?: string }> {
  if (!onlyKeys(p, ["provider_id"])) return { ok: false, error: "invalid_payload" };
  if ("provider_id" in p && typeof p.provider_id !== "string") return { ok: false, error: "invalid_payload" };
  return { ok: true, value: "provider_id" in p ? { provider_id: p.provider_id as string } : {} };
}

export function catalogDescriptors(deps: CatalogDescriptorsDeps): MethodDescriptor[] {
  const { reader, refresher, worker } = deps;

  const providers: MethodDescriptor<PageParams> = {
    method: "catalog.providers",
    sessionId: "forbidden",
    mode: "worker",
    parse: (p) => parseCatalogPage(p, false),
    handle: (_ctx, { offset, limit }) =>
      worker.run(async (): Promise<Outcome> => {
        let list;
        try {
          list = await reader.providers();
        } catch {
          return { error: "configuration_unavailable" };
        }
        const pg = page(list, offset, limit);
        return { payload: { entries: pg.entries.map((e) => ({ ...e })), next_offset: pg.next_offset, refresh: "cache_only" } };
      }),
  };

  const models: MethodDescriptor<PageParams> = {
    method: "catalog.models",
    sessionId: "forbidden",
    mode: "worker",
    parse: (p) => parseCatalogPage(p, true),
    handle: (_ctx, { provider_id, offset, limit }) =>
      worker.run(async (): Promise<Outcome> => {
        if (provider_id === undefined) return { error: "invalid_payload" };
        if (!isSafeId(provider_id)) return { error: "invalid_selection" };
        let view: { state: CatalogState; entries: unknown[] } | null;
        try {
          view = await reader.models(provider_id);
        } catch {
          return { error: "configuration_unavailable" };
        }
        if (view === null) return { error: "invalid_selection" };
        const pg = page(view.entries, offset, limit);
        return { payload: { entries: pg.entries, next_offset: pg.next_offset, state: view.state, refresh: "cache_only" } };
      }),
  };

  const refresh: MethodDescriptor<{ provider_id?: string }> = {
    method: "catalog.refresh",
    sessionId: "forbidden",
    mode: "worker",
    parse: parseRefresh,
    handle: (_ctx, { provider_id }) =>
      worker.run(async (): Promise<Outcome> => {
        if (provider_id === undefined) return { error: "invalid_payload" };
        if (!isSafeId(provider_id)) return { error: "invalid_selection" };
        const r = await refresher.refresh(provider_id);
        if (r.ok) return { payload: { provider_id: r.provider_id, state: r.state } };
        return { error: r.code === "unknown_provider" ? "invalid_selection" : r.code };
      }),
  };

  return [providers, models, refresh];
}
