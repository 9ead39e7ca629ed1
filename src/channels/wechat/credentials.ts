/**
 * WeChat account credentials (`$MC_HOME/channels/wechat/<account>.json`, 0600). The token never leaves this module
 * except into `IlinkClient` headers.
 */
import { createHash } from "node:crypto";
import { readJsonFile, writePrivateAtomic } from "../common/files.js";

export interface WechatCredentials {
  bot_token: string;
  bot_id: string;
  user_id: string;
  base_url: string;
  cdn_url: string;
  saved_unix_seconds: number;
}

export async function loadWechatCredentials(path: string): Promise<WechatCredentials | null> {
  const raw = (await readJsonFile(path)) as Partial<WechatCredentials> | null;
  if (!raw || typeof raw.bot_token !== "string" || typeof raw.bot_id !== "string" || typeof raw.base_url !== "string") return null;
  return {
    bot_token: raw.bot_token,
    bot_id: raw.bot_id,
    user_id: typeof raw.user_id === "string" ? raw.user_id : "",
    base_url: raw.base_url,
    cdn_url: typeof raw.cdn_url === "string" ? raw.cdn_url : "",
    saved_unix_seconds: typeof raw.saved_unix_seconds === "number" ? raw.saved_unix_seconds : 0,
  };
}

export async function saveWechatCredentials(path: string, c: WechatCredentials): Promise<void> {
  await writePrivateAtomic(path, JSON.stringify(c, null, 2) + "\n");
}

/** Binds delivery state to these credentials: origin + bot ID + owner. */
export function wechatFingerprint(c: WechatCredentials): string {
  return createHash("sha256").update(`${new URL(c.base_url).origin}\n${c.bot_id}\n${c.user_id}`).digest("hex");
}
