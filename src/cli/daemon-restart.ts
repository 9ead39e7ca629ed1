/**
 * `restart_when_idle`: the daemon restarts into the release installed at its own executable path once nothing it
 * must wait for is left, by exiting with `RESTART_EXIT_CODE` for its supervisor to start it again.
 *
 * Contract:
 * - Refused (`{refused}`) unless the daemon runs under a supervisor that restarts it (`berth daemon --supervised`,
 *   or a systemd unit: `INVOCATION_ID` set), when the installed `berth build-info` does not answer with
 *   `{version, commit}`, or when it reports a version other than the requested one.
 * - Otherwise a plan is saved (in memory) and returned at once: `{to_version, waiting_for, requester, origin,
 *   deadline_unix_seconds}`; `origin` is the `<channel>:<account>` whose chat runs the session `parent` names (its
 *   second segment), null when `parent` is absent or names no chat session. A repeat for the same version returns the scheduled plan unchanged; another version
 *   replaces it.
 * - The plan waits while the delegation named by `parent` (`<instance>/<session>/<handle>`) still has a live process,
 *   then while any chat message a bridge has claimed is not yet answered;
 *   at `max_wait_seconds` it restarts anyway. It is checked every `CHECK_MS`.
 */
import { execFile } from "node:child_process";
import type { ControlAction } from "../protocols/scv/control.js";
import { scan } from "../runtime/delegation/records.js";
import type { RestartControl } from "./daemon-control.js";

export const RESTART_EXIT_CODE = 75;
export const CHECK_MS = 1000;
const BUILD_INFO_TIMEOUT_MS = 10_000;

export interface RestartOptions {
  home: string;
  supervised: () => boolean;
  /** Node and the `berth` script the daemon runs from. */
  exec: { node: string; script: string };
  /** Claimed chat messages not yet answered (the plan waits for them after the parent delegation). */
  unanswered: () => number;
  /** `<channel>:<account>` of the chat whose conversation runs SCV session `session` (the plan's `origin`). */
  originOf: (session: string) => Promise<string | null>;
  /** Starts the daemon's shutdown with `RESTART_EXIT_CODE`. */
  restart: (why: string) => void;
  now?: () => number;
}

function buildInfo(exec: RestartOptions["exec"]): Promise<{ version: string; commit: string | null } | null> {
  return new Promise((resolve) => {
    execFile(exec.node, [exec.script, "build-info"], { timeout: BUILD_INFO_TIMEOUT_MS, env: { ...process.env, SCV_PARENT: "" } }, (err, stdout) => {
      if (err) return resolve(null);
      try {
        const v = JSON.parse(stdout.trim()) as { version?: unknown; commit?: unknown };
        if (typeof v.version !== "string") return resolve(null);
        resolve({ version: v.version, commit: typeof v.commit === "string" ? v.commit : null });
      } catch {
        resolve(null);
      }
    });
  });
}

interface Plan {
  to_version: string;
  waiting_for?: string;
  requester: string;
  origin: string | null;
  deadline_unix_seconds: number;
  parentHandle: string | null;
}

export function restartPlanner(o: RestartOptions): RestartControl & { stop(): void } {
  const now = o.now ?? Date.now;
  let plan: Plan | null = null;
  let timer: NodeJS.Timeout | null = null;
  const view = (p: Plan): Record<string, unknown> => {
    const { parentHandle: _h, ...rest } = p;
    return { ...rest };
  };
  const check = async (): Promise<void> => {
    const p = plan;
    if (p === null) return;
    const late = now() >= p.deadline_unix_seconds * 1000;
    const delegation = p.parentHandle !== null && (await scan(o.home)).some((v) => v.record.handle === p.parentHandle);
    const chat = o.unanswered();
    const waiting = delegation || chat > 0;
    if (waiting && !late) {
      p.waiting_for = delegation ? `delegation ${p.parentHandle}` : `${chat} chat message${chat === 1 ? "" : "s"}`;
      return;
    }
    delete p.waiting_for;
    if (timer !== null) clearInterval(timer);
    timer = null;
    o.restart(late && waiting ? `restarting into ${p.to_version}: max_wait_seconds passed` : `restarting into ${p.to_version}`);
  };
  return {
    current: () => (plan === null ? null : view(plan)),
    async plan(a: Extract<ControlAction, { action: "restart_when_idle" }>) {
      if (!o.supervised())
        return { refused: "this daemon cannot restart itself safely: run it as a systemd user unit or under a supervisor with `berth daemon --supervised`" };
      const info = await buildInfo(o.exec);
      if (info === null) return { refused: `the release installed at ${o.exec.script} does not answer \`berth build-info\`; reinstall it` };
      if (a.version !== undefined && info.version !== a.version)
        return { refused: `the release installed at ${o.exec.script} is ${info.version.slice(0, 32)}, not the \`command.version\` requested; install that version first` };
      if (plan !== null && plan.to_version === info.version) return view(plan);
      const [, session, parentHandle] = a.parent?.split("/") ?? [];
      const origin = session !== undefined && session !== "" ? await o.originOf(session) : null;
      plan = {
        to_version: info.version,
        requester: a.parent ?? "client",
        origin,
        deadline_unix_seconds: Math.floor(now() / 1000) + a.max_wait_seconds,
        parentHandle: parentHandle !== undefined && parentHandle !== "" ? parentHandle : null,
      };
      if (plan.parentHandle !== null) plan.waiting_for = `delegation ${plan.parentHandle}`;
      timer ??= setInterval(() => void check(), CHECK_MS);
      return view(plan);
    },
    stop() {
      if (timer !== null) clearInterval(timer);
      timer = null;
    },
  };
}
