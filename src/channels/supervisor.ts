/**
 * Runs the saved channel accounts as components (what `berth daemon` will host; the daemon control issue wires
 * `channel_set` / `channel_logout` / `daemon.status` / `confirm_ask` to these methods).
 *
 * Contract: `reconcile()` starts every enabled account that has credentials, replaces one whose settings or
 * credentials changed (stop and join first), and stops removed or disabled ones. `status()` is the `components`
 * list of `daemon.status`: one entry per saved account, sorted by id, never a credential.
 */
import type { Clock } from "./common/backoff.js";
import { NO_OWNER, type AccountSettings } from "./common/component.js";
import type { ConfirmState } from "./common/confirm.js";
import type { ChatSessionDriver } from "./common/driver.js";
import { ChannelFileError, channelPaths } from "./common/files.js";
import { loginCommand, type ComponentStatus } from "./common/status.js";
import { loadChannelsConfig, settingsOf, type ChannelName } from "./config.js";
import { FeishuComponent } from "./feishu/component.js";
import { loadFeishuCredentials } from "./feishu/credentials.js";
import { WechatComponent } from "./wechat/component.js";
import { loadWechatCredentials } from "./wechat/credentials.js";

type Component = WechatComponent | FeishuComponent;

interface Running {
  key: string;
  comp: Component;
}

export interface SupervisorOptions {
  home: string;
  workspace: string;
  driver: ChatSessionDriver;
  clock?: Clock;
  log?: (line: string) => void;
}

export class ChannelSupervisor {
  private readonly running = new Map<string, Running>();
  private idle: ComponentStatus[] = [];
  private lock: Promise<void> = Promise.resolve();

  constructor(private readonly o: SupervisorOptions) {}

  /** Serialized: concurrent calls run one after another. */
  reconcile(): Promise<void> {
    const next = this.lock.then(() => this.doReconcile());
    this.lock = next.catch(() => undefined);
    return next;
  }

  private async doReconcile(): Promise<void> {
    const cfg = await loadChannelsConfig(this.o.home);
    const wanted = new Set<string>();
    const idle: ComponentStatus[] = [];
    for (const channel of ["wechat", "feishu"] as ChannelName[]) {
      for (const [account, entry] of Object.entries(cfg.accounts[channel])) {
        const id = `${channel}:${account}`;
        const settings = settingsOf(entry, this.o.workspace);
        const creds = await loadCredentials(this.o.home, channel, account);
        if (!settings.enabled || creds === null || creds === UNREADABLE) {
          if (creds === UNREADABLE) this.o.log?.(`channels: ${id}: ${unreadableLogin(channel, account)}`);
          idle.push(idleStatus(channel, account, settings, loginProblem(channel, account, creds), creds === UNREADABLE ? null : creds));
          continue;
        }
        wanted.add(id);
        const key = JSON.stringify([settings, creds]);
        const cur = this.running.get(id);
        if (cur && cur.key === key) continue;
        if (cur) {
          await cur.comp.stop();
          this.running.delete(id);
        }
        const common = { home: this.o.home, account, settings, driver: this.o.driver, clock: this.o.clock, log: this.o.log };
        const comp =
          channel === "wechat"
            ? new WechatComponent({ ...common, credentials: creds as NonNullable<Awaited<ReturnType<typeof loadWechatCredentials>>> })
            : new FeishuComponent({ ...common, credentials: creds as NonNullable<Awaited<ReturnType<typeof loadFeishuCredentials>>> });
        if (cur) comp.health.restarts = cur.comp.health.restarts + 1;
        try {
          await comp.start();
        } catch (err) {
          // Its delivery state could not be read (a passing fault, e.g. no file descriptors left): this account shows
          // the reason and is tried again by the next reconcile; the other accounts still start.
          const why = err instanceof ChannelFileError ? err.message : `it could not start (${(err as Error).name})`;
          this.o.log?.(`channels: ${id}: ${why}`);
          idle.push(idleStatus(channel, account, settings, why, creds));
          continue;
        }
        this.running.set(id, { key, comp });
      }
    }
    for (const [id, r] of this.running) {
      if (wanted.has(id)) continue;
      await r.comp.stop();
      this.running.delete(id);
    }
    this.idle = idle;
  }

  status(): ComponentStatus[] {
    return [...[...this.running.values()].map((r) => r.comp.status()), ...this.idle].sort((a, b) => a.id.localeCompare(b.id));
  }

  component(id: string): Component | null {
    return this.running.get(id)?.comp ?? null;
  }

  /** `confirm_ask`: asks in the first connected account that knows its owner. */
  async ask(question: string, timeoutSeconds: number): Promise<{ id: string; state: ConfirmState; chat: string | null }> {
    for (const [id, r] of [...this.running].sort((a, b) => a[0].localeCompare(b[0]))) {
      const s = r.comp.status();
      if (s.state !== "connected" || s.user_id === null || !r.comp.bridge) continue;
      const out = await r.comp.bridge.ask(question, timeoutSeconds);
      return { ...out, chat: id };
    }
    return { id: "", state: "failed", chat: null };
  }

  async stop(): Promise<void> {
    await this.lock;
    for (const r of this.running.values()) await r.comp.stop();
    this.running.clear();
  }
}

const UNREADABLE = Symbol("unreadable credentials");

function unreadableLogin(channel: ChannelName, account: string): string {
  return `the saved login cannot be read: run ${loginCommand(channel, account)} again`;
}

function loginProblem(channel: ChannelName, account: string, creds: unknown): string | null {
  if (creds === UNREADABLE) return unreadableLogin(channel, account);
  return creds === null ? `no saved login: run ${loginCommand(channel, account)}` : null;
}

/**
 * An account's credentials; null when none are saved, UNREADABLE when the file is corrupt (one broken file must not
 * keep the other accounts from running, and its content never reaches an error).
 */
async function loadCredentials(home: string, channel: ChannelName, account: string) {
  const paths = channelPaths(home, channel, account);
  try {
    return channel === "wechat" ? await loadWechatCredentials(paths.credentials) : await loadFeishuCredentials(paths.credentials);
  } catch {
    return UNREADABLE;
  }
}

function idleStatus(channel: ChannelName, account: string, s: AccountSettings, error: string | null, creds: unknown): ComponentStatus {
  const c = creds as { bot_id?: string; user_id?: string; app_id?: string; owner_open_id?: string } | null;
  const bot = (channel === "wechat" ? c?.bot_id : c?.app_id) ?? null;
  const user = (channel === "wechat" ? c?.user_id : c?.owner_open_id) || null;
  return {
    id: `${channel}:${account}`,
    channel,
    account,
    bot_id: bot || null,
    user_id: user,
    enabled: s.enabled,
    state: s.enabled ? "failed" : "disabled",
    last_success_unix_seconds: null,
    error: s.enabled ? (error ?? (s.senders === "owner" && !user ? NO_OWNER : null)) : null,
    restarts: 0,
    remote_tools: s.remoteTools === "owner" && user ? "owner" : "none",
    senders: s.senders,
  };
}

/** The component view without a running daemon (`berth channel status` offline): saved accounts as `stopped`. */
export async function offlineStatus(home: string): Promise<ComponentStatus[]> {
  const cfg = await loadChannelsConfig(home);
  const out: ComponentStatus[] = [];
  for (const channel of ["wechat", "feishu"] as ChannelName[]) {
    for (const [account, entry] of Object.entries(cfg.accounts[channel])) {
      const settings = settingsOf(entry, home);
      const creds = await loadCredentials(home, channel, account);
      const s = idleStatus(channel, account, settings, loginProblem(channel, account, creds), creds === UNREADABLE ? null : creds);
      if (creds !== null && creds !== UNREADABLE && settings.enabled) s.state = "stopped";
      out.push(s);
    }
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}
