/**
 * Shared plumbing for `berth chat`: turning failures into one plain line naming the cause. User errors never
 * print a stack trace, a credential or a file's content.
 */
import { ConnectionClosedError, IncompatibleServiceError, ProtocolError, RequestError, ServiceError } from "../../client/app-service/errors.js";
import type { ServiceHandle } from "../../client/app-service/index.js";
import { ScvConnectionError, ScvRequestError } from "../../client/scv/client.js";
import { urlForDisplay } from "../../core/text-policy.js";
import { turnFailureHint } from "../../core/provider-hint.js";

const SERVICE_HINTS: Record<string, string> = {
  session_busy: "that session is busy (another Berth process or a running turn holds it)",
  session_unavailable: "that session does not exist or cannot be read",
  invalid_session_id: "that is not a valid session ID",
  too_many_active_turns: "too many turns are running",
  auth_busy: "a login is already in progress",
  unknown_login: "that login has already finished",
  provider_unavailable: "that provider does not support this",
  configuration_busy: "a configuration request is still running; try again",
  catalog_refresh_failed: "the model list could not be refreshed; check the provider's readiness and try again",
  catalog_unavailable: "the model list is not available; run /model to refresh it",
  catalog_stale: "the model list is out of date; run /model to refresh it",
  invalid_selection: "that provider/model is unknown or disabled",
  settings_write_failed: "the settings could not be saved; check settings.json",
  configuration_unavailable: "the settings could not be read; check settings.json",
  unknown_turn: "that turn has already finished",
};

/** One line describing an error for a person; never a stack trace, never request data. */
export function describeError(err: unknown): string {
  if (err instanceof ScvRequestError) return `the Berth server refused the request: ${err.message}`;
  if (err instanceof ScvConnectionError) return `the Berth server connection ended (${err.message})`;
  if (err instanceof ServiceError) return SERVICE_HINTS[err.code] ?? `the service refused the request (${err.code})`;
  if (err instanceof IncompatibleServiceError) return `the Berth service is incompatible with this client (${err.reason})`;
  if (err instanceof ProtocolError) return `the Berth service sent something unexpected (${err.reason}); stopped`;
  if (err instanceof ConnectionClosedError) return "the Berth service stopped unexpectedly";
  if (err instanceof RequestError) return err.message;
  return err instanceof Error ? `unexpected error (${err.name})` : "unexpected error";
}

/**
 * One line for an SCV terminal event that is not `turn.completed`: `failed (<code>: <message>)`, naming the
 * provider's base URL when it could not be reached, answered a bare 404 or did not answer with a stream (`baseUrl`:
 * the selected provider's, when known). A provider failure that may pass (a rate limit, an overloaded server, a
 * stream cut off or gone silent) says what to do: wait and send the prompt again, or, when the answer had begun
 * (`goOn.partial`), that the session keeps it and how to go on (`goOn.how`).
 */
export function failureLine(ev: Record<string, unknown>, baseUrl: string | null = null, goOn: { partial: boolean; how: string } | null = null): string {
  if (ev["type"] === "turn.cancelled") return "cancelled";
  const code = typeof ev["code"] === "string" ? ev["code"] : "unknown";
  const msg = typeof ev["message"] === "string" ? ev["message"] : "";
  // Never the URL's user name, password or query: any of them can carry the key.
  const shown = baseUrl === null ? null : urlForDisplay(baseUrl);
  const hint = turnFailureHint(msg, code, shown) || (code === "provider_error" ? goOnHint(msg, goOn) : "");
  return `failed (${code}${msg !== "" ? `: ${msg}` : ""}${hint})`;
}

/** For an answer cut off after it had begun: that the session keeps it and how to go on; "" otherwise. */
function goOnHint(msg: string, goOn: { partial: boolean; how: string } | null): string {
  if (goOn?.partial === true && /provider stream ended unexpectedly|provider sent (?:nothing|only keep-alive comments) within its idle timeout/.test(msg))
    return `; the session keeps the answer so far: ${goOn.how}`;
  return "";
}

/** The app-service child (for /login, /logout, /model: sign-in, catalog and settings live there). */
export async function startService(): Promise<ServiceHandle> {
  // Loaded on first use: `berth chat -p` never needs the app-service client.
  const { spawnService } = await import("../../client/app-service/spawn.js");
  const handle = spawnService({ env: process.env, cwd: process.cwd() });
  try {
    await handle.client.initialize();
  } catch (err) {
    await handle.close();
    throw err;
  }
  return handle;
}

/** SCV's prompt limit (256 KiB of UTF-8). */
export const MAX_PROMPT_BYTES = 256 * 1024;

/** Why a prompt cannot be sent (over SCV's prompt limit), or null. Checked before sending: an over-long frame would get no answer tied to the prompt. */
export function promptTooLarge(prompt: string): string | null {
  const n = Buffer.byteLength(prompt, "utf8");
  return n > MAX_PROMPT_BYTES ? `the prompt is ${n.toLocaleString("en-US")} bytes; the limit is ${MAX_PROMPT_BYTES.toLocaleString("en-US")} bytes (256 KiB), so nothing was sent` : null;
}
