/**
 * Model discovery through each provider's real models endpoint — the one implementation (the catalog refresh uses
 * it; the provider modules have none):
 * - Anthropic Messages API: `GET {base}/v1/models?limit=1000`, then `&after_id=<last_id>` while `has_more` (at most
 *   `MAX_PAGES` pages; `x-api-key` or bearer, `anthropic-version`);
 * - OpenAI / OpenAI-compatible: `GET {base_url}/models` (bearer key when configured) — for
 *   `https://api.openai.com/v1` that is `/v1/models`;
 * - openai-codex: `GET {codex base}/models` with the OAuth bearer and `chatgpt-account-id` (`{models:[{slug}]}`).
 * Contracts: each page one bounded request (body ≤ `maxBytes`, default 4 MiB), one timeout for the whole discovery,
 * no redirects followed, order preserved, duplicates and entries without a usable `id` dropped, at most
 * `MAX_DISCOVERED_MODELS`. Context/output sizes are taken from the field names several servers use; a value that is
 * not a positive integer is left out (the entry is kept). Failures throw `DiscoveryError` with a fixed reason —
 * never a URL, status body or credential.
 */
import type { CredentialSource } from "../types.js";
import { boundedFetch, BoundedFetchError, type FetchFn } from "./http.js";

export type DiscoveryApi = "anthropic" | "openai" | "codex";

export interface DiscoveredModel {
  id: string;
  label?: string;
  context_window?: number;
  max_output_tokens?: number;
}

export class DiscoveryError extends Error {
  constructor(readonly reason: "credential" | "network" | "timeout" | "http" | "malformed" | "too_large") {
    super(`model discovery ${reason}`);
    this.name = "DiscoveryError";
  }
}

export const MAX_DISCOVERY_BYTES = 4 * 1024 * 1024;
export const MAX_DISCOVERED_MODELS = 2000;
export const MAX_PAGES = 10;

export interface DiscoveryRequest {
  api: DiscoveryApi;
  baseUrl: string;
  credential: Awaited<ReturnType<CredentialSource>>;
  timeoutMs: number;
  fetch?: FetchFn;
  /** Bound of one page's body (default `MAX_DISCOVERY_BYTES`). */
  maxBytes?: number;
}

export async function discoverModels(req: DiscoveryRequest): Promise<DiscoveredModel[]> {
  const base = req.baseUrl.replace(/\/+$/, "");
  const headers: Record<string, string> = { accept: "application/json" };
  const cred = req.credential;
  const anthropic = req.api === "anthropic";
  if (anthropic) {
    headers["anthropic-version"] = "2023-06-01";
    if (cred?.kind === "api_key") headers["x-api-key"] = cred.value;
    else if (cred?.kind === "bearer") headers["authorization"] = `Bearer ${cred.value}`;
  } else {
    if (cred !== null) headers["authorization"] = `Bearer ${cred.value}`;
    if (req.api === "codex" && cred?.accountId !== undefined) headers["chatgpt-account-id"] = cred.accountId;
  }
  const signal = AbortSignal.timeout(req.timeoutMs);
  const get = boundedFetch(req.maxBytes ?? MAX_DISCOVERY_BYTES, req.fetch);
  const out = new ModelList();
  let after: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const url = anthropic ? `${base}/v1/models?limit=1000${after !== undefined ? `&after_id=${encodeURIComponent(after)}` : ""}` : `${base}/models`;
    let res: Response;
    try {
      res = await get(url, { method: "GET", headers, signal });
    } catch (err) {
      throw new DiscoveryError(err instanceof BoundedFetchError ? err.reason : "network");
    }
    if (res.status < 200 || res.status > 299) throw new DiscoveryError("http");
    let body: unknown;
    try {
      body = JSON.parse(await res.text()) as unknown;
    } catch {
      throw new DiscoveryError("malformed");
    }
    out.add(body);
    const o = body as Record<string, unknown>;
    const last = o["last_id"];
    if (!anthropic || o["has_more"] !== true || typeof last !== "string" || last === "" || out.full) break;
    after = last;
  }
  return out.models;
}

const CONTEXT_KEYS = ["max_input_tokens", "context_window", "context_length", "max_model_len", "max_context_length"];
const OUTPUT_KEYS = ["max_tokens", "max_output_tokens", "max_completion_tokens"];

const positive = (m: Record<string, unknown>, keys: string[]): number | undefined => {
  for (const k of keys) {
    const v = m[k];
    if (typeof v === "number" && Number.isInteger(v) && v > 0 && v <= 100_000_000) return v;
  }
  return undefined;
};

class ModelList {
  readonly models: DiscoveredModel[] = [];
  private readonly seen = new Set<string>();

  get full(): boolean {
    return this.models.length >= MAX_DISCOVERED_MODELS;
  }

  add(body: unknown): void {
    for (const m of parseModelList(body)) {
      if (this.full) return;
      if (this.seen.has(m.id)) continue;
      this.seen.add(m.id);
      this.models.push(m);
    }
  }
}

/** Accepts `{data:[{id,...}]}` (Anthropic, OpenAI) or `{models:[{slug|id,...}]}` (Codex). */
export function parseModelList(body: unknown): DiscoveredModel[] {
  if (typeof body !== "object" || body === null) throw new DiscoveryError("malformed");
  const o = body as Record<string, unknown>;
  const list = Array.isArray(o["data"]) ? o["data"] : Array.isArray(o["models"]) ? o["models"] : null;
  if (list === null) throw new DiscoveryError("malformed");
  const out: DiscoveredModel[] = [];
  for (const item of list.slice(0, MAX_DISCOVERED_MODELS)) {
    if (typeof item !== "object" || item === null) continue;
    const m = item as Record<string, unknown>;
    const id = typeof m["id"] === "string" ? m["id"] : typeof m["slug"] === "string" ? m["slug"] : undefined;
    if (id === undefined || id === "" || id.length > 256) continue;
    const name = m["display_name"] ?? m["name"];
    const label = typeof name === "string" && name !== "" && name.length <= 256 && name !== id ? name : undefined;
    const cw = positive(m, CONTEXT_KEYS);
    const mo = positive(m, OUTPUT_KEYS);
    out.push({ id, ...(label !== undefined ? { label } : {}), ...(cw !== undefined ? { context_window: cw } : {}), ...(mo !== undefined ? { max_output_tokens: mo } : {}) });
  }
  return out;
}
