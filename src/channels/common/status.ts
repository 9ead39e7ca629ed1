/** The component view shared by `daemon.status` and `berth channel status`. Never carries a credential. */
export type ComponentState = "disabled" | "starting" | "connected" | "disconnected" | "backoff" | "stopping" | "stopped" | "failed";

/**
 * The command that signs account `account` of `channel` in again: its `--account` unless it is the default one, and
 * `lark` for a Feishu account known to be a Lark one (`brand`); an account whose brand is unknown (no saved login)
 * names both.
 */
export function loginCommand(channel: "wechat" | "feishu", account: string, brand?: "feishu" | "lark"): string {
  const which = channel === "wechat" ? "wechat" : (brand ?? "feishu");
  const acct = account === "default" ? "" : ` --account ${account}`;
  const lark = channel === "feishu" && brand === undefined ? ` (or \`berth channel login lark${acct}\` for a Lark account)` : "";
  return `\`berth channel login ${which}${acct}\`${lark}`;
}

/** The fixed error of an account whose platform rejected its token: only a new login helps. */
export function needsLogin(channel: "wechat" | "feishu", account: string, brand?: "feishu" | "lark"): string {
  return `the platform rejected the saved login; run ${loginCommand(channel, account, brand)} again`;
}

export interface ComponentStatus {
  id: string;
  channel: "wechat" | "feishu";
  account: string;
  bot_id: string | null;
  user_id: string | null;
  enabled: boolean;
  state: ComponentState;
  last_success_unix_seconds: number | null;
  error: string | null;
  restarts: number;
  remote_tools: "none" | "owner";
  /** As set; an `owner` account without a known owner ID answers nobody. */
  senders: "owner" | "anyone";
}

/** Drops anything that looks like a secret or URL query from an error before it reaches status or logs. */
export function sanitizeError(message: string): string {
  return message
    .replace(/(https?|wss?):\/\/[^\s"']+/g, (u) => {
      try {
        const x = new URL(u);
        return `${x.protocol}//${x.host}${x.pathname}`;
      } catch {
        return "<url>";
      }
    })
    .replace(/Bearer\s+[^\s"']+/gi, "Bearer <redacted>")
    .replace(/\b(t-|u-)[A-Za-z0-9._-]{16,}/g, "<redacted>")
    .slice(0, 300);
}
