/**
 * The daemon's view of delegated runs (`daemon.status.delegations`, `delegations`, `delegation_kill`) over the
 * records every Berth process of this home writes (runtime/delegation/records.ts), and the orphan reaper: at daemon
 * start and every `REAP_MS`, every orphaned run (its owning Berth process died) is stopped and counted in `reaped`.
 */
import type { DelegationEntry } from "../protocols/scv/control.js";
import { scan, stopRun, type RunView } from "../runtime/delegation/records.js";
import type { DelegationControl } from "./daemon-control.js";

export const REAP_MS = 60_000;

function entry(v: RunView): DelegationEntry {
  const r = v.record;
  return {
    handle: r.handle,
    agent: r.agent,
    session: r.session,
    depth: r.depth,
    pid: r.pid,
    owner_pid: r.owner_pid,
    processes: v.pids.length,
    cwd: r.cwd,
    started_unix_seconds: r.started_unix_seconds,
    orphaned: v.orphaned,
    ...(r.conversation !== undefined ? { conversation: r.conversation } : {}),
    ...(r.turn !== undefined ? { turn: r.turn } : {}),
  };
}

export interface DaemonDelegations extends DelegationControl {
  /** Stops every orphan now; resolves with the handles stopped. */
  reap(): Promise<string[]>;
  stop(): void;
}

export function startDaemonDelegations(o: { home: string; log: (line: string) => void }): DaemonDelegations {
  let reaped = 0;
  const reap = async (): Promise<string[]> => {
    const killed: string[] = [];
    for (const v of await scan(o.home)) {
      if (!v.orphaned) continue;
      await stopRun(o.home, v.record);
      killed.push(v.record.handle);
      reaped++;
    }
    if (killed.length > 0) o.log(`reaped orphaned delegated runs: ${killed.join(", ")}`);
    return killed;
  };
  let running: Promise<unknown> = Promise.resolve();
  const tick = (): void => {
    running = running.then(reap).catch(() => o.log("delegations: the orphan scan failed"));
  };
  tick();
  const timer = setInterval(tick, REAP_MS);
  timer.unref();
  return {
    reap,
    async counts() {
      await running;
      const views = await scan(o.home);
      return { active: views.filter((v) => !v.orphaned).length, reaped };
    },
    async list(all) {
      await running;
      return (await scan(o.home)).filter((v) => all || !v.orphaned).map(entry);
    },
    async kill(handle, orphans) {
      await running;
      const views = await scan(o.home);
      const killed: string[] = [];
      if (handle !== undefined) {
        const v = views.find((x) => x.record.handle === handle);
        if (v === undefined) return { unknown: handle };
        await stopRun(o.home, v.record);
        killed.push(handle);
      }
      if (orphans) {
        for (const v of views) {
          if (!v.orphaned || killed.includes(v.record.handle)) continue;
          await stopRun(o.home, v.record);
          killed.push(v.record.handle);
          reaped++;
        }
      }
      return { killed };
    },
    stop() {
      clearInterval(timer);
    },
  };
}
