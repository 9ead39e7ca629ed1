/**
 * Provider factory and resolution helpers. `createProvider` turns a provider definition plus a
 * credential source into a `Provider` whose streams follow the contract in `../types.ts`.
 */
import type { ModelDef, ProviderDef } from "../../store/settings/schema.js";
import { PROVIDER_BOUNDS, type CredentialSource, type Provider, type ProviderApi, type ProviderRequest } from "../types.js";
import type { ProviderBounds } from "./accumulate.js";
import { ANTHROPIC_DEFAULT_BASE_URL, AnthropicDecoder, buildAnthropicRequest } from "./anthropic.js";
import { DEFAULT_RETRY, driveStream, type FetchLike, type StreamFetch, type RetryPolicy, type WireDecoder, type WireRequest, type Credential } from "./driver.js";
import { buildChatRequest, ChatDecoder } from "./openai-chat.js";
import { nodeFetch } from "./node-fetch.js";
import { buildResponsesRequest, OPENAI_DEFAULT_BASE_URL, ResponsesDecoder } from "./openai-responses.js";

export { ProviderFailure, LABELS as PROVIDER_ERROR_LABELS } from "./errors.js";
export { listModels, type DiscoveredModel, type ListModelsOptions } from "./models.js";
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
  return {
    id: providerId,
    api: def.api,
    stream: (req) =>
      driveStream({
        signal: req.signal,
        credentials,
        build: (cred) => build(req, cred),
        decoder,
        fetch: doFetch,
        retry,
        bounds,
      }),
  };
}

/** Built-in providers: their API, env key and (optional) fixed base URL. */
export const BUILTIN_PROVIDERS: Readonly<Record<string, { api: ProviderApi; apiKeyEnv?: string; baseUrl?: string }>> = {
  anthropic: { api: "anthropic", apiKeyEnv: "ANTHROPIC_API_KEY" },
  openai: { api: "openai-responses", apiKeyEnv: "OPENAI_API_KEY" },
  // Credential (OAuth bearer + account id) comes from the auth layer through a CredentialSource.
  "openai-codex": { api: "openai-responses", baseUrl: "https://chatgpt.com/backend-api/codex" },
};

/**
 * A credential source reading an API key from the environment at each request (so a changed
 * variable is picked up). A missing/empty variable rejects, which the stream reports as `auth`.
 */
export function envApiKey(name: string, env: Record<string, string | undefined> = process.env): CredentialSource {
  return () => {
    const v = env[name];
    if (v === undefined || v.length === 0) return Promise.reject(new Error("credential unavailable"));
    return Promise.resolve({ kind: "api_key", value: v });
  };
}

export const NO_CREDENTIAL: CredentialSource = () => Promise.resolve(null);

/** Provider config + credential source for a custom provider declared in settings. */
export function fromSettings(
  def: ProviderDef,
  env: Record<string, string | undefined> = process.env,
): { config: ProviderConfig; credentials: CredentialSource } {
  return {
    config: { api: def.api, baseUrl: def.base_url },
    credentials: def.api_key_env !== undefined ? envApiKey(def.api_key_env, env) : NO_CREDENTIAL,
  };
}

/** Finds an enabled model by id in a provider's declared list. */
export function findModel(models: readonly ModelDef[], id: string): ModelDef | undefined {
  return models.find((m) => m.id === id && m.disabled !== true);
}
