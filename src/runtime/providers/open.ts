/**
 * `openProvider`: `createProvider` (index.ts) loading only the wire format the provider speaks, on first use; the
 * module stays loaded for later providers of the same API. What a first turn of a fresh process uses (agent.ts).
 */
import type { CredentialSource, ProviderApi } from "../types.js";
import type { OpenedProvider, ProviderConfig, ProviderOptions, Wire } from "./make.js";

const loaded = new Map<ProviderApi, Promise<Wire>>();

/** Loads (once) the wire format of `api`. */
export function loadWire(api: ProviderApi): Promise<Wire> {
  let p = loaded.get(api);
  if (p === undefined) {
    // make.ts (the shared driver and the HTTP client) loads with the first wire format, not with this module.
    p = import("./make.js").then(({ wires }) =>
      api === "anthropic"
        ? import("./anthropic.js").then(wires.anthropic)
        : api === "openai-responses"
          ? import("./openai-responses.js").then(wires["openai-responses"])
          : import("./openai-chat.js").then(wires["openai-chat"]),
    );
    loaded.set(api, p);
    p.catch(() => loaded.delete(api));
  }
  return p;
}

/** Creates a provider once its wire format is loaded. Rejects for a definition that cannot work (bad base URL). */
export async function openProvider(providerId: string, def: ProviderConfig, credentials: CredentialSource, opts: ProviderOptions = {}): Promise<OpenedProvider> {
  const wire = await loadWire(def.api);
  const { assembleProvider } = await import("./make.js");
  return assembleProvider(providerId, def, credentials, opts, wire);
}
