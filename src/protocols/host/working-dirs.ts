/**
 * AHP `session/workingDirectorySet` / `session/workingDirectoryRemoved` (membership of
 * `SessionState.workingDirectories`, keyed by the directory URI). Contracts:
 *  - AHP makes them valid only when the agent advertises `multipleWorkingDirectories`; a backend
 *    advertises it in its v6+ session `hello` as `multipleWorkingDirectories:
 *    {immutablePrimary?}` (this host's addition; no earlier frame carried it). Without it both
 *    are refused with a fixed message naming the missing capability;
 *  - from the backend (v6 `resource_action`): validated against the current set (adding a
 *    member or removing a non-member is refused, as the official reducer would ignore it),
 *    reduced, published, persisted with the session, announced to root subscribers;
 *  - from a client: the same checks, then sent as `apply_resource_action {channel: <session>,
 *    action}` (the backend must really grant or revoke tool access) and reduced and echoed only
 *    after the backend accepts; a refusal or an indeterminate outcome is the action's rejection;
 *  - `session/workingDirectoryReplaced {directory, replacement}` (AHP 0.8) swaps one entry in
 *    place; `immutablePrimary`: the first directory is the backend's fixed root and can be
 *    neither removed nor replaced; `primaryReplacement`: it cannot be removed, only replaced;
 *  - at most MAX_WORKING_DIRECTORIES directories, each a URI of at most 4,096 characters.
 */
import { z } from "zod";
import { clip } from "./inbound.js";
import { ROOT } from "./ahp-schema.js";
import { routeCommand } from "./ahp-requests.js";
import type { Json, Origin, SessionModel } from "./model.js";
import type { HostState } from "./state.js";

export const MAX_WORKING_DIRECTORIES = 64;
const MIN_VERSION = 6;

const directory = z.string().min(1).max(4096).regex(/^[A-Za-z][A-Za-z0-9+.-]*:\S+$/, "must be an absolute URI");
const WorkingDirActions = z.discriminatedUnion("type", [
  z.object({ type: z.literal("session/workingDirectorySet"), directory }).strict(),
  z.object({ type: z.literal("session/workingDirectoryRemoved"), directory }).strict(),
  // AHP 0.8: an atomic replacement at the same position.
  z.object({ type: z.literal("session/workingDirectoryReplaced"), directory, replacement: directory }).strict(),
]);
type WorkingDirAction = z.infer<typeof WorkingDirActions>;

export function isWorkingDirAction(type: unknown): boolean {
  return type === "session/workingDirectorySet" || type === "session/workingDirectoryRemoved" || type === "session/workingDirectoryReplaced";
}

/** The session's working directories (AHP `SessionState.workingDirectories`). */
function directories(s: SessionModel): string[] {
  return Array.isArray(s.extra.workingDirectories) ? (s.extra.workingDirectories as string[]) : [];
}

/** The capability message: fixed, naming what is missing and where a backend advertises it. */
export function missingCapability(type: string): string {
  return `${type} needs the multipleWorkingDirectories capability, which this session's backend did not advertise (hello.multipleWorkingDirectories, backend protocol 6 or later)`;
}

function parse(action: Json): { ok: WorkingDirAction } | { error: string } {
  const p = WorkingDirActions.safeParse(action);
  if (p.success) return { ok: p.data };
  return { error: `invalid ${clip(action.type)}: ${p.error.issues[0]?.path.join(".") ?? ""} ${p.error.issues[0]?.message ?? ""}`.trim() };
}

/** Whether `a` applies to the current set and the route's capability; null, or why not. */
function check(s: SessionModel, a: WorkingDirAction): string | null {
  const caps = s.route?.workingDirs;
  // (both flags together are refused at hello)
  if (!caps) return missingCapability(a.type);
  const dirs = directories(s);
  if (a.type === "session/workingDirectorySet") {
    if (dirs.includes(a.directory)) return `${a.type}: ${clip(a.directory)} is already a working directory of this session`;
    if (dirs.length >= MAX_WORKING_DIRECTORIES) return `${a.type}: a session has at most ${MAX_WORKING_DIRECTORIES} working directories`;
    return null;
  }
  if (!dirs.includes(a.directory)) return `${a.type}: ${clip(a.directory)} is not a working directory of this session`;
  const primary = dirs[0] === a.directory;
  if (a.type === "session/workingDirectoryReplaced") {
    if (dirs.includes(a.replacement)) return `${a.type}: ${clip(a.replacement)} is already a working directory of this session`;
    if (caps.immutablePrimary && primary) return `${a.type}: the first working directory is the backend's fixed primary (multipleWorkingDirectories.immutablePrimary) and cannot be replaced`;
    return null;
  }
  if (caps.immutablePrimary && primary) return `${a.type}: the first working directory is the backend's fixed primary (multipleWorkingDirectories.immutablePrimary) and cannot be removed`;
  if (caps.primaryReplacement && primary) return `${a.type}: the first working directory is the backend's primary slot (multipleWorkingDirectories.primaryReplacement): replace it with session/workingDirectoryReplaced instead`;
  return null;
}

/** Publish an accepted change (with the client's origin, if any) and tell root subscribers the new set. */
function publish(st: HostState, s: SessionModel, a: WorkingDirAction, origin?: Origin): void {
  st.publish(s.uri, a, origin);
  st.rootNotify("root/sessionSummaryChanged", { channel: ROOT, session: s.uri, changes: { workingDirectories: [...directories(s)] } });
}

/** Reducer: membership semantics, persisted with the session. */
export function reduceWorkingDir(st: HostState, s: SessionModel, a: Json): void {
  const dirs = directories(s);
  const dir = a.directory as string;
  if (a.type === "session/workingDirectorySet") {
    if (!dirs.includes(dir)) s.extra.workingDirectories = [...dirs, dir];
  } else if (a.type === "session/workingDirectoryReplaced") {
    const by = a.replacement as string;
    if (!dirs.includes(by)) s.extra.workingDirectories = dirs.map((d) => (d === dir ? by : d));
  } else s.extra.workingDirectories = dirs.filter((d) => d !== dir);
  st.persistSession(s);
}

/** A backend `resource_action` carrying a working-directory action: null when published, else why not. */
export function backendWorkingDir(st: HostState, s: SessionModel, action: Json): string | null {
  const p = parse(action);
  if ("error" in p) return p.error;
  const why = check(s, p.ok);
  if (why) return why;
  publish(st, s, p.ok);
  return null;
}

/** A client `dispatchAction` of a working-directory action: checked, sent to the backend, echoed once accepted. */
export function clientWorkingDir(st: HostState, s: SessionModel, action: Json, origin: Origin, reject: (r: string) => void): void {
  const p = parse(action);
  if ("error" in p) return reject(p.error);
  if (!s.route) return reject("backend not connected");
  const why = check(s, p.ok);
  if (why) return reject(why);
  if (s.route.version < MIN_VERSION) return reject("the session's backend does not accept resource actions (needs backend protocol 6)");
  const a = p.ok;
  void routeCommand(st, s, undefined, { type: "apply_resource_action", channel: s.uri, action: a }, (o) => {
    if (o.kind !== "accepted") return reject(o.kind === "rejected" ? "backend refused the action" : "backend outcome indeterminate");
    if (!st.sessions.has(s.uri)) return;
    const now = check(s, a);
    if (now) return reject(`the working directories changed meanwhile: ${now}`);
    publish(st, s, a, origin);
  });
}
