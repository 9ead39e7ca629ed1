/**
 * Which model `berth chat`'s sessions run, so that what the chat names (the banner) is what its turns use, whoever
 * serves them: a `berth stdio` child or the in-process server (this environment and directory), or a daemon (its
 * own environment, launch directory and, maybe, home).
 * Contract:
 * - `chosenHere(env, pre)`: when the user chose here (`MC_PROVIDER` or `MC_MODEL` set and not empty), the pair the
 *   chat resolved from that choice (the provider, and its model when one is known), which every `session.start`
 *   carries so that the server runs exactly it; null when the user chose nothing here: the server's selection
 *   applies (its settings, read per turn, so `/model` applies from the next turn).
 * - `daemonSelection(client)`: what a daemon runs for a session that names no selection (`daemon.status`'s
 *   `selection`), or null when it does not say (a daemon that predates it) or does not answer within
 *   `DAEMON_STATUS_MS`.
 * - `openChosen(link, params, chosen)`: `session.start` with the chosen selection. A daemon that does not know the
 *   chosen provider (a daemon with another home: the chat checked the provider in its own) refuses it; that rejects
 *   with a `SelectionRefused` (a `RequestError`) of one line naming the provider, the variable, and where to declare it. Any other failure
 *   rejects as it came.
 */
import { RequestError } from "../../client/app-service/errors.js";
import { ScvRequestError, type ScvClient, type ScvEvent, type SessionStartParams } from "../../client/scv/client.js";
import type { Link } from "./link.js";
import type { EnvLike } from "../../store/home.js";
import { terminalSafe } from "../terminal-safe.js";

/** A session a daemon refused for the chosen provider: every later `session.start` would be refused alike. */
export class SelectionRefused extends RequestError {}

/** How long the banner waits for a daemon's `daemon.status` before naming the chat's own resolution. */
export const DAEMON_STATUS_MS = 2_000;

/** A session's selection as `session.start` carries it. */
export interface Chosen {
  provider: string;
  model?: string;
}

const set = (env: EnvLike, k: string): boolean => (env[k] ?? "") !== "";

export function chosenHere(env: EnvLike, resolved: { provider: string; model: string | null }): Chosen | null {
  if (!set(env, "MC_PROVIDER") && !set(env, "MC_MODEL")) return null;
  return { provider: resolved.provider, ...(resolved.model !== null ? { model: resolved.model } : {}) };
}

export async function daemonSelection(client: ScvClient): Promise<{ provider: string; model: string | null } | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), DAEMON_STATUS_MS)));
  try {
    const st = await Promise.race([client.daemonStatus().catch(() => null), late]);
    const sel = st?.["selection"] as { provider?: unknown; model?: unknown } | undefined;
    if (typeof sel?.provider !== "string" || sel.provider === "") return null;
    return { provider: sel.provider, model: typeof sel.model === "string" ? sel.model : null };
  } finally {
    clearTimeout(timer);
  }
}

export async function openChosen(link: Link, params: SessionStartParams, chosen: Chosen | null): Promise<ScvEvent> {
  try {
    return await link.client.openSession({ ...params, ...(chosen ?? {}) });
  } catch (e) {
    const why = link.via === "daemon" ? unknownToDaemon(e, chosen, process.env) : null;
    throw why !== null ? new SelectionRefused(why) : e;
  }
}

function unknownToDaemon(err: unknown, chosen: Chosen | null, env: EnvLike): string | null {
  if (chosen === null || !(err instanceof ScvRequestError) || !err.message.startsWith("invalid_request: unknown provider")) return null;
  const from = set(env, "MC_PROVIDER") ? `MC_PROVIDER=${env["MC_PROVIDER"]}` : `this chat's settings, with MC_MODEL=${env["MC_MODEL"]}`;
  const unset = set(env, "MC_PROVIDER") ? "MC_PROVIDER" : "MC_MODEL";
  return terminalSafe(
    `the berth daemon serving this chat does not know provider "${chosen.provider}" (${from}): declare it under "providers" in the settings.json of the daemon's MC_HOME and start the chat again, or unset ${unset} to use the daemon's selection`,
    false,
  );
}
