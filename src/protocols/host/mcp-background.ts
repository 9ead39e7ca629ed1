/**
 * AHP 0.9 `session/mcpServerBackgroundRequested {id}` (client-dispatchable): a client asks that an
 * MCP server whose start holds message processing (`McpServerStartingState.blocking`) go on starting
 * in the background. Contracts:
 *  - the server must be one of the session's current route's, reported `{kind: "starting",
 *    blocking: true}` by the backend (v6 `session/mcpServerStateChanged`); anything else is refused
 *    with the reason, as the official reducer would ignore it;
 *  - it is sent as `apply_resource_action {channel: <session>, action}` (backend protocol 6 or
 *    later), and reduced (the server's `blocking` cleared, as the official reducer does) and echoed
 *    with the client's origin only after the backend accepts and while the server still blocks;
 *    a refusal or an indeterminate outcome is the action's rejection. Unlike start and stop
 *    (mcp-lifecycle.ts) it is not tracked durably: it asks nothing of the server's lifecycle;
 *  - the backend then reports the server's further states as usual.
 */
import { z } from "zod";
import { forwardResourceAction } from "./ahp-requests.js";
import { mcpHub } from "./mcp-channels.js";
import type { Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";
import { NOT_CONNECTED_REFUSAL } from "./commands.js";

const MIN_VERSION = 6;
const Requested = z.object({ type: z.literal("session/mcpServerBackgroundRequested"), id: z.string().min(1).max(512) }).strict();

/** Why the server cannot be sent to the background now; null when it can. */
function problem(st: HostState, s: SessionModel, id: string): string | null {
  const m = mcpHub(st).server(s, id);
  if (!m) return "no MCP server customization with that id in this session";
  if (m.state.kind !== "starting" || m.state.blocking !== true) return "the MCP server is not starting in the foreground (McpServerStartingState.blocking)";
  return null;
}

/** A client `session/mcpServerBackgroundRequested` on session `s`. */
export function mcpBackgroundRequest(st: HostState, s: SessionModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const p = Requested.safeParse(action);
  if (!p.success) return reject("session/mcpServerBackgroundRequested needs id: an MCP server of the session");
  const a = p.data;
  if (s.lifecycle !== "ready") return reject("session is not ready");
  if (!s.route) return reject(NOT_CONNECTED_REFUSAL);
  if (s.route.version < MIN_VERSION) return reject("the session's backend does not accept resource actions (needs backend protocol 6)");
  const why = problem(st, s, a.id);
  if (why) return reject(why);
  forwardResourceAction(st, s, undefined, a, reject, () => {
    const now = st.sessions.get(s.uri) === s ? problem(st, s, a.id) : "the session is gone";
    if (now) return reject(`the MCP server's start changed meanwhile: ${now}`);
    const m = mcpHub(st).server(s, a.id)!;
    const state: Json = { ...m.state };
    delete state.blocking;
    m.state = state;
    st.publish(s.uri, a, origin);
  });
}
