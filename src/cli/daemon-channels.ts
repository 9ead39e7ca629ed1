/**
 * The chat channels as `berth daemon` components: a `ChannelSupervisor` whose sessions run on the daemon's own SCV
 * socket (one connection per chat session), reconciled at start and every 2 seconds (so a `berth channel login`
 * or `set` while the daemon runs takes effect), reported as `daemon.status` components.
 *
 * Cold start: nothing of the channels is loaded until `$MC_HOME/channels/settings.json` exists.
 *
 * Mutations (`set`, `logout`) run one at a time, in arrival order: each reads, changes and rewrites the whole
 * settings file, so two clients' concurrent requests would otherwise lose one of the updates.
 */
import { access } from "node:fs/promises";
import { join } from "node:path";
import type { ChatBridge } from "../channels/common/bridge.js";
import type { ComponentStatus } from "../channels/common/status.js";
import { logoutAccount, setAccount, type ChannelName } from "../channels/config.js";
import type { ChannelSupervisor } from "../channels/supervisor.js";

export const RECONCILE_MS = 2000;

export interface DaemonChannels {
  status(): ComponentStatus[];
  /** Reconciles now (serialized with the periodic reconciliation); resolves once it is done. */
  reload(): Promise<void>;
  /** `channel_set`: persists the present fields, then reconciles (a replacement is stopped and joined first). */
  set(channel: ChannelName, account: string, patch: Parameters<typeof setAccount>[3]): Promise<void>;
  /** `channel_logout`: persists disablement, reconciles (joins), then removes credentials, state and settings. */
  logout(channel: ChannelName, account: string): Promise<void>;
  /**
   * Where to ask the owner: the connected account (known owner, running bridge) whose chat runs SCV session
   * `session` (the session a delegation's `parent` names), else the first such account; null when none.
   */
  ownerChat(session?: string): Promise<{ chat: string; bridge: ChatBridge } | null>;
  /** `<channel>:<account>` of the running account whose chat runs SCV session `session`, or null. */
  chatOf(session: string): Promise<string | null>;
  /** Claimed chat messages not yet answered, across every running account. */
  unanswered(): number;
  stop(): Promise<void>;
}

export async function startDaemonChannels(o: { home: string; workspace: string; scvSocket: string; log: (line: string) => void }): Promise<DaemonChannels> {
  let sup: ChannelSupervisor | null = null;
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  const tick = async (): Promise<void> => {
    if (stopped) return;
    if (sup === null) {
      const exists = await access(join(o.home, "channels", "settings.json")).then(
        () => true,
        () => false,
      );
      if (!exists) return;
      const [{ ChannelSupervisor }, { ScvDriver, unixSocketConnector }] = await Promise.all([import("../channels/supervisor.js"), import("../client/scv/driver.js")]);
      if (stopped) return;
      sup = new ChannelSupervisor({ home: o.home, workspace: o.workspace, driver: new ScvDriver(unixSocketConnector(o.scvSocket)), log: o.log });
    }
    await sup.reconcile();
  };
  const run = (): void => {
    running = running.then(tick).catch((e: unknown) => o.log(`channels: ${e instanceof Error ? e.message.slice(0, 200) : "reconcile failed"}`));
  };
  const reload = (): Promise<void> => {
    run();
    return running;
  };
  let mutating: Promise<unknown> = Promise.resolve();
  const serial = <T>(f: () => Promise<T>): Promise<T> => {
    const p = mutating.then(f, f);
    mutating = p.catch(() => undefined);
    return p;
  };
  run();
  await running;
  const timer = setInterval(run, RECONCILE_MS);
  timer.unref();
  return {
    status: () => sup?.status() ?? [],
    reload,
    set: (channel, account, patch) =>
      serial(async () => {
        await setAccount(o.home, channel, account, patch);
        await reload();
      }),
    logout: (channel, account) =>
      serial(async () => {
        await setAccount(o.home, channel, account, { enabled: false });
        await reload();
        await logoutAccount(o.home, channel, account);
        await reload();
      }),
    unanswered() {
      if (sup === null) return 0;
      let n = 0;
      for (const s of sup.status()) n += sup.component(s.id)?.bridge?.unanswered ?? 0;
      return n;
    },
    async chatOf(session) {
      if (sup === null) return null;
      for (const s of sup.status()) {
        const bridge = sup.component(s.id)?.bridge;
        if (bridge && (await bridge.holdsSession(session))) return s.id;
      }
      return null;
    },
    async ownerChat(session) {
      if (sup === null) return null;
      const reachable: Array<{ chat: string; bridge: ChatBridge }> = [];
      for (const s of sup.status()) {
        if (s.state !== "connected" || s.user_id === null) continue;
        const bridge = sup.component(s.id)?.bridge;
        if (bridge) reachable.push({ chat: s.id, bridge });
      }
      if (session !== undefined) for (const r of reachable) if (await r.bridge.holdsSession(session)) return r;
      return reachable[0] ?? null;
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
      await sup?.stop();
    },
  };
}
