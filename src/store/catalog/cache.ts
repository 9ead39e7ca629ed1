/**
 * The per-provider model catalog cache: `$MC_HOME/catalog/<sha256(provider id)>.json` (0600, in a
 * 0700 directory created lazily), atomically replaced under a file lock.
 *
 * Contracts:
 * - `read` never throws and never touches the network. States: `fresh_cache` (unexpired, matching
 *   the provider's current configuration fingerprint), `stale` (expired but matching), or
 *   `unavailable` (missing, unreadable, malformed, empty or fingerprint mismatch → no models).
 * - Models are validated again on read (unsafe IDs omitted, deduplicated by ID keeping the first,
 *   order preserved, labels sanitized, levels normalized), so a hand-edited cache cannot inject
 *   anything a fresh discovery could not.
 * - `toWireModel` produces exactly the seven wire fields; `available` is true only for
 *   non-disabled models of a `fresh_cache`.
 * - `read` re-reads and re-validates a provider's file only when its identity changed (`JsonFileMemo`: one `stat`
 *   per read otherwise), so every turn's cache-only lookup sees a rewrite without parsing an unchanged file again;
 *   expiry is decided against the clock at every read. The memo judges a file's last change against the same clock.
 */
import { sha256Hex } from "../../core/sha256.js";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { arr, bool, lit, nullable, num, obj, str, unknownValue } from "../validate.js";
import { JsonFileMemo, withFileLock, writeJsonAtomic } from "../settings/locked-json.js";
import type { ThinkingLevelValue } from "../settings/schema.js";
import { isSafeId, sanitizeLabel } from "./ids.js";
import { normalizeLevels } from "./fallback.js";

export type CatalogState = "fresh_cache" | "stale" | "unavailable";

export interface CatalogModel {
  model_id: string;
  label: string;
  context_window: number | null;
  max_output_tokens: number | null;
  available_thinking_levels: ThinkingLevelValue[];
  disabled: boolean;
}

export interface CatalogView {
  state: CatalogState;
  /** Empty when `unavailable`. */
  models: CatalogModel[];
}

export interface WireModel {
  provider_id: string;
  model_id: string;
  label: string;
  available: boolean;
  context_window: number | null;
  max_output_tokens: number | null;
  available_thinking_levels: ThinkingLevelValue[];
}

/** Upper bound on models kept per provider (discovery beyond this is cut). */
export const MAX_CATALOG_MODELS = 2000;
export const DEFAULT_CATALOG_TTL_MS = 24 * 60 * 60 * 1000;

const TokenCount = nullable(num({ int: true, positive: true, max: 100_000_000 }));
const CacheModelSchema = obj<{ model_id: string; label: string; context_window: number | null; max_output_tokens: number | null; available_thinking_levels: string[]; disabled: boolean }>({
  model_id: str(),
  label: str(),
  context_window: TokenCount,
  max_output_tokens: TokenCount,
  available_thinking_levels: arr(str(), { max: 6 }),
  disabled: bool(),
});
const CacheFileSchema = obj<{ version: 1; provider_id: string; fingerprint: string; fetched_at: number; expires_at: number; models: unknown[] }>({
  version: lit(1),
  provider_id: str(),
  fingerprint: str(),
  fetched_at: num(),
  expires_at: num(),
  models: arr(unknownValue(), { max: MAX_CATALOG_MODELS }),
});

/** Validates, sanitizes and deduplicates models, preserving first-seen order. */
export function cleanModels(models: readonly unknown[]): CatalogModel[] {
  const seen = new Set<string>();
  const out: CatalogModel[] = [];
  for (const raw of models) {
    const m = CacheModelSchema.safeParse(raw);
    if (!m.success || !isSafeId(m.data.model_id) || seen.has(m.data.model_id)) continue;
    seen.add(m.data.model_id);
    out.push({
      model_id: m.data.model_id,
      label: sanitizeLabel(m.data.label, m.data.model_id),
      context_window: m.data.context_window,
      max_output_tokens: m.data.max_output_tokens,
      available_thinking_levels: normalizeLevels(m.data.available_thinking_levels),
      disabled: m.data.disabled,
    });
    if (out.length >= MAX_CATALOG_MODELS) break;
  }
  return out;
}

export function toWireModel(providerId: string, state: CatalogState, m: CatalogModel): WireModel {
  return {
    provider_id: providerId,
    model_id: m.model_id,
    label: m.label,
    available: state === "fresh_cache" && !m.disabled,
    context_window: m.context_window,
    max_output_tokens: m.max_output_tokens,
    available_thinking_levels: [...m.available_thinking_levels],
  };
}

export interface CatalogCacheOptions {
  home: string;
  now?: () => number;
  ttlMs?: number;
}

/** Providers whose file memos a `CatalogCache` keeps (more: all are dropped and rebuilt as read). */
const MAX_MEMOS = 64;

/** A provider's cache file as `read` needs it (null: not a valid cache file). */
interface CacheFile {
  provider_id: string;
  fingerprint: string;
  expires_at: number;
  models: CatalogModel[];
}

function decodeCacheFile(raw: unknown): CacheFile | null {
  const file = CacheFileSchema.safeParse(raw);
  if (!file.success) return null;
  return { provider_id: file.data.provider_id, fingerprint: file.data.fingerprint, expires_at: file.data.expires_at, models: cleanModels(file.data.models) };
}

export class CatalogCache {
  private readonly dir: string;
  private readonly now: () => number;
  readonly ttlMs: number;
  /** Per provider ID: its file's read-side memo. */
  private readonly memos = new Map<string, JsonFileMemo<CacheFile | null>>();

  constructor(opts: CatalogCacheOptions) {
    this.dir = join(opts.home, "catalog");
    this.now = opts.now ?? Date.now;
    this.ttlMs = opts.ttlMs ?? DEFAULT_CATALOG_TTL_MS;
  }

  private fileFor(providerId: string): string {
    return join(this.dir, sha256Hex(providerId) + ".json");
  }

  async read(providerId: string, fingerprint: string): Promise<CatalogView> {
    const none: CatalogView = { state: "unavailable", models: [] };
    let memo = this.memos.get(providerId);
    if (memo === undefined) {
      if (this.memos.size >= MAX_MEMOS) this.memos.clear();
      memo = new JsonFileMemo(this.fileFor(providerId), (raw) => (raw === undefined ? null : decodeCacheFile(raw)), this.now);
      this.memos.set(providerId, memo);
    }
    let file: CacheFile | null;
    try {
      file = await memo.read();
    } catch {
      return none;
    }
    if (file === null || file.provider_id !== providerId || file.fingerprint !== fingerprint || file.models.length === 0) return none;
    return { state: file.expires_at > this.now() ? "fresh_cache" : "stale", models: file.models };
  }

  /** Replaces the provider's cache with `models` (cleaned first), fresh for `ttlMs`. Throws `JsonFileError`. */
  async write(providerId: string, fingerprint: string, models: readonly CatalogModel[]): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const path = this.fileFor(providerId);
    const now = this.now();
    await withFileLock(path, () =>
      writeJsonAtomic(
        path,
        { version: 1, provider_id: providerId, fingerprint, fetched_at: now, expires_at: now + this.ttlMs, models: cleanModels(models) },
        0o600,
      ),
    );
  }
}

/** One page of `items`: `next_offset` is null at the end; an offset beyond the end is an empty page. */
export function page<T>(items: readonly T[], offset: number, limit: number): { entries: T[]; next_offset: number | null } {
  const entries = items.slice(offset, offset + limit);
  const next = offset + limit;
  return { entries, next_offset: next < items.length ? next : null };
}
