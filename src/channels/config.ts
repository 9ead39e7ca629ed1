/**
 * Channel accounts' settings (`$MC_HOME/channels/settings.json`, 0600): per-account `enabled`, `workspace`,
 * `remote_tools`, `senders` (the `channel_set` fields) and optional platform base URLs (`endpoints`), which is how
 * tests and private deployments point the unchanged production code at another server.
 *
 * Defaults: enabled, daemon workspace, `remote_tools = "none"`, `senders = "owner"`. Lark accounts live under
 * `feishu` (the brand is in the credentials).
 *
 * Every change (`setAccount`, `logoutAccount`) reads, changes and rewrites the whole file under the file's
 * cross-process lock (store/settings/locked-json.ts's `withFileLock`): the daemon and any number of `berth channel`
 * processes writing while no daemon runs are serialized, so none loses another's change. The write itself is atomic,
 * so a reader (the daemon's reconciliation) never sees a partial file.
 */
import { lstat, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { JsonFileError, withFileLock } from "../store/settings/locked-json.js";
import type { Timers } from "./common/backoff.js";
import type { AccountSettings } from "./common/component.js";
import { channelPaths, checkAccountName, ensurePrivateDir, readJsonFile, writePrivateAtomic } from "./common/files.js";
import { ILINK_API, ILINK_CDN } from "./wechat/ilink.js";
import { FEISHU_OPEN, LARK_OPEN } from "./feishu/api.js";
import { FEISHU_ACCOUNTS, LARK_ACCOUNTS } from "./feishu/login.js";

export type ChannelName = "wechat" | "feishu";

export interface AccountEntry {
  enabled: boolean;
  workspace: string | null;
  remote_tools: "none" | "owner";
  senders: "owner" | "anyone";
}

export interface Endpoints {
  wechat: { api: string; cdn: string };
  feishu: { open: string; accounts: string };
  lark: { open: string; accounts: string };
}

export interface ChannelsConfig {
  endpoints: Endpoints;
  accounts: Record<ChannelName, Record<string, AccountEntry>>;
}

export const DEFAULT_ENDPOINTS: Endpoints = {
  wechat: { api: ILINK_API, cdn: ILINK_CDN },
  feishu: { open: FEISHU_OPEN, accounts: FEISHU_ACCOUNTS },
  lark: { open: LARK_OPEN, accounts: LARK_ACCOUNTS },
};

export function configPath(home: string): string {
  return join(home, "channels", "settings.json");
}

/** `lark` is accepted wherever `feishu` is. Anything else is null (the caller's `component_error`). */
export function channelOf(name: string): ChannelName | null {
  if (name === "wechat") return "wechat";
  if (name === "feishu" || name === "lark") return "feishu";
  return null;
}

function entryOf(v: unknown): AccountEntry {
  const e = (v ?? {}) as Partial<AccountEntry>;
  return {
    enabled: e.enabled !== false,
    workspace: typeof e.workspace === "string" ? e.workspace : null,
    remote_tools: e.remote_tools === "owner" ? "owner" : "none",
    senders: e.senders === "anyone" ? "anyone" : "owner",
  };
}

function str(v: unknown, d: string): string {
  return typeof v === "string" && v !== "" ? v : d;
}

export async function loadChannelsConfig(home: string): Promise<ChannelsConfig> {
  let raw: Record<string, unknown> = {};
  try {
    raw = ((await readJsonFile(configPath(home))) ?? {}) as Record<string, unknown>;
  } catch (err) {
    // A file that could not be read at all says so (readJsonFile's message); only a parse failure is "not valid JSON".
    if (err instanceof Error && err.message.startsWith(`${configPath(home)} cannot be read`)) throw err;
    throw new Error(`${configPath(home)} is not valid JSON: fix or remove it`);
  }
  const ep = (raw["endpoints"] ?? {}) as Record<string, Record<string, unknown> | undefined>;
  const accounts = (raw["accounts"] ?? {}) as Record<string, Record<string, unknown> | undefined>;
  const pick = (ch: ChannelName): Record<string, AccountEntry> =>
    Object.fromEntries(Object.entries(accounts[ch] ?? {}).map(([k, v]) => [k, entryOf(v)]));
  return {
    endpoints: {
      wechat: { api: str(ep["wechat"]?.["api"], ILINK_API), cdn: str(ep["wechat"]?.["cdn"], ILINK_CDN) },
      feishu: { open: str(ep["feishu"]?.["open"], FEISHU_OPEN), accounts: str(ep["feishu"]?.["accounts"], FEISHU_ACCOUNTS) },
      lark: { open: str(ep["lark"]?.["open"], LARK_OPEN), accounts: str(ep["lark"]?.["accounts"], LARK_ACCOUNTS) },
    },
    accounts: { wechat: pick("wechat"), feishu: pick("feishu") },
  };
}

async function saveConfig(home: string, c: ChannelsConfig): Promise<void> {
  const out: Record<string, unknown> = { accounts: c.accounts };
  const ep: Record<string, unknown> = {};
  for (const k of ["wechat", "feishu", "lark"] as const) {
    if (JSON.stringify(c.endpoints[k]) !== JSON.stringify(DEFAULT_ENDPOINTS[k])) ep[k] = c.endpoints[k];
  }
  if (Object.keys(ep).length > 0) out["endpoints"] = ep;
  await writePrivateAtomic(configPath(home), JSON.stringify(out, null, 2) + "\n");
}

/** Where a settings change waits for the file's lock (tests: timers moved by hand). */
export interface ChangeOptions {
  timers?: Timers | undefined;
}

/** Runs a read-change-write of the settings file holding its lock; a lock not had within 5 s is a named error. */
async function changeConfig<T>(home: string, fn: () => Promise<T>, o: ChangeOptions = {}): Promise<T> {
  const path = configPath(home);
  await ensurePrivateDir(dirname(path));
  try {
    return await withFileLock(path, fn, undefined, o.timers);
  } catch (err) {
    if (err instanceof JsonFileError && err.reason === "lock_failed")
      throw new Error(`${path} is locked by another berth process (the daemon or another \`berth channel\`) for over 5 s: try again`);
    throw err;
  }
}

/** `channel_set`: persists only the fields present; an absent or null workspace keeps the saved one. */
export async function setAccount(
  home: string,
  channel: ChannelName,
  account: string,
  /** An undefined member leaves that setting unchanged. */
  patch: { enabled?: boolean | undefined; workspace?: string | null | undefined; remote_tools?: "none" | "owner" | undefined; senders?: "owner" | "anyone" | undefined },
  o: ChangeOptions = {},
): Promise<AccountEntry> {
  checkAccountName(account);
  return await changeConfig(home, async () => {
    const c = await loadChannelsConfig(home);
    const e = c.accounts[channel][account] ?? entryOf(undefined);
    if (patch.enabled !== undefined) e.enabled = patch.enabled;
    if (typeof patch.workspace === "string") e.workspace = patch.workspace;
    if (patch.remote_tools !== undefined) e.remote_tools = patch.remote_tools;
    if (patch.senders !== undefined) e.senders = patch.senders;
    c.accounts[channel][account] = e;
    await saveConfig(home, c);
    return e;
  }, o);
}

/** `channel_logout`: removes the account's settings, credentials and delivery state; whether there was any. */
export async function logoutAccount(home: string, channel: ChannelName, account: string, o: ChangeOptions = {}): Promise<boolean> {
  const p = channelPaths(home, channel, account);
  return await changeConfig(home, async () => {
    const c = await loadChannelsConfig(home);
    const exists = (path: string): Promise<boolean> => lstat(path).then(() => true, () => false);
    const had = c.accounts[channel][account] !== undefined || (await exists(p.credentials)) || (await exists(p.state));
    if (!had) return false;
    delete c.accounts[channel][account];
    await saveConfig(home, c);
    await rm(p.credentials, { force: true });
    await rm(p.state, { force: true });
    return true;
  }, o);
}

export function settingsOf(e: AccountEntry, daemonWorkspace: string): AccountSettings {
  return { enabled: e.enabled, workspace: e.workspace ?? daemonWorkspace, remoteTools: e.remote_tools, senders: e.senders };
}
