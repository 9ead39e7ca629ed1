/**
 * Why a channel a client names has no snapshot on this host: the message of `subscribe`'s `NotFound` (-32008), which
 * AHP answers for a URI that does not exist. Contracts: the message names the URI (cut to MAX_ECHO characters) and
 * either which of this host's channels it would be and why it is not there (disposed or never existing, not sent by
 * its backend yet, its session gone), or that this host serves no channel of that form, listing the forms it serves.
 * Pure reads of the host model.
 */
import { clip } from "./inbound.js";
import { otlpChannel } from "./notifications.js";
import type { HostState } from "./state.js";

const SESSION = /^ahp-session:\/[^/]+$/;
const CHANGESET = /^ahp-changeset:\/([A-Za-z0-9._~-]{1,128})\/[A-Za-z0-9._~/-]{1,256}$/;
const SERVED = "it serves ahp-root://, ahp-session:/, ahp-chat:/, ahp-changeset:/ and <session>/annotations channels, and the ahp-otlp:// channels initialize names";
const gone = (what: string, uri: string) => `${what} ${clip(uri)} is not on this host: it was disposed or never existed`;

/** The refusal for `uri`, a channel `st` has no snapshot of. */
export function unknownChannel(st: HostState, uri: string): string {
  if (SESSION.test(uri)) return `no session ${clip(uri)} on this host: it was disposed or never existed (listSessions names the sessions there are)`;
  if (uri.startsWith("ahp-session:/") && uri.endsWith("/annotations") && SESSION.test(uri.slice(0, -"/annotations".length))) {
    const session = uri.slice(0, -"/annotations".length);
    if (!st.sessions.has(session)) return `no annotations channel ${clip(uri)}: its ${gone("session", session)}`;
    return `no annotations channel ${clip(uri)}: the session's backend has not sent one yet (the session state's annotations names it once there is one)`;
  }
  if (uri.startsWith("ahp-chat:/") && !uri.includes("/", "ahp-chat:/".length))
    return `no chat ${clip(uri)} on this host: it was disposed or never existed (a session's state lists its chats)`;
  const cs = CHANGESET.exec(uri);
  if (cs) {
    const session = `ahp-session:/${cs[1]}`;
    if (!st.sessions.has(session)) return `changeset ${clip(uri)} does not exist: its ${gone("session", session)}`;
    return `changeset ${clip(uri)} does not exist: the session's backend has not sent it (the session state's changesets name the ones it offers)`;
  }
  if (uri.startsWith("mcp://")) return `mcp:// side channels are not subscribed to: send MCP messages with the channel at the top level (their notifications reach the owning session's subscribers); ${clip(uri)}`;
  if (uri.startsWith("ahp-otlp:")) return `no telemetry channel ${clip(uri)}: this host's are ${otlpChannel("logs")}, ${otlpChannel("traces")} and ${otlpChannel("metrics")}`;
  return `this host serves no channel ${clip(uri)}: ${SERVED}`;
}
