/**
 * What `berth chat` adds after a failed turn, shared by `-p` and the interactive chat:
 * - an unknown model (the provider answered HTTP 404 or named `model_not_found`/`not_found_error`): the provider's
 *   model list (through the app-service catalog, the one `/model` uses) and the closest names to the selected one;
 * - a provider that cannot be reached: its base URL (in `failureLine`);
 * - a setup that broke since the chat started (settings, provider, key variable): the preflight's line.
 * Contract: never throws; a hint that cannot be worked out is left out.
 */
import { startService } from "./common.js";
import { preflight, suggest } from "./preflight.js";
import { NO_PROVIDER_HELP } from "./render.js";

/** True when a `turn.failed` message says the provider does not know the model. */
export function unknownModel(message: string): boolean {
  return /\(HTTP 404\b|\bmodel_not_found\b|\bnot_found_error\b/.test(message);
}

/** The selected provider's models, refreshed from the provider when the cached list is not fresh. */
async function providerModels(provider: string): Promise<string[]> {
  const svc = await startService();
  try {
    const client = svc.client;
    let page = await client.catalogModels(provider);
    if (page.state !== "fresh_cache") {
      await client.catalogRefresh(provider).catch(() => undefined);
      page = await client.catalogModels(provider);
    }
    const all = page.entries.map((m) => m.model_id);
    while (page.next_offset !== null && all.length < 2000) {
      page = await client.catalogModels(provider, { offset: page.next_offset });
      all.push(...page.entries.map((m) => m.model_id));
    }
    return all;
  } finally {
    await svc.close();
  }
}

/** A `turn.failed` message saying the credential is missing where the turn ran (not one the provider rejected). */
const MISSING_KEY = /^the provider credential is missing(?:: ([A-Za-z_][A-Za-z0-9_]*) \(| or was rejected: provider credential unavailable)/;

/**
 * A failure every later prompt would meet alike, so piped prompts stop at it: the credential missing or rejected, no
 * usable provider selected, a daemon that does not know the chosen provider (selection.ts).
 */
export function failsAlike(message: string): boolean {
  return /^(?:the provider credential is missing|no usable provider and model are selected|the berth daemon serving this chat does not know provider )/.test(message);
}

/**
 * Lines explaining a failed turn further (may be empty; the setup help is one entry of several lines). `message` is
 * the `turn.failed` message; `via`, how the chat is connected: a daemon runs turns with its own environment, so a key
 * missing there is set where the daemon starts, never "where berth chat starts".
 */
export async function failureHints(message: string, env: NodeJS.ProcessEnv, cwd: string, via: string | null = null): Promise<string[]> {
  const pre = await preflight(env, cwd, { keyHere: () => Promise.resolve(via !== "daemon") }).catch(() => null);
  if (pre === null) return [];
  if (!pre.ok) return [pre.noProvider ? NO_PROVIDER_HELP.trimEnd() : `error: ${pre.message}`];
  const missing = via === "daemon" ? MISSING_KEY.exec(message) : null;
  const v = missing?.[1] ?? (pre.provider === "anthropic" ? "ANTHROPIC_API_KEY" : undefined);
  if (missing !== null && v !== undefined)
    return [
      `the berth daemon serving this chat runs its turns with its own environment, not this shell's: export ${v}=… where berth daemon starts and restart the daemon, or stop the daemon so that berth chat serves itself`,
    ];
  if (!unknownModel(message) || pre.model === null) return [];
  const models = await providerModels(pre.provider).catch(() => [] as string[]);
  const from = env["MC_MODEL"] !== undefined && env["MC_MODEL"] !== "" ? `MC_MODEL=${pre.model}` : `model "${pre.model}"`;
  if (models.length === 0) return [`${from} may not be a model of provider ${pre.provider} (its model list could not be read; /model lists the models)`];
  if (models.includes(pre.model)) return [];
  return [`${from} is not a model of provider ${pre.provider} (${suggest(pre.model, models)})`];
}
