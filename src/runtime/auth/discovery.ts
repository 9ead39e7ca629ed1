/**
 * Model discovery through each provider's real models endpoint (written here because the
 * provider modules had no `listModels` when this landed):
 * - Anthropic Messages API: `GET {base}/v1/models?limit=1000` (`x-api-key` or bearer, `anthropic-version`);
 * - OpenAI / OpenAI-compatible: `GET {base_url}/models` (bearer key when configured) — for
 *   `https://api.openai.com/v1` that is `/v1/models`;
 * - openai-codex: `GET {codex base}/models` with the OAuth bearer and `chatgpt-account-id`.
 * Contracts: one bounded request (body ≤ 4 MiB, timeout), no redirects followed, order preserved.
 * Failures throw `DiscoveryError` with a fixed reason — never a URL, status body or credential.
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

export interface DiscoveryRequest {
  api: DiscoveryApi;
  baseUrl: string;
  credential: Awaited<ReturnType<CredentialSource>>;
  timeoutMs: number;
  fetch?: FetchFn;
}

export async function discoverModels(req: DiscoveryRequest): Promise<DiscoveredModel[]> {
  const base = req.baseUrl.replace(/\/+$/, "");
  const headers: Record<string, string> = { accept: "application/json" };
  const cred = req.credential;
  let url: string;
  if (req.api === "anthropic") {
    url = `${base}/v1/models?limit=1000`;
    headers["anthropic-version"] = "2023-06-01";
    if (cred?.kind === "api_key") headers["x-api-key"] = cred.value;
    else if (cred?.kind === "bearer") headers["authorization"] = `Bearer ${cred.value}`;
  } else {
    url = `${base}/models`;
    if (cred !== null) headers["authorization"] = `Bearer ${cred.value}`;
    if (req.api === "codex" && cred?.accountId !== undefined) headers["chatgpt-account-id"] = cred.accountId;
  }
  let res: Response;
  try {
    res = await boundedFetch(MAX_DISCOVERY_BYTES, req.fetch)(url, { method: "GET", headers, signal: AbortSignal.timeout(req.timeoutMs) });
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
  return parseModelList(body);
}

const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isInteger(v) && v > 0 && v <= 100_000_000 ? v : undefined);

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
    if (id === undefined) continue;
    const label = typeof m["display_name"] === "string" ? m["display_name"] : undefined;
    const cw = num(m["max_input_tokens"]) ?? num(m["context_window"]) ?? num(m["context_length"]);
    const mo = num(m["max_tokens"]) ?? num(m["max_output_tokens"]);
    out.push({ id, ...(label !== undefined ? { label } : {}), ...(cw !== undefined ? { context_window: cw } : {}), ...(mo !== undefined ? { max_output_tokens: mo } : {}) });
  }
  return out;
}
