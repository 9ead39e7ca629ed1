/**
 * AHP version negotiation: the baselines this host serves, the version that introduced each
 * action it emits, and the strict semver helpers both use. No schemas here (see ahp-schema.ts).
 */
export const SUPPORTED_AHP_BASELINES = [">=1.0.0 <2.0.0", ">=0.9.0 <0.10.0"];
export const SERVER_PREFERRED_VERSION = "1.0.0";

/**
 * The protocol version that introduced each action this host emits or echoes (upstream
 * `types/version/registry.ts`, ACTION_INTRODUCED_IN). The host sends an action only to clients
 * whose negotiated version knows it; see `actionKnownTo`.
 */
export const ACTION_INTRODUCED_IN: Readonly<Record<string, string>> = {
  "root/agentsChanged": "0.1.0",
  "root/activeSessionsChanged": "0.1.0",
  "session/ready": "0.1.0",
  "session/creationFailed": "0.1.0",
  "session/chatAdded": "0.4.0",
  "session/chatRemoved": "0.4.0",
  "session/chatUpdated": "0.4.0",
  "session/titleChanged": "0.1.0",
  "session/inputNeededSet": "0.5.1",
  "session/inputNeededRemoved": "0.5.1",
  "session/configChanged": "0.1.0",
  "session/metaChanged": "0.1.0",
  "chat/turnStarted": "0.4.0",
  "chat/delta": "0.4.0",
  "chat/responsePart": "0.4.0",
  "chat/toolCallStart": "0.4.0",
  "chat/toolCallDelta": "0.4.0",
  "chat/toolCallReady": "0.4.0",
  "chat/toolCallConfirmed": "0.4.0",
  "chat/toolCallComplete": "0.4.0",
  "chat/toolCallResultConfirmed": "0.4.0",
  "chat/turnComplete": "0.4.0",
  "chat/turnCancelled": "0.4.0",
  "chat/error": "0.4.0",
  "chat/usage": "0.4.0",
  "chat/reasoning": "0.4.0",
  "chat/pendingMessageSet": "0.4.0",
  "chat/pendingMessageRemoved": "0.4.0",
  "chat/inputRequested": "0.4.0",
  "chat/inputCompleted": "0.4.0",
  "chat/turnsLoaded": "0.5.1",
  "session/customizationsChanged": "0.1.0",
  "session/customizationUpdated": "0.1.0",
  "session/customizationRemoved": "0.2.0",
  "session/customizationToggled": "0.1.0",
  "root/configChanged": "0.1.0",
  "session/changesetsChanged": "0.2.0",
  "changeset/statusChanged": "0.2.0",
  "changeset/fileSet": "0.2.0",
  "changeset/fileRemoved": "0.2.0",
  "changeset/contentChanged": "0.4.0",
  "changeset/operationsChanged": "0.2.0",
  "changeset/operationStatusChanged": "0.3.0",
  "changeset/cleared": "0.2.0",
  "changeset/filesReviewChanged": "0.6.0",
  "annotations/set": "0.4.0",
  "annotations/updated": "0.4.0",
  "annotations/removed": "0.4.0",
  "annotations/entrySet": "0.4.0",
  "annotations/entryRemoved": "0.4.0",
  "session/mcpServerStateChanged": "0.3.0",
  "session/activityChanged": "0.1.0",
  "session/defaultChatChanged": "0.4.0",
  "session/serverToolsChanged": "0.1.0",
  "session/activeClientSet": "0.5.0",
  "session/activeClientRemoved": "0.5.0",
  "session/isReadChanged": "0.1.0",
  "session/isArchivedChanged": "0.1.0",
  "session/workingDirectorySet": "0.7.0",
  "session/workingDirectoryRemoved": "0.7.0",
  "session/workingDirectoryReplaced": "0.8.0",
  "chat/workingDirectorySet": "0.7.0",
  "chat/workingDirectoryRemoved": "0.7.0",
  "chat/queuedMessagesReordered": "0.4.0",
  "chat/draftChanged": "0.5.0",
  "chat/inputAnswerChanged": "0.4.0",
  "chat/isReadChanged": "0.9.0",
  "chat/isArchivedChanged": "0.9.0",
  "chat/activityChanged": "0.5.0",
  "chat/toolCallContentChanged": "0.4.0",
  "chat/toolCallAuthRequired": "0.6.0",
  "chat/toolCallAuthResolved": "0.6.0",
  // The 0.9 chat families (upstream registry; chat-09.ts): every version this host negotiates knows them.
  "chat/turnResume": "0.9.0",
  "chat/backgroundWorkSet": "0.9.0",
  "chat/backgroundWorkRemoved": "0.9.0",
  "chat/changesetsChanged": "0.9.0",
  "session/mcpServerBackgroundRequested": "0.9.0",
  "session/chatsReordered": "0.9.0",
  // The last of the 0.9 row: this host never emits it (no moveChat; docs/host.md "Not done yet").
  "chat/movableChanged": "0.9.0",
  // Introduced after the 0.9 line: never sent to a 0.9.x client (this host emits neither yet).
  "chat/canvasesChanged": "0.10.0",
  "canvas/stateChanged": "0.10.0",
};

/**
 * Customization enablement changed shape between the AHP types this host negotiates: 0.9 and 1.0
 * carry an `enabled` flag (`session/customizationToggled {id, enabled}`, set on the matched entry);
 * the 1.1 types carry scoped decisions (`{id, enablement}`; plugins and MCP servers hold
 * `enablement`, other entries the derived `enabled`). A version at or above this one reads the
 * newer shape.
 */
export const ENABLEMENT_VERSION = "1.1.0";
export type EnablementShape = "enabled" | "enablement";
export function enablementShape(version: string | null): EnablementShape {
  const v = version === null ? null : parseSemver(version);
  const e = parseSemver(ENABLEMENT_VERSION)!;
  return v !== null && (v[0] - e[0] || v[1] - e[1] || v[2] - e[2]) >= 0 ? "enablement" : "enabled";
}
const audiences = new WeakMap<object, EnablementShape>();
/** Mark an action as the variant for clients reading `shape` only (another envelope carries the other shape). */
export function forShape<T extends object>(action: T, shape: EnablementShape): T {
  audiences.set(action, shape);
  return action;
}
/** The key the fan-out and the replay ring filter an action by: its type, plus the shape it was built for. */
export function filterKey(action: { type?: unknown }): string {
  const a = audiences.get(action);
  return a ? `${String(action.type)}#${a}` : String(action.type);
}

/**
 * Whether a client that negotiated `version` may receive an action of `type`. Types the table
 * does not know are only ever echoes of what the client itself dispatched (rejected envelopes),
 * so they are delivered.
 */
export function actionKnownTo(key: string, version: string): boolean {
  // Asked once per delivery of every action to every subscriber: the answer for a (version, key) pair never changes,
  // so it is kept. Keys are the host's own action families (a few hundred at most); the bound only guards the memory.
  let known = KNOWN.get(version);
  if (known === undefined) {
    if (KNOWN.size >= KNOWN_LIMIT) KNOWN.clear(); // versions come from clients: bounded too
    KNOWN.set(version, (known = new Map<string, boolean>()));
  }
  let answer = known.get(key);
  if (answer === undefined) {
    if (known.size >= KNOWN_LIMIT) known.clear();
    known.set(key, (answer = decideKnown(key, version)));
  }
  return answer;
}

const KNOWN = new Map<string, Map<string, boolean>>();
const KNOWN_LIMIT = 1024;

function decideKnown(key: string, version: string): boolean {
  const hash = key.indexOf("#");
  const type = hash < 0 ? key : key.slice(0, hash);
  if (hash >= 0 && key.slice(hash + 1) !== enablementShape(version)) return false;
  const introduced = ACTION_INTRODUCED_IN[type];
  if (introduced === undefined) return true;
  const a = parseSemver(introduced);
  const b = parseSemver(version);
  if (!a || !b) return false;
  return (a[0] - b[0] || a[1] - b[1] || a[2] - b[2]) <= 0;
}

/** Parse "MAJOR.MINOR.PATCH" strictly (no leading zeros, prerelease or build). */
export function parseSemver(v: string): [number, number, number] | null {
  const m = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/.exec(v);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
}

/** Select the highest offered version in `>=1.0.0 <2.0.0` or `>=0.9.0 <0.10.0`; null when none. */
export function negotiateVersion(offered: string[]): string | null {
  let best: { v: string; p: [number, number, number] } | null = null;
  for (const v of offered) {
    const p = parseSemver(v);
    if (!p) continue;
    const ok = p[0] === 1 || (p[0] === 0 && p[1] === 9);
    if (!ok) continue;
    if (!best || p[0] > best.p[0] || (p[0] === best.p[0] && (p[1] > best.p[1] || (p[1] === best.p[1] && p[2] > best.p[2])))) best = { v, p };
  }
  return best ? best.v : null;
}
