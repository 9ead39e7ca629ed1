/**
 * Provider factory and resolution helpers. `createProvider` turns a provider definition plus a
 * credential source into a `Provider` whose streams follow the contract in `../types.ts`. It links all three wire
 * formats; `openProvider` (open.ts) loads only the one a provider speaks.
 */
import type { CredentialSource, Provider } from "../types.js";
import * as anthropic from "./anthropic.js";
import { assembleProvider, wires, type ProviderConfig, type ProviderOptions } from "./make.js";
import * as chat from "./openai-chat.js";
import * as responses from "./openai-responses.js";

export { ProviderFailure, LABELS as PROVIDER_ERROR_LABELS } from "./errors.js";
export { DEFAULT_RETRY, abortableSleep, type FetchLike, type RetryPolicy } from "./driver.js";
export type { ProviderBounds } from "./accumulate.js";
export { resolveBaseUrl, type ProviderConfig, type ProviderOptions } from "./make.js";

/** Creates a provider. Throws only for a definition that cannot work (bad/missing base URL). */
export function createProvider(providerId: string, def: ProviderConfig, credentials: CredentialSource, opts: ProviderOptions = {}): Provider {
  const wire = def.api === "anthropic" ? wires.anthropic(anthropic) : def.api === "openai-responses" ? wires["openai-responses"](responses) : wires["openai-chat"](chat);
  return assembleProvider(providerId, def, credentials, opts, wire);
}
