/**
 * WeChat QR login against iLink: fetch a QR code, show it, long-poll its status (following `scaned_but_redirect`,
 * refreshing an expired code up to 3 times), and validate the confirmed login. When WeChat asks for a pairing code
 * (`need_verifycode`: the number shown on the phone), it is asked for and sent with the following polls
 * (`verify_code`); a wrong one is asked again, and a QR code blocked after wrong codes (`verify_code_blocked`) is
 * replaced by a new one (counting as a refresh).
 *
 * Contract: a confirmed login must carry `bot_token`, `ilink_bot_id` and `ilink_user_id`; its `baseurl` is accepted
 * only on the login origin itself or on https:443 under `weixin.qq.com`. Errors are fixed sentences; the token never
 * appears in one.
 */
import { realClock, realTimers, timerDeadline, type Clock, type Timers } from "../common/backoff.js";
import { BodyTooLarge, readText } from "../common/body.js";
import type { WechatCredentials } from "./credentials.js";
import { parseLossless } from "./json.js";
import { textOf } from "../../core/json-text.js";

/** A pairing code: the digits WeChat shows on the phone. */
const PAIRING_CODE = /^[0-9]{1,32}$/;
/** Codes asked for per QR code before giving up. */
const MAX_CODE_PROMPTS = 5;
const NO_CODE_INPUT = "WeChat asked for the pairing code shown on your phone, and none was typed; run `berth channel login wechat` in a terminal";

export class LoginError extends Error {
  override name = "LoginError";
}

export interface WechatLoginOptions {
  api: string;
  cdn: string;
  /** Shows the QR URL (rendered as a terminal QR by the CLI). */
  show: (qrUrl: string, refresh: number) => void;
  /**
   * Asks the person for the pairing code WeChat shows on the phone (`need_verifycode`); `retry` after a code that
   * did not match. Null (or no asker) ends the login with an error.
   */
  askCode?: (retry: boolean) => Promise<string | null>;
  progress?: (line: string) => void;
  clock?: Clock;
  /** Request deadlines (tests move them by hand). */
  timers?: Timers;
  signal?: AbortSignal;
  pollTimeoutMs?: number;
}

/** The largest login answer read (a QR code or a status is a few hundred bytes). */
const MAX_LOGIN_BODY_BYTES = 64 * 1024;
/** Deadline of the QR code request. */
const QR_TIMEOUT_MS = 30_000;
/**
 * Status checks in a row that failed (no answer by their deadline, or an HTTP 5xx) before the login gives up. A live
 * server holds each check and then answers `wait`, and a passing gateway error (Cloudflare 524) is taken as `wait`;
 * a server that never answers, or answers 5xx for ever, would otherwise keep the login waiting for ever.
 */
export const MAX_SILENT_STATUS_CHECKS = 4;

/** A login request's outcome: the JSON object, no answer by the deadline, or the HTTP status of a 5xx answer. */
async function getJson(url: string, timeoutMs: number, timers: Timers, signal?: AbortSignal): Promise<Record<string, unknown> | "timeout" | number> {
  const limit = timerDeadline(timers, timeoutMs, signal);
  try {
    const res = await fetch(url, { redirect: "manual", signal: limit.signal });
    if (res.status >= 500) {
      await res.body?.cancel().catch(() => undefined);
      return res.status;
    }
    const body = parseLossless(await readText(res, MAX_LOGIN_BODY_BYTES));
    return body !== null && typeof body === "object" ? (body as Record<string, unknown>) : {};
  } catch (err) {
    if (signal?.aborted) throw new LoginError("login cancelled");
    if (limit.expired()) return "timeout";
    if (err instanceof SyntaxError || err instanceof BodyTooLarge) throw new LoginError("the login server answered with something that is not JSON");
    throw new LoginError("cannot reach the WeChat login server; check the network and try again");
  } finally {
    limit.done();
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
  const timers = o.timers ?? realTimers;
  const api = o.api.replace(/\/+$/, "");
  const pollTimeout = o.pollTimeoutMs ?? 35_000;
  let pollBase = api;
  for (let refresh = 0; refresh <= 3; refresh++) {
    const qr = await getJson(`${api}/ilink/bot/get_bot_qrcode?bot_type=3`, QR_TIMEOUT_MS, timers, o.signal);
    if (qr === "timeout") throw new LoginError(`the WeChat login server did not answer within ${QR_TIMEOUT_MS / 1000} s; check the network and try again`);
    if (typeof qr === "number" || (typeof qr["ret"] === "number" && qr["ret"] !== 0) || typeof qr["qrcode"] !== "string") {
      throw new LoginError("the WeChat login server did not issue a QR code; try again later");
    }
    const code = qr["qrcode"];
    o.show(typeof qr["qrcode_img_content"] === "string" ? qr["qrcode_img_content"] : code, refresh);
    let scanned = false;
    let pairing: string | undefined;
    let asked = 0;
    let silent = 0;
    for (;;) {
      const verify = pairing === undefined ? "" : `&verify_code=${encodeURIComponent(pairing)}`;
      const st = await getJson(`${pollBase}/ilink/bot/get_qrcode_status?qrcode=${encodeURIComponent(code)}${verify}`, pollTimeout, timers, o.signal);
      // Failed checks in a row, of either kind; the error names the last one's.
      silent = st === "timeout" || typeof st === "number" ? silent + 1 : 0;
      if (silent >= MAX_SILENT_STATUS_CHECKS) {
        if (typeof st === "number")
          throw new LoginError(`the WeChat login server answered ${silent} status checks in a row with a server error (the last: HTTP ${st}); try again later`);
        throw new LoginError(`the WeChat login server did not answer ${silent} status checks in a row (${Math.round(pollTimeout / 1000)} s each); check the network and run the login again`);
      }
      const status = typeof st !== "object" ? "wait" : textOf(st["status"], "wait");
      if (status === "wait" || status === "scaned") {
        if (status === "scaned" && !scanned) {
          scanned = true;
          o.progress?.("Scanned: confirm the login on your phone.");
        }
        await clock.sleep(1000, o.signal);
        continue;
      }
      if (typeof st !== "object") continue;
      if (status === "expired") break;
      if (status === "scaned_but_redirect") {
        const host = textOf(st["redirect_host"]);
        const next = `${new URL(api).protocol}//${host}`;
        if (!/^[A-Za-z0-9.-]+(:\d+)?$/.test(host) || !acceptableBase(next, api)) throw new LoginError("the login server redirected to a host that is not WeChat's; login refused");
        pollBase = next;
        continue;
      }
      if (status === "need_verifycode") {
        if (o.askCode === undefined || asked >= MAX_CODE_PROMPTS) throw new LoginError(o.askCode === undefined ? NO_CODE_INPUT : "too many pairing codes tried; run the login again");
        asked++;
        const typed = (await o.askCode(pairing !== undefined))?.trim() ?? null;
        if (typed === null) throw new LoginError(NO_CODE_INPUT);
        if (!PAIRING_CODE.test(typed)) {
          pairing = undefined;
          o.progress?.("The pairing code is the number WeChat shows on your phone (digits only).");
          continue;
        }
        pairing = typed;
        continue;
      }
      if (status === "verify_code_blocked") {
        o.progress?.("Too many wrong pairing codes: this QR code is blocked.");
        break;
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
