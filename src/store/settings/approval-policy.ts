/**
 * The approval policy of a session (`approval_policy` in settings), for every door that asks its user before a tool
 * runs (SCV sessions of `berth stdio` and the daemon, the daemon's own sessions served over AHP): the global value
 * (else `on-risk`), made stricter, never looser, by the serving process's launch directory's `.berth/settings.json`
 * and then by the session's own directory's (`approvalPolicyOf` in effective.ts). A repository can ship those files:
 * whichever process serves its sessions, they can only add questions. `notes` says, once per cause, what was
 * ignored (a looser project value, an unreadable project file in the session's directory); the caller logs them.
 */
import { join } from "node:path";
import type { EnvLike } from "../home.js";
import { approvalPolicyOf, ignoredApprovalPolicyNote } from "./effective.js";
import type { ApprovalPolicySetting, Settings } from "./schema.js";
import { SettingsStore } from "./settings-store.js";

export interface SessionApprovalPolicy {
  policy: ApprovalPolicySetting;
  /** Why a project's value or file was not applied (zero, one or two lines). */
  notes: string[];
}

export interface ApprovalPolicySources {
  /** Resolved MC_HOME. */
  home: string;
  env: EnvLike;
  /** The serving process's settings (its launch directory's project layer). */
  launch: SettingsStore;
  /** That launch directory. */
  launchDir: string;
}

/**
 * The policy for a session working in `sessionCwd` (canonical). Never rejects: unreadable global settings give
 * `on-risk` (the session's turns then fail naming the file), an unreadable project file in the session's directory
 * is ignored with a note.
 */
export async function sessionApprovalPolicy(o: ApprovalPolicySources, sessionCwd: string): Promise<SessionApprovalPolicy> {
  // Read-only: the shared, frozen layers (the model resolution reads the same object).
  const layers = await o.launch.loadShared().catch(() => null);
  if (layers === null) return { policy: "on-risk", notes: [] };
  const notes: string[] = [];
  const launch = approvalPolicyOf(layers);
  if (launch.ignoredProject !== null) notes.push(ignoredApprovalPolicyNote(launch.ignoredProject, launch.policy));
  if (sessionCwd === o.launchDir) return { policy: launch.policy, notes };
  const file = join(sessionCwd, ".berth", "settings.json");
  let own: Readonly<Settings>;
  try {
    own = (await new SettingsStore({ home: o.home, projectDir: sessionCwd, env: o.env }).loadShared()).project;
  } catch {
    notes.push(`ignoring ${file} for approvals: it is not valid settings (fix or remove it); using "${launch.policy}"`);
    return { policy: launch.policy, notes };
  }
  const r = approvalPolicyOf({ global: { approval_policy: launch.policy }, project: own });
  if (r.ignoredProject !== null) notes.push(ignoredApprovalPolicyNote(r.ignoredProject, r.policy, file));
  return { policy: r.policy, notes };
}

/** Logs each note once per process (a server starting many sessions in one directory says it once). */
export function onceLogger(log: (line: string) => void): (notes: readonly string[]) => void {
  const said = new Set<string>();
  return (notes) => {
    for (const note of notes) {
      if (said.has(note)) continue;
      if (said.size >= 64) said.clear();
      said.add(note);
      log(note);
    }
  };
}
