/**
 * `berth channel`: sign in to chat platforms and inspect the saved accounts.
 *
 *   berth channel login wechat [--account NAME]
 *   berth channel login feishu|lark [--account NAME] [--app-id cli_… [--owner ou_…]]
 *   berth channel logout wechat|feishu|lark [--account NAME]
 *   berth channel set wechat|feishu|lark [--account NAME] [--enable|--disable] [--workspace DIR]
 *                     [--remote-tools none|owner] [--senders owner|anyone]
 *   berth channel status [--json]
 *
 * With `--app-id`, the App Secret is read from BERTH_FEISHU_APP_SECRET or one line of stdin (never an argument:
 * arguments are visible to every local user). Credentials are written owner-only under `$MC_HOME/channels/` and
 * never printed.
 *
 * `set`, `logout` and `status` go to the running daemon (`daemon.control`, see channel-daemon.ts) and touch the saved
 * files themselves only when no daemon listens; an ambiguous exchange is reported, never retried or redone locally.
 */
import { existsSync } from "node:fs";
import { lstat } from "node:fs/promises";
import { isAbsolute } from "node:path";
import { createInterface } from "node:readline";
import { renderUnicodeCompact } from "uqr";
import { ensurePrivateDir, channelPaths, checkAccountName } from "../channels/common/files.js";
import type { ComponentStatus } from "../channels/common/status.js";
import { channelOf, loadChannelsConfig, logoutAccount, setAccount } from "../channels/config.js";
import { saveFeishuCredentials } from "../channels/feishu/credentials.js";
import { feishuAppLogin, feishuScanLogin } from "../channels/feishu/login.js";
import { offlineStatus } from "../channels/supervisor.js";
import { saveWechatCredentials } from "../channels/wechat/credentials.js";
import { LoginError, wechatLogin } from "../channels/wechat/login.js";
import { resolveHome } from "../store/home.js";
import { prepareHome } from "../store/state-root.js";
import type { ControlOutcome } from "./channel-daemon.js";
import { terminalSafe } from "./terminal-safe.js";

export const USAGE = `usage:
  berth channel login wechat [--account NAME]
  berth channel login feishu|lark [--account NAME] [--app-id cli_... [--owner ou_...]]
  berth channel logout wechat|feishu|lark [--account NAME]
  berth channel set wechat|feishu|lark [--account NAME] [--enable|--disable] [--workspace DIR]
                    [--remote-tools none|owner] [--senders owner|anyone]
  berth channel status [--json]
`;

class UsageError extends Error {}

function parseFlags(args: string[], known: Record<string, "value" | "bool">): Record<string, string | true> {
  const out: Record<string, string | true> = {};
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const kind = known[a];
    if (kind === undefined) throw new UsageError(`unknown option '${a.slice(0, 40)}'`);
    if (kind === "bool") out[a] = true;
    else {
      const v = args[++i];
      if (v === undefined) throw new UsageError(`${a} needs a value`);
      out[a] = v;
    }
  }
  return out;
}

function qr(text: string): string {
  return renderUnicodeCompact(text, { border: 1 }) + "\n";
}

/** Lines of stdin, read only when asked for (the pairing code); null at end of input. */
const stdinLines = (() => {
  let rl: ReturnType<typeof createInterface> | null = null;
  let it: AsyncIterator<string> | null = null;
  return {
    async next(): Promise<string | null> {
      rl ??= createInterface({ input: process.stdin, terminal: false });
      it ??= rl[Symbol.asyncIterator]();
      const r = await it.next();
      return r.done === true ? null : r.value;
    },
    close(): void {
      rl?.close();
    },
  };
})();

async function readSecret(): Promise<string> {
  const env = process.env["BERTH_FEISHU_APP_SECRET"];
  if (env) return env;
  process.stderr.write("App Secret (from the app's Credentials page): ");
  const rl = createInterface({ input: process.stdin, terminal: false });
  for await (const line of rl) {
    rl.close();
    return line.trim();
  }
  throw new UsageError("no App Secret given: set BERTH_FEISHU_APP_SECRET or type it on stdin");
}

/** An account the daemon would remove on logout: saved settings, credentials or delivery state. */
async function accountExists(home: string, channel: "wechat" | "feishu", account: string): Promise<boolean> {
  const p = channelPaths(home, channel, account);
  const exists = (path: string): Promise<boolean> => lstat(path).then(() => true, () => false);
  return (await loadChannelsConfig(home)).accounts[channel][account] !== undefined || (await exists(p.credentials)) || (await exists(p.state));
}

/** A daemon exchange that neither succeeded nor found no daemon: the message (never retried), exit status 1. */
async function daemonFailed(r: Exclude<ControlOutcome, { kind: "none" | "status" }>, mutation: boolean): Promise<number> {
  const { failureMessage } = await import("./channel-daemon.js");
  const m = failureMessage(r, mutation);
  process.stderr.write(terminalSafe(`berth channel: ${m}`, false) + "\n");
  return 1;
}

function summary(list: ComponentStatus[]): string {
  if (list.length === 0) return "Channels: no chat accounts yet. Add one with `berth channel login wechat` or `berth channel login feishu`.\n";
  const enabled = list.filter((c) => c.enabled);
  const lines = [`Channels: ${enabled.filter((c) => c.state === "connected").length} of ${enabled.length} enabled accounts connected`];
  for (const c of list) {
    const who = c.user_id ? ` owner ${c.user_id}` : " no owner";
    // IDs and errors come from the chat platform's servers: shown without terminal controls.
    lines.push(terminalSafe(`  ${c.id}  ${c.state}  bot ${c.bot_id ?? "-"}${who}  remote_tools ${c.remote_tools}${c.error ? `  (${c.error})` : ""}`, false));
  }
  return lines.join("\n") + "\n";
}

export async function runChannel(argv: string[]): Promise<number> {
  const home = resolveHome(process.env);
  const [sub, ...rest] = argv;
  // The state root is checked as every door checks it: a home another user may write could hold planted channel
  // settings (remote_tools owner) that `set` would keep and the daemon would then refuse. `status` of a home that does
  // not exist yet creates nothing (it has no accounts).
  if (sub === "status" || sub === "login" || sub === "logout" || sub === "set") {
    const problem = sub === "status" && !existsSync(home) ? null : prepareHome(process.env).problem;
    if (problem !== null) {
      process.stderr.write(`berth channel: ${problem}\n`);
      return 1;
    }
  }
  try {
    if (sub === "status") {
      const f = parseFlags(rest, { "--json": "bool" });
      const { daemonControl } = await import("./channel-daemon.js");
      const r = await daemonControl({ action: "status" });
      if (r.kind !== "none" && r.kind !== "status") return daemonFailed(r, false);
      const live = r.kind === "status" ? (Array.isArray(r.status["components"]) ? (r.status["components"] as ComponentStatus[]) : []) : null;
      const components = live ?? (await offlineStatus(home));
      if (f["--json"]) process.stdout.write(JSON.stringify({ components }) + "\n");
      else process.stdout.write(summary(components) + (live === null && components.length > 0 ? "  (state as saved: no `berth daemon` is running)\n" : ""));
      return 0;
    }
    if ((process.env["SCV_PARENT"] ?? "") !== "") {
      process.stderr.write("berth channel: a delegated agent run (SCV_PARENT is set) cannot manage the daemon's chat accounts; ask the user to run this command\n");
      return 1;
    }
    const [platform, ...flags] = rest;
    const channel = channelOf(platform ?? "");
    if (!sub) throw new UsageError("missing subcommand (login, logout, set or status)");
    if (!["login", "logout", "set"].includes(sub)) throw new UsageError(`unknown subcommand '${sub.slice(0, 40)}' (login, logout, set or status)`);
    if (platform === undefined || platform === "") throw new UsageError(`${sub} needs a channel: wechat, feishu or lark`);
    if (channel === null) throw new UsageError(`unknown channel '${platform.slice(0, 40)}' (wechat, feishu or lark)`);
    if (sub === "logout") {
      const f = parseFlags(flags, { "--account": "value" });
      const account = String(f["--account"] ?? "default");
      checkAccountName(account);
      const { daemonControl } = await import("./channel-daemon.js");
      const had = await accountExists(home, channel, account);
      const r = await daemonControl({ action: "channel_logout", channel, account });
      if (r.kind !== "none" && r.kind !== "status") return daemonFailed(r, true);
      const removed = r.kind === "status" ? had : await logoutAccount(home, channel, account);
      process.stdout.write(
        removed
          ? `Logged out ${channel}:${account}; its credentials and delivery state are removed.\n`
          : `${channel}:${account} is not logged in; nothing to remove (\`berth channel status\` lists the accounts).\n`,
      );
      return 0;
    }
    if (sub === "set") {
      const f = parseFlags(flags, { "--account": "value", "--enable": "bool", "--disable": "bool", "--workspace": "value", "--remote-tools": "value", "--senders": "value" });
      const rt = f["--remote-tools"];
      const se = f["--senders"];
      const ws = f["--workspace"];
      if (rt !== undefined && rt !== "none" && rt !== "owner") throw new UsageError("--remote-tools takes none or owner");
      if (se !== undefined && se !== "owner" && se !== "anyone") throw new UsageError("--senders takes owner or anyone");
      if (typeof ws === "string" && !isAbsolute(ws)) throw new UsageError("--workspace must be an absolute path");
      const account = String(f["--account"] ?? "default");
      checkAccountName(account);
      const patch: Parameters<typeof setAccount>[3] = {
        enabled: f["--enable"] ? true : f["--disable"] ? false : undefined,
        workspace: typeof ws === "string" ? ws : undefined,
        remote_tools: rt === "none" || rt === "owner" ? rt : undefined,
        senders: se === "owner" || se === "anyone" ? se : undefined,
      };
      const present = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
      const { daemonControl } = await import("./channel-daemon.js");
      const r = await daemonControl({ action: "channel_set", channel, account, ...present });
      if (r.kind !== "none" && r.kind !== "status") return daemonFailed(r, true);
      const e = r.kind === "status" ? (await loadChannelsConfig(home)).accounts[channel][account] : await setAccount(home, channel, account, patch);
      process.stdout.write(JSON.stringify(e ?? null) + "\n");
      return 0;
    }
    const cfg = await loadChannelsConfig(home);
    await ensurePrivateDir(home);
    if (channel === "wechat") {
      const f = parseFlags(flags, { "--account": "value" });
      const account = String(f["--account"] ?? "default");
      const paths = channelPaths(home, "wechat", account);
      const creds = await wechatLogin({
        api: cfg.endpoints.wechat.api,
        cdn: cfg.endpoints.wechat.cdn,
        show: (url, n) => process.stdout.write(`${n > 0 ? "New QR code. " : ""}Scan with WeChat (Me → Settings → … ClawBot), then confirm on the phone:\n${qr(url)}${url}\n`),
        progress: (line) => process.stdout.write(line + "\n"),
        askCode: (retry) => {
          process.stdout.write(retry ? "The code did not match; type the number shown in WeChat again: " : "Type the number shown in WeChat on your phone: ");
          return stdinLines.next();
        },
      });
      stdinLines.close();
      await saveWechatCredentials(paths.credentials, creds);
      if (cfg.accounts.wechat[account] === undefined) await setAccount(home, "wechat", account, {});
      process.stdout.write(`Logged in wechat:${account}: bot ${creds.bot_id}, owner ${creds.user_id}.\n`);
      return 0;
    }
    const brand = platform === "lark" ? "lark" : "feishu";
    const f = parseFlags(flags, { "--account": "value", "--app-id": "value", "--owner": "value" });
    const account = String(f["--account"] ?? "default");
    const paths = channelPaths(home, "feishu", account);
    const ep = cfg.endpoints[brand];
    const creds =
      typeof f["--app-id"] === "string"
        ? await feishuAppLogin({ brand, open: ep.open, appId: f["--app-id"], appSecret: await readSecret(), owner: typeof f["--owner"] === "string" ? f["--owner"] : "" })
        : await feishuScanLogin({
            accounts: cfg.endpoints[brand].accounts,
            larkAccounts: cfg.endpoints.lark.accounts,
            open: cfg.endpoints.feishu.open,
            larkOpen: cfg.endpoints.lark.open,
            show: (url) => process.stdout.write(`Scan with the ${brand === "lark" ? "Lark" : "Feishu"} app to create and sign in your bot:\n${qr(url)}${url}\n`),
          });
    await saveFeishuCredentials(paths.credentials, creds);
    if (cfg.accounts.feishu[account] === undefined) await setAccount(home, "feishu", account, {});
    process.stdout.write(`Logged in ${creds.brand}:${account}: app ${creds.app_id}, owner ${creds.owner_open_id || "unknown (set with --owner; an owner-only account answers nobody without it)"}.\n`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`berth channel: ${err.message}\n${USAGE}`);
      return 2;
    }
    if (err instanceof LoginError) {
      process.stderr.write(`berth channel: ${err.message}\n`);
      return 1;
    }
    process.stderr.write(`berth channel: ${err instanceof Error && /^invalid account name|is not valid JSON|cannot be read|is locked by another berth process/.test(err.message) ? err.message : "failed: " + (err as Error).name}\n`);
    return 1;
  }
}
