/**
 * WeChat QR login against iLink: fetch a QR code, show it, long-poll its status (following `scaned_but_redirect`,
 * refreshing an expired code up to 3 times), and validate the confirmed login.
 *
 * Contract: a confirmed login must carry `bot_token`, `ilink_bot_id` and `ilink_user_id`; its `baseurl` is accepted
 * only on the login origin itself or on https:443 under `weixin.qq.com`. Errors are fixed sentences; the token never
 * appears in one.
 */
import { realClock, type Clock } from "../common/backoff.js";
import type { WechatCredentials } from "./credentials.js";
import { parseLossless } from "./json.js";
import { textOf } from "../../core/json-text.js";

export class LoginError extends Error {
  override name = "LoginError";
}

export interface WechatLoginOptions {
  api: string;
  cdn: string;
  /** Shows the QR URL (rendered as a terminal QR by the CLI). */
  show: (qrUrl: string, refresh: number) => void;
  progress?: (line: string) => void;
  clock?: Clock;
  signal?: AbortSignal;
  pollTimeoutMs?: number;
}

async function getJson(url: string, timeoutMs: number, signal?: AbortSignal): Promise<Record<string, unknown> | "timeout"> {
  try {
    const res = await fetch(url, { signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs) });
    if (res.status >= 500) return "timeout";
    const body = parseLossless(await res.text());
    return body !== null && typeof body === "object" ? (body as Record<string, unknown>) : {};
  } catch (err) {
    if (signal?.aborted) throw new LoginError("login cancelled");
    if ((err as Error).name === "TimeoutError") return "timeout";
    if (err instanceof SyntaxError) throw new LoginError("the login server answered with something that is not JSON");
    throw new LoginError("cannot reach the WeChat login server; check the network and try again");
  }
}

/** The confirmed `baseurl` must stay on the login origin or on WeChat's own https hosts. */
export function acceptableBase(base: string, loginApi: string): boolean {
  let u: URL;
  try {
    u = new URL(base);
  } catch {
    return false;
  }
  if (u.origin === new URL(loginApi).origin) return true;
  return u.protocol === "https:" && (u.port === "" || u.port === "443") && (u.hostname === "weixin.qq.com" || u.hostname.endsWith(".weixin.qq.com"));
}

export async function wechatLogin(o: WechatLoginOptions): Promise<WechatCredentials> {
  const clock = o.clock ?? realClock;
  const api = o.api.replace(/\/+$/, "");
  const pollTimeout = o.pollTimeoutMs ?? 35_000;
  let pollBase = api;
  for (let refresh = 0; refresh <= 3; refresh++) {
    const qr = await getJson(`${api}/ilink/bot/get_bot_qrcode?bot_type=3`, 30_000, o.signal);
    if (qr === "timeout" || (typeof qr["ret"] === "number" && qr["ret"] !== 0) || typeof qr["qrcode"] !== "string") {
      throw new LoginError("the WeChat login server did not issue a QR code; try again later");
    }
    const code = qr["qrcode"];
    o.show(typeof qr["qrcode_img_content"] === "string" ? qr["qrcode_img_content"] : code, refresh);
    let scanned = false;
    for (;;) {
      const st = await getJson(`${pollBase}/ilink/bot/get_qrcode_status?qrcode=${encodeURIComponent(code)}`, pollTimeout, o.signal);
      const status = st === "timeout" ? "wait" : textOf(st["status"], "wait");
      if (status === "wait" || status === "scaned") {
        if (status === "scaned" && !scanned) {
          scanned = true;
          o.progress?.("Scanned: confirm the login on your phone.");
        }
        await clock.sleep(1000, o.signal);
        continue;
      }
      if (st === "timeout") continue;
      if (status === "expired") break;
      if (status === "scaned_but_redirect") {
        const host = textOf(st["redirect_host"]);
        const next = `${new URL(api).protocol}//${host}`;
        if (!/^[A-Za-z0-9.-]+(:\d+)?$/.test(host) || !acceptableBase(next, api)) throw new LoginError("the login server redirected to a host that is not WeChat's; login refused");
        pollBase = next;
        continue;
      }
      if (status === "need_verifycode" || status === "verify_code_blocked") {
        throw new LoginError("WeChat asked for a pairing code, which Berth cannot enter; log out other ClawBot instances and try again");
      }
      if (status === "binded_redirect") throw new LoginError("this WeChat account is already bound to this bot; the saved login stays in use");
      if (status === "confirmed") {
        const token = st["bot_token"];
        const bot = st["ilink_bot_id"];
        const user = st["ilink_user_id"];
        const base = typeof st["baseurl"] === "string" && st["baseurl"] !== "" ? st["baseurl"] : api;
        if (typeof token !== "string" || token === "" || typeof bot !== "string" || bot === "" || typeof user !== "string" || user === "") {
          throw new LoginError("the confirmed login is missing the bot token, bot ID or owner ID; try again");
        }
        if (!acceptableBase(base, api)) throw new LoginError("the confirmed login points at a server that is not WeChat's; login refused");
        return { bot_token: token, bot_id: bot, user_id: user, base_url: base, cdn_url: o.cdn, saved_unix_seconds: Math.floor(clock.now() / 1000) };
      }
      throw new LoginError(`unexpected login status; try again`);
    }
    o.progress?.("The QR code expired; showing a new one.");
  }
  throw new LoginError("the QR code expired 3 times; run the login again when ready to scan");
}
