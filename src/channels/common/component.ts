/** Settings every channel account shares (the `channel_set` fields) and the health view a component keeps. */
import type { ComponentState, ComponentStatus } from "./status.js";

/** Status note of an owner-only account that does not know its owner. */
export const NO_OWNER = "no owner ID is known, so this owner-only account answers nobody: sign in by scan, or pass --owner";

export interface AccountSettings {
  enabled: boolean;
  workspace: string;
  remoteTools: "none" | "owner";
  senders: "owner" | "anyone";
}

export class Health {
  state: ComponentState = "starting";
  lastSuccess: number | null = null;
  error: string | null = null;
  restarts = 0;
  private waiters: Array<() => void> = [];

  set(state: ComponentState, error: string | null = null): void {
    this.state = state;
    this.error = error;
    for (const w of this.waiters.splice(0)) w();
  }

  success(nowMs: number): void {
    this.lastSuccess = Math.floor(nowMs / 1000);
    this.set("connected");
  }

  /** Resolves once `pred` holds (checked at every change). */
  async until(pred: (h: Health) => boolean): Promise<void> {
    while (!pred(this)) await new Promise<void>((r) => this.waiters.push(r));
  }

  view(channel: "wechat" | "feishu", account: string, botId: string | null, userId: string | null, s: AccountSettings): ComponentStatus {
    return {
      id: `${channel}:${account}`,
      channel,
      account,
      bot_id: botId,
      user_id: userId,
      enabled: s.enabled,
      state: s.enabled ? this.state : "disabled",
      last_success_unix_seconds: this.lastSuccess,
      error: this.error ?? (s.senders === "owner" && !userId ? NO_OWNER : null),
      restarts: this.restarts,
      remote_tools: s.remoteTools === "owner" && userId ? "owner" : "none",
      senders: s.senders,
    };
  }
}
