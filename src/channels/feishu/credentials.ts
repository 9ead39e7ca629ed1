/** Feishu/Lark app credentials (`$MC_HOME/channels/feishu/<account>.json`, 0600). The secret stays in this file. */
import { createHash } from "node:crypto";
import { readJsonFile, writePrivateAtomic } from "../common/files.js";

export interface FeishuCredentials {
  brand: "feishu" | "lark";
  app_id: string;
  app_secret: string;
  /** The owner's open_id (per app); empty when unknown: an owner-only account then answers nobody. */
  owner_open_id: string;
  open_url: string;
  saved_unix_seconds: number;
}

export const APP_ID = /^cli_[0-9a-fA-F]{16}$/;

export async function loadFeishuCredentials(path: string): Promise<FeishuCredentials | null> {
  const r = (await readJsonFile(path)) as Partial<FeishuCredentials> | null;
  if (!r || typeof r.app_id !== "string" || typeof r.app_secret !== "string" || typeof r.open_url !== "string") return null;
  return {
    brand: r.brand === "lark" ? "lark" : "feishu",
    app_id: r.app_id,
    app_secret: r.app_secret,
    owner_open_id: typeof r.owner_open_id === "string" ? r.owner_open_id : "",
    open_url: r.open_url,
    saved_unix_seconds: typeof r.saved_unix_seconds === "number" ? r.saved_unix_seconds : 0,
  };
}

export async function saveFeishuCredentials(path: string, c: FeishuCredentials): Promise<void> {
  await writePrivateAtomic(path, JSON.stringify(c, null, 2) + "\n");
}

export function feishuFingerprint(c: FeishuCredentials): string {
  return createHash("sha256").update(`${c.brand}\n${c.app_id}\n${c.owner_open_id}`).digest("hex");
}
