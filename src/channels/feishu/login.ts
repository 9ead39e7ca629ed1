/**
 * Feishu/Lark sign-in: by scan (the accounts service's device-code app registration, which creates a personal
 * agent app and returns its App ID, App Secret and the scanner's open_id = the owner), or by an existing App ID +
 * App Secret (checked by fetching a tenant token and the bot's info).
 */
import { realClock, realTimers, timerDeadline, type Clock, type Timers } from "../common/backoff.js";
import { FeishuApi, FeishuError } from "./api.js";
import { APP_ID, type FeishuCredentials } from "./credentials.js";
import { LoginError } from "../wechat/login.js";
import { BodyTooLarge, formatBytes, readBounded } from "../../core/bounded-body.js";

export const FEISHU_ACCOUNTS = "https://accounts.feishu.cn";
export const LARK_ACCOUNTS = "https://accounts.larksuite.com";

export interface ScanOptions {
  accounts: string;
  larkAccounts: string;
  open: string;
  larkOpen: string;
  show: (url: string) => void;
  clock?: Clock;
  /** Request deadlines (tests move them by hand). */
  timers?: Timers;
  signal?: AbortSignal;
}

/** The sign-in service's answers are a few hundred bytes; a body past this is not one of them. */
const MAX_REGISTRATION_BODY_BYTES = 64 * 1024;
/** Deadline of one sign-in service request, its answer included. */
export const REGISTRATION_TIMEOUT_MS = 30_000;

async function registration(base: string, form: Record<string, string>, timers: Timers, signal?: AbortSignal): Promise<Record<string, unknown>> {
  const service = base.replace(/\/+$/, "");
  let res: Response;
  let body: Buffer;
  const limit = timerDeadline(timers, REGISTRATION_TIMEOUT_MS, signal);
  try {
    res = await fetch(`${service}/oauth/v1/app/registration`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form).toString(),
      redirect: "manual",
      signal: limit.signal,
    });
    body = await readBounded(res, MAX_REGISTRATION_BODY_BYTES);
  } catch (err) {
    if (signal?.aborted) throw new LoginError("login cancelled");
    if (limit.expired()) throw new LoginError(`the Feishu sign-in service at ${service} did not answer within ${REGISTRATION_TIMEOUT_MS / 1000} s; check the network and try again`);
    if (err instanceof BodyTooLarge) throw new LoginError(`the Feishu sign-in service at ${service} sent an answer over ${formatBytes(err.maxBytes)}, not a sign-in answer; try again later`);
    throw new LoginError(`cannot reach the Feishu sign-in service at ${service}; check the network and try again`);
  } finally {
    limit.done();
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    parsed = null;
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new LoginError(`the Feishu sign-in service at ${service} answered HTTP ${res.status}, not a JSON object; try again later`);
  }
  return parsed as Record<string, unknown>;
}

export async function feishuScanLogin(o: ScanOptions): Promise<FeishuCredentials> {
  const clock = o.clock ?? realClock;
  const timers = o.timers ?? realTimers;
  let base = o.accounts;
  let brand: "feishu" | "lark" = "feishu";
  const begin = await registration(base, { action: "begin", archetype: "PersonalAgent", auth_method: "client_secret", request_user_info: "open_id tenant_brand" }, timers, o.signal);
  const device = begin["device_code"];
  const uri = begin["verification_uri_complete"];
  if (typeof device !== "string" || typeof uri !== "string") throw new LoginError("the Feishu sign-in service did not start a sign-in; try again later");
  o.show(uri);
  let interval = Math.max(1, Number(begin["interval"] ?? 5)) * 1000;
  const deadline = clock.now() + Math.max(60, Number(begin["expires_in"] ?? 600)) * 1000;
  let switched = false;
  while (clock.now() < deadline) {
    await clock.sleep(interval, o.signal);
    const r = await registration(base, { action: "poll", device_code: device }, timers, o.signal);
    const err = r["error"];
    if (err === "authorization_pending") continue;
    if (err === "slow_down") {
      interval += 5000;
      continue;
    }
    if (err === "access_denied") throw new LoginError("the sign-in was declined on the phone");
    if (err === "expired_token") throw new LoginError("the sign-in expired; run the login again when ready to scan");
    const user = (r["user_info"] ?? {}) as { open_id?: unknown; tenant_brand?: unknown };
    if (user.tenant_brand === "lark" && !switched) {
      switched = true;
      brand = "lark";
      base = o.larkAccounts;
      if (typeof r["client_id"] !== "string") continue;
    }
    const id = r["client_id"];
    const secret = r["client_secret"];
    if (typeof id !== "string" || typeof secret !== "string" || typeof user.open_id !== "string") {
      if (typeof err === "string") throw new LoginError("the Feishu sign-in failed; try again");
      continue;
    }
    return { brand, app_id: id, app_secret: secret, owner_open_id: user.open_id, open_url: brand === "lark" ? o.larkOpen : o.open, saved_unix_seconds: Math.floor(clock.now() / 1000) };
  }
  throw new LoginError("the sign-in expired; run the login again when ready to scan");
}

/** Checks App ID + App Secret against the platform before they are saved. */
export async function feishuAppLogin(o: { brand: "feishu" | "lark"; open: string; appId: string; appSecret: string; owner: string; timers?: Timers }): Promise<FeishuCredentials> {
  if (!APP_ID.test(o.appId)) throw new LoginError("the App ID must look like cli_ followed by 16 hex digits (see the app's Credentials page)");
  if (o.owner !== "" && !/^ou_[A-Za-z0-9]+$/.test(o.owner)) throw new LoginError("the owner must be an open_id (ou_…)");
  const api = new FeishuApi({ open: o.open, appId: o.appId, appSecret: o.appSecret, timers: o.timers });
  try {
    await api.tenantToken();
    await api.botOpenId();
  } catch (err) {
    if (err instanceof FeishuError && err.kind === "credentials") throw new LoginError("the platform rejected the App ID or App Secret");
    if (err instanceof FeishuError && err.kind === "invalid") throw new LoginError("the app has no bot: enable the Bot capability in the developer console");
    if (err instanceof FeishuError && /no answer within/.test(err.message)) throw new LoginError(`the Feishu open platform did not answer (${err.message}); check the network and try again`);
    throw new LoginError("cannot reach the Feishu open platform; check the network and try again");
  }
  return { brand: o.brand, app_id: o.appId, app_secret: o.appSecret, owner_open_id: o.owner, open_url: o.open, saved_unix_seconds: Math.floor(Date.now() / 1000) };
}
