/**
 * What every provider shares whichever wire format it speaks: its configuration, base-URL resolution and the
 * assembly of a `Provider` from one wire format (`Wire`: request builder + stream decoder). The three formats live in
 * their own modules; `index.ts` (`createProvider`) imports them all, `open.ts` (`openProvider`) loads only the one a
 * provider speaks (a fresh process's first turn then compiles one driver, not three; docs/runtime.md, "First turn").
 */
import { PROVIDER_BOUNDS, type CredentialSource, type Provider, type ProviderApi, type ProviderRequest } from "../types.js";
import type { ProviderBounds } from "./accumulate.js";
import { DEFAULT_RETRY, driveBatches, driveStream, type DriveParams, type FetchLike, type StreamFetch, type StreamFetchInit, type RetryPolicy, type WireDecoder, type WireRequest, type Credential } from "./driver.js";
import { nodeFetch, preconnect } from "./node-fetch.js";
import { ANTHROPIC_DEFAULT_BASE_URL, OPENAI_DEFAULT_BASE_URL, resolveBaseUrl } from "./base-url.js";

export { ANTHROPIC_DEFAULT_BASE_URL, OPENAI_DEFAULT_BASE_URL, resolveBaseUrl };

/** One wire format: builds a request for `url` (the endpoint, or the base its builder appends a path to) and decodes. */
export interface Wire {
  build(base: string, endpoint: string | undefined, req: ProviderRequest, cred: Credential, headers: Record<string, string> | undefined): WireRequest;
  decoder(bounds: ProviderBounds): WireDecoder;
}

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
  /** How long a response may send nothing before it is cut off (ms; settings `stream_idle_timeout_ms`). */
  idleTimeoutMs?: number;
}

export interface ProviderOptions {
  /**
   * A Fetch-standard fetch (the global `fetch`) to send requests with instead of Berth's own HTTP client: it undoes
   * the content codings it knows itself, so Berth decodes only a body it left encoded (content-coding.ts).
   */
  fetch?: FetchLike;
  retry?: Partial<RetryPolicy>;
  /** Environment for base-URL resolution; defaults to `process.env`. */
  env?: Record<string, string | undefined>;
}

/** Bearer auth for both `api_key` and `bearer` credentials; `accountId` → `chatgpt-account-id`. */
export function openaiHeaders(cred: Credential, extra: Record<string, string> | undefined): Record<string, string> {
  const h: Record<string, string> = { ...extra, "content-type": "application/json", accept: "text/event-stream" };
  if (cred !== null) {
    h["authorization"] = `Bearer ${cred.value}`;
    if (cred.accountId !== undefined) h["chatgpt-account-id"] = cred.accountId;
  }
  return h;
}

/** A provider speaking `wire`. Throws only for a definition that cannot work (bad/missing base URL). */
/** A provider as `assembleProvider` builds it: `warm` opens its connection again (see below) for a reused provider. */
export type OpenedProvider = Provider & { warm(): void };

export function assembleProvider(providerId: string, def: ProviderConfig, credentials: CredentialSource, opts: ProviderOptions, wire: Wire): OpenedProvider {
  const base = resolveBaseUrl(def.api, def.baseUrl, opts.env);
  new URL(def.endpoint ?? base); // validate once, at creation
  const bounds: ProviderBounds = { ...PROVIDER_BOUNDS, ...def.bounds };
  const retry: RetryPolicy = { ...DEFAULT_RETRY, ...opts.retry };
  // A caller's fetch is a Fetch-standard one (the global `fetch`): it decodes content codings itself (`decodes`).
  const given = opts.fetch;
  const doFetch: StreamFetch = given === undefined ? nodeFetch : Object.assign((url: string, init: StreamFetchInit) => given(url, init), { decodes: true as const });
  // A provider is built at warm-up (a fresh process creating its first session) and reused by turns (agent.ts): either
  // way its connection opens now and at each turn's start (`warm`), so the request finds it connected (a no-op while
  // one idles in the keep-alive pool).
  const warm = (): void => {
    if (doFetch === nodeFetch) preconnect(def.endpoint ?? base); // https: loads node:https here, not at the request
  };
  warm();
  const params = (req: ProviderRequest): DriveParams => ({
    signal: req.signal,
    ...(req.gate !== undefined ? { gate: req.gate } : {}),
    credentials,
    build: (cred) => wire.build(base, def.endpoint, req, cred, def.headers),
    decoder: () => wire.decoder(bounds),
    fetch: doFetch,
    retry,
    bounds,
    ...(def.idleTimeoutMs !== undefined ? { idleTimeoutMs: def.idleTimeoutMs } : {}),
  });
  return {
    id: providerId,
    api: def.api,
    stream: (req) => driveStream(params(req)),
    streamBatches: (req) => driveBatches(params(req)),
    warm,
  };
}

/** The wire format of each API, from its driver module (passed in, so a caller may load only the one it needs). */
export const wires = {
  anthropic: (m: typeof import("./anthropic.js")): Wire => ({
    build: (base, endpoint, req, cred, headers) => {
      const w = m.buildAnthropicRequest(base, req, cred, headers);
      return endpoint !== undefined ? { ...w, url: endpoint } : w;
    },
    decoder: (bounds) => new m.AnthropicDecoder(bounds),
  }),
  "openai-responses": (m: typeof import("./openai-responses.js")): Wire => ({
    build: (base, endpoint, req, cred, headers) => m.buildResponsesRequest(endpoint ?? `${base}/responses`, req, cred, headers),
    decoder: (bounds) => new m.ResponsesDecoder(bounds),
  }),
  "openai-chat": (m: typeof import("./openai-chat.js")): Wire => ({
    build: (base, endpoint, req, cred, headers) => {
      const w = m.buildChatRequest(base, req, cred, headers);
      return endpoint !== undefined ? { ...w, url: endpoint } : w;
    },
    decoder: (bounds) => new m.ChatDecoder(bounds),
  }),
};
