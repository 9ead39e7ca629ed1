/**
 * Model discovery for the catalog: Anthropic `GET {base}/v1/models` (paginated), OpenAI
 * `GET {base}/models` (base includes `/v1`), OpenAI-compatible `GET {base_url}/models`.
 *
 * Contract: resolves to validated entries or rejects with a `ProviderFailure` whose message is a
 * fixed label (never a body, URL or credential). Each page read is bounded (default 4 MiB), pages
 * ≤ 10, entries ≤ 2000. Entries without a string `id` are dropped; optional numeric fields that are
 * not positive integers are omitted from the entry (the entry itself is kept).
 */
import type { CredentialSource, ProviderApi } from "../types.js";
import { isObject, type JsonObject } from "./accumulate.js";
import { anthropicHeaders } from "./anthropic.js";
import type { Credential, FetchLike } from "./driver.js";
import { abortedFailure, LABELS, limitFailure, protocolFailure, ProviderFailure, statusFailure } from "./errors.js";
import { openaiHeaders } from "./openai-responses.js";

export interface DiscoveredModel {
  id: string;
  label?: string;
  context_window?: number;
  max_output_tokens?: number;
}

export interface ListModelsOptions {
  api: ProviderApi;
  /** Resolved base URL (see `resolveBaseUrl`). */
  baseUrl: string;
  credentials: CredentialSource;
  headers?: Record<string, string>;
  fetch?: FetchLike;
  signal?: AbortSignal;
  maxResponseBytes?: number;
}

const MAX_PAGES = 10;
const MAX_MODELS = 2000;

const CONTEXT_KEYS = ["context_window", "max_input_tokens", "context_length", "max_model_len", "max_context_length"];
const OUTPUT_KEYS = ["max_output_tokens", "max_tokens", "max_completion_tokens"];

function positiveInt(o: JsonObject, keys: string[]): number | undefined {
  for (const k of keys) {
    const v = o[k];
    if (typeof v === "number" && Number.isInteger(v) && v > 0) return v;
  }
  return undefined;
}

function toModel(v: unknown): DiscoveredModel | null {
  if (!isObject(v)) return null;
  const id = v["id"];
  if (typeof id !== "string" || id.length === 0 || id.length > 256) return null;
  const m: DiscoveredModel = { id };
  const label = v["display_name"] ?? v["name"];
  if (typeof label === "string" && label.length > 0 && label.length <= 256 && label !== id) m.label = label;
  const cw = positiveInt(v, CONTEXT_KEYS);
  if (cw !== undefined) m.context_window = cw;
  const mo = positiveInt(v, OUTPUT_KEYS);
  if (mo !== undefined) m.max_output_tokens = mo;
  return m;
}

async function readBounded(res: Response, max: number, ctl: AbortController): Promise<string> {
  if (res.body === null) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    bytes += r.value.byteLength;
    if (bytes > max) {
      ctl.abort();
      throw limitFailure(LABELS.responseLimit);
    }
    chunks.push(r.value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

async function getJson(
  url: string,
  headers: Record<string, string>,
  opts: ListModelsOptions,
): Promise<JsonObject> {
  const ctl = new AbortController();
  const outer = opts.signal;
  const relay = (): void => ctl.abort();
  outer?.addEventListener("abort", relay, { once: true });
  try {
    if (outer?.aborted) throw abortedFailure();
    const f = opts.fetch ?? fetch;
    let res: Response;
    try {
      res = await f(url, { method: "GET", headers, signal: ctl.signal });
    } catch {
      throw outer?.aborted ? abortedFailure() : new ProviderFailure("network", LABELS.network, true);
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      throw statusFailure(res.status);
    }
    let text: string;
    try {
      text = await readBounded(res, opts.maxResponseBytes ?? 4 * 1024 * 1024, ctl);
    } catch (e) {
      if (e instanceof ProviderFailure) throw e;
      throw outer?.aborted ? abortedFailure() : new ProviderFailure("network", LABELS.disconnect, true);
    }
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      throw protocolFailure();
    }
    if (!isObject(v)) throw protocolFailure();
    return v;
  } finally {
    outer?.removeEventListener("abort", relay);
  }
}

/** Lists a provider's models. See the module contract. */
export async function listModels(opts: ListModelsOptions): Promise<DiscoveredModel[]> {
  let cred: Credential;
  try {
    cred = await opts.credentials();
  } catch {
    throw new ProviderFailure("auth", LABELS.credential, false);
  }
  const base = opts.baseUrl.replace(/\/+$/, "");
  const anthropic = opts.api === "anthropic";
  const headers = anthropic ? anthropicHeaders(cred, opts.headers) : openaiHeaders(cred, opts.headers);
  headers["accept"] = "application/json";
  delete headers["content-type"];
  const models: DiscoveredModel[] = [];
  const seen = new Set<string>();
  let after: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const url = anthropic
      ? `${base}/v1/models?limit=1000${after !== undefined ? `&after_id=${encodeURIComponent(after)}` : ""}`
      : `${base}/models`;
    const body = await getJson(url, headers, opts);
    const data = body["data"];
    if (!Array.isArray(data)) throw protocolFailure();
    for (const entry of data as unknown[]) {
      const m = toModel(entry);
      if (m === null || seen.has(m.id)) continue;
      if (models.length >= MAX_MODELS) throw limitFailure(LABELS.responseLimit);
      seen.add(m.id);
      models.push(m);
    }
    const last = body["last_id"];
    if (!anthropic || body["has_more"] !== true || typeof last !== "string" || last.length === 0) break;
    after = last;
  }
  return models;
}
