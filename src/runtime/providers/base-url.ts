/**
 * Base-URL resolution of every wire format, apart from the drivers (make.ts): a session's start checks a provider's
 * definition with it (`Agent.describe`) without loading the HTTP client or any driver.
 */
import type { ProviderApi } from "../types.js";

export const ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com";
export const OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1";

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
