/**
 * Provider factory and resolution helpers. `createProvider` turns a provider definition plus a
 * credential source into a `Provider` whose streams follow the contract in `../types.ts`.
 */
import { PROVIDER_BOUNDS, type CredentialSource, type Provider, type ProviderApi, type ProviderRequest } from "../types.js";
import type { ProviderBounds } from "./accumulate.js";
import { ANTHROPIC_DEFAULT_BASE_URL, AnthropicDecoder, buildAnthropicRequest } from "./anthropic.js";
import { DEFAULT_RETRY, driveBatches, driveStream, type DriveParams, type FetchLike, type StreamFetch, type RetryPolicy, type WireDecoder, type WireRequest, type Credential } from "./driver.js";
import { buildChatRequest, ChatDecoder } from "./openai-chat.js";
import { nodeFetch } from "./node-fetch.js";
import { buildResponsesRequest, OPENAI_DEFAULT_BASE_URL, ResponsesDecoder } from "./openai-responses.js";

export { ProviderFailure, LABELS as PROVIDER_ERROR_LABELS } from "./errors.js";
export { DEFAULT_RETRY, abortableSleep, type FetchLike, type RetryPolicy } from "./driver.js";
export type { ProviderBounds } from "./accumulate.js";

/** What a provider needs besides its credential. */
export interface ProviderConfig {
  api: ProviderApi;
  /**
   * Base URL. Anthropic: the host root (`/v1/messages` is appended). OpenAI Responses and
   * Chat Completions: the API root including any version path (`/responses`, `/chat/completions`
   * are appended). When absent: `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` or the public default;
   * `openai-chat` has no default.
   */
  baseUrl?: string;
  /** Full endpoint URL, overriding `baseUrl` + path (e.g. the codex backend). */
  endpoint?: string;
  /** Extra request headers (never logged). Protocol headers set by the module win over these. */
  headers?: Record<string, string>;
  /** Tighter read bounds (tests); never looser than PROVIDER_BOUNDS in production use. */
  bounds?: Partial<ProviderBounds>;
}

export interface ProviderOptions {
  fetch?: FetchLike;
  retry?: Partial<RetryPolicy>;
  /** Environment for base-URL resolution; defaults to `process.env`. */
  env?: Record<string, string | undefined>;
}

/** Base URL for an API: configured value, else the API's env override, else the public default. */
export function resolveBaseUrl(
  api: ProviderApi,
  configured: string | undefined,
  env: Record<string, string | undefined> = process.env,
): string {
  const pick = (v: string | undefined): string | undefined => (v !== undefined && v.trim().length > 0 ? v.trim() : undefined);
  const url =
    pick(configured) ??
    (api === "anthropic"
      ? (pick(env["ANTHROPIC_BASE_URL"]) ?? ANTHROPIC_DEFAULT_BASE_URL)
      : api === "openai-responses"
        ? (pick(env["OPENAI_BASE_URL"]) ?? OPENAI_DEFAULT_BASE_URL)
        : undefined);
  if (url === undefined) throw new Error("openai-chat providers need a base_url");
  return url.replace(/\/+$/, "");
}

/** Creates a provider. Throws only for a definition that cannot work (bad/missing base URL). */
export function createProvider(
  providerId: string,
  def: ProviderConfig,
  credentials: CredentialSource,
  opts: ProviderOptions = {},
): Provider {
  const base = resolveBaseUrl(def.api, def.baseUrl, opts.env);
  new URL(def.endpoint ?? base); // validate once, at creation
  const bounds: ProviderBounds = { ...PROVIDER_BOUNDS, ...def.bounds };
  const retry: RetryPolicy = { ...DEFAULT_RETRY, ...opts.retry };
  const doFetch: StreamFetch = opts.fetch ?? nodeFetch;
  let build: (req: ProviderRequest, cred: Credential) => WireRequest;
  let decoder: () => WireDecoder;
  switch (def.api) {
    case "anthropic":
      build = (req, cred) => {
        const w = buildAnthropicRequest(base, req, cred, def.headers);
        return def.endpoint !== undefined ? { ...w, url: def.endpoint } : w;
      };
      decoder = () => new AnthropicDecoder(bounds);
      break;
    case "openai-responses": {
      const endpoint = def.endpoint ?? `${base}/responses`;
      build = (req, cred) => buildResponsesRequest(endpoint, req, cred, def.headers);
      decoder = () => new ResponsesDecoder(bounds);
      break;
    }
    case "openai-chat":
      build = (req, cred) => {
        const w = buildChatRequest(base, req, cred, def.headers);
        return def.endpoint !== undefined ? { ...w, url: def.endpoint } : w;
      };
      decoder = () => new ChatDecoder(bounds);
      break;
  }
  const params = (req: ProviderRequest): DriveParams => ({
    signal: req.signal,
    ...(req.gate !== undefined ? { gate: req.gate } : {}),
    credentials,
    build: (cred) => build(req, cred),
    decoder,
    fetch: doFetch,
    retry,
    bounds,
  });
  return {
    id: providerId,
    api: def.api,
    stream: (req) => driveStream(params(req)),
    streamBatches: (req) => driveBatches(params(req)),
  };
}
