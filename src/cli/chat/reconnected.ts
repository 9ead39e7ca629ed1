/**
 * What `berth chat` says once it has connected again after its server stopped (interactive.ts `reconnect`).
 * Contract: connected to the daemon (again) or from one `berth stdio` child to the next, the line says where and, when
 * a session was resumed, that the conversation continues. When the daemon is gone and the chat now serves itself
 * (its own `berth stdio`), the line says the conversation (or the chat) continues without the daemon and, when the
 * model differs from the one the daemon ran (a daemon with a selection of its own while the chat chose none here:
 * the chat's own resolution now applies), names the model now used and the daemon's, both as `provider/model`.
 */
import { terminalSafe } from "../terminal-safe.js";

/** A provider and, when known, its model. */
export interface Ran {
  provider: string;
  model: string | null;
}

export const named = (r: Ran): string => `${r.provider}/${r.model ?? "?"}`;

export interface Reconnected {
  /** How the chat is connected now (`daemon`, `stdio`). */
  via: string;
  /** How it was connected before, and the session open then (resumed now) with the model that server named for it. */
  was: { via: string; session: string | null; model: string | null };
  /** What the chat named as run before (banner.ts `Startup.runs`), and what a server of its own runs (`Startup.own`). */
  runs: Ran | null;
  own: Ran | null;
  /** The model the new server named for the resumed session (null: none resumed, or not named). */
  model: string | null;
}

/** The line to print, and what the chat runs now when a server of its own took over from the daemon (else null). */
export function reconnected(o: Reconnected): { line: string; now: Ran | null } {
  const resumed = o.was.session !== null;
  const kept = "an interrupted answer is kept in its history";
  if (o.via === "daemon" || o.was.via !== "daemon") {
    const where = o.via === "daemon" ? "the berth daemon" : "a berth stdio server of this chat's own";
    return { line: resumed ? `connected to ${where}; this conversation continues (${kept})` : `connected to ${where}`, now: null };
  }
  const before = o.runs !== null ? { provider: o.runs.provider, model: o.was.model ?? o.runs.model } : null;
  const now = o.own !== null ? { provider: o.own.provider, model: o.model ?? o.own.model } : null;
  const changed = before !== null && now !== null && named(before) !== named(now);
  const model = changed ? terminalSafe(`, now with model ${named(now)} (the daemon ran ${named(before)})`, false) : "";
  return { line: `connected to a berth stdio server of this chat's own: ${resumed ? "this conversation" : "the chat"} continues without the berth daemon${model}${resumed ? `; ${kept}` : ""}`, now };
}
