/**
 * iLink bot API client (HTTP + JSON; bodies parsed losslessly).
 *
 * Contract:
 * - `getUpdates` long-polls against a deadline on the injected timers: no answer (headers) by it is an empty poll, not
 *   an error; an answer that began gets the rest of that deadline on a timer of its own, and a body still unfinished
 *   when that fires (a stall) is a failed poll. A response is valid only with
 *   `msgs` an array (≤4096) and `get_updates_buf` a string, and `ret`/`errcode` absent or 0. `-14` (and HTTP 401 on
 *   the poll) throws `IlinkError` of kind `token`: only a new login helps.
 * - `send` retries transport errors, 5xx, 401, 408 and 429 with the SAME `client_id` (3 attempts); a non-zero
 *   `ret`/`errcode` in a 2xx body or any other 4xx is a final refusal (`"refused"`). Every attempt has a 30 s
 *   deadline on the injected timers (the last failure names it: `no answer within 30 s`); aborting the caller's signal
 *   ends the call at once (no retry).
 * - Bodies are read with a bound (`getupdates` MAX_POLL_BODY_BYTES, other calls MAX_CALL_BODY_BYTES): a body past it
 *   is an error naming the bound (`getupdates` then backs off like any failed poll), never buffered to the end.
 * - Errors never carry the token, the cursor or message content.
 */
import { randomBytes } from "node:crypto";
import type { Clock, Timers } from "../common/backoff.js";
import { realClock, realTimers, timerDeadline } from "../common/backoff.js";
import { BodyTooLarge, readText } from "../common/body.js";
import { PlatformError } from "../common/port.js";
import { parseLossless } from "./json.js";

export const ILINK_API = "https://ilinkai.weixin.qq.com";
export const ILINK_CDN = "https://novac2c.cdn.weixin.qq.com/c2c";
export const CHANNEL_VERSION = "1.0.0";
export const MAX_BATCH = 4096;
const DEFAULT_POLL_MS = 35_000;
/** Deadline of one attempt of an API call (`sendmessage`, `getuploadurl`). */
const CALL_TIMEOUT_MS = 30_000;
/**
 * The largest `getupdates` body read: far above a real batch (≤4096 messages of chat text), far below what a server
 * streaming without end would make the daemon hold before the poll's deadline.
 */
export const MAX_POLL_BODY_BYTES = 16 * 1024 * 1024;
/** The largest body of any other call (`sendmessage` and `getuploadurl` answers are a few hundred bytes). */
export const MAX_CALL_BODY_BYTES = 1024 * 1024;

export type IlinkErrorKind = "token" | "ret" | "http" | "invalid" | "transport";

export class IlinkError extends PlatformError {
  constructor(
    readonly kind: IlinkErrorKind,
    message: string,
  ) {
    super(message);
    this.name = "IlinkError";
  }
}

export interface Updates {
  msgs: unknown[];
  cursor: string;
  pollMs: number;
  /** False for a client-side timeout (an empty poll that is not contact with the server). */
  contacted: boolean;
}

export interface IlinkOptions {
  base: string;
  cdn: string;
  token: string;
  clock?: Clock;
  /** Every request's deadline timers (tests fire them by hand). */
  timers?: Timers | undefined;
}

function uin(): string {
  return Buffer.from(String(randomBytes(4).readUInt32LE(0))).toString("base64");
}

function retOf(body: unknown): number {
  if (body === null || typeof body !== "object") return 0;
  const b = body as { ret?: unknown; errcode?: unknown };
  const r = typeof b.ret === "number" ? b.ret : 0;
  const e = typeof b.errcode === "number" ? b.errcode : 0;
  return r !== 0 ? r : e;
}

export class IlinkClient {
  private readonly clock: Clock;
  private readonly timers: Timers;
  constructor(private readonly o: IlinkOptions) {
    this.clock = o.clock ?? realClock;
    this.timers = o.timers ?? realTimers;
  }

  private url(path: string): string {
    return this.o.base.replace(/\/+$/, "") + path;
  }

  private headers(): Record<string, string> {
    return {
      "Content-Type": "application/json",
      AuthorizationType: "ilink_bot_token",
      Authorization: `Bearer ${this.o.token}`,
      "X-WECHAT-UIN": uin(),
    };
  }

  async getUpdates(cursor: string, timeoutMs: number, signal: AbortSignal): Promise<Updates> {
    // Two timers share the one deadline, so the one that fires says which phase ran out: no answer (an empty poll),
    // or an answer that began and never finished (a broken one).
    const deadline = new AbortController();
    let phase: "answer" | "body" = "answer";
    const started = this.clock.now();
    const arm = (ms: number): unknown => this.timers.set(() => deadline.abort(new Error(`getupdates: ${phase} deadline`)), Math.max(0, ms));
    let timer = arm(timeoutMs);
    let res: Response | null = null;
    let text: string;
    try {
      res = await fetch(this.url("/ilink/bot/getupdates"), {
        method: "POST",
        headers: this.headers(),
        body: JSON.stringify({ get_updates_buf: cursor, base_info: { channel_version: CHANNEL_VERSION } }),
        redirect: "manual",
        signal: AbortSignal.any([signal, deadline.signal]),
      });
      if (!deadline.signal.aborted) {
        this.timers.clear(timer);
        phase = "body";
        timer = arm(timeoutMs - (this.clock.now() - started));
      }
      text = await readText(res, MAX_POLL_BODY_BYTES);
    } catch (err) {
      if (signal.aborted) throw new IlinkError("transport", "stopped");
      if (err instanceof BodyTooLarge) throw new IlinkError("invalid", `getupdates: ${err.message}`);
      if (deadline.signal.aborted) {
        if (phase === "answer") return { msgs: [], cursor, pollMs: timeoutMs, contacted: false };
        throw new IlinkError("transport", `getupdates: the answer did not finish within ${Math.round(timeoutMs / 1000)} s`);
      }
      throw new IlinkError("transport", "getupdates: connection failed");
    } finally {
      this.timers.clear(timer);
    }
    if (res.status === 401) throw new IlinkError("token", "getupdates: token rejected (HTTP 401)");
    if (res.status !== 200) throw new IlinkError("http", `getupdates: HTTP ${res.status}`);
    let body: unknown;
    try {
      body = parseLossless(text);
    } catch {
      throw new IlinkError("invalid", "getupdates: response is not JSON");
    }
    const ret = retOf(body);
    if (ret === -14) throw new IlinkError("token", "getupdates: session timeout (-14)");
    if (ret !== 0) throw new IlinkError("ret", `getupdates: ret ${ret}`);
    const b = body as { msgs?: unknown; get_updates_buf?: unknown; longpolling_timeout_ms?: unknown };
    if (!Array.isArray(b.msgs) || typeof b.get_updates_buf !== "string") throw new IlinkError("invalid", "getupdates: malformed response");
    if (b.msgs.length > MAX_BATCH) throw new IlinkError("invalid", "getupdates: batch too large");
    const lp = typeof b.longpolling_timeout_ms === "number" && b.longpolling_timeout_ms > 0 ? b.longpolling_timeout_ms : DEFAULT_POLL_MS;
    return { msgs: b.msgs, cursor: b.get_updates_buf === "" ? cursor : b.get_updates_buf, pollMs: Math.min(lp, 120_000), contacted: true };
  }

  /** POSTs an authenticated JSON call with retries; returns the parsed body or "refused". */
  async call(path: string, payload: Record<string, unknown>, signal?: AbortSignal): Promise<unknown> {
    const body = JSON.stringify({ ...payload, base_info: { channel_version: CHANNEL_VERSION } });
    for (let attempt = 0; ; attempt++) {
      let status = 0;
      let text = "";
      let timedOut = false;
      const limit = timerDeadline(this.timers, CALL_TIMEOUT_MS, signal);
      try {
        const res = await fetch(this.url(path), { method: "POST", headers: this.headers(), body, redirect: "manual", signal: limit.signal });
        status = res.status;
        text = await readText(res, MAX_CALL_BODY_BYTES);
      } catch (err) {
        // An over-long answer is read as far as the bound: a success status keeps its meaning, its body is dropped.
        if (err instanceof BodyTooLarge) text = "";
        else {
          status = 0;
          timedOut = limit.expired();
        }
      } finally {
        limit.done();
      }
      if (signal?.aborted) throw new IlinkError("transport", `${path}: stopped`);
      const retryable = status === 0 || status >= 500 || status === 401 || status === 408 || status === 429;
      if (retryable) {
        const failure = status !== 0 ? `HTTP ${status}` : timedOut ? `no answer within ${CALL_TIMEOUT_MS / 1000} s` : "connection failed";
        if (attempt >= 2) throw new IlinkError(status === 0 ? "transport" : "http", `${path}: ${failure} (3 attempts)`);
        await this.clock.sleep(500 * 2 ** attempt, signal);
        continue;
      }
      if (status < 200 || status >= 300) return "refused";
      let parsed: unknown = {};
      try {
        parsed = text.trim() === "" ? {} : parseLossless(text);
      } catch {
        parsed = {}; // live acknowledgements are sometimes not JSON
      }
      if (retOf(parsed) === -14) throw new IlinkError("token", `${path}: session timeout (-14)`);
      return retOf(parsed) !== 0 ? "refused" : parsed;
    }
  }

  async sendMessage(to: string, clientId: string, contextToken: string | null, item: Record<string, unknown>, signal?: AbortSignal): Promise<"sent" | "refused"> {
    const msg: Record<string, unknown> = { from_user_id: "", to_user_id: to, client_id: clientId, message_type: 2, message_state: 2, item_list: [item] };
    if (contextToken) msg["context_token"] = contextToken;
    const r = await this.call("/ilink/bot/sendmessage", { msg }, signal);
    return r === "refused" ? "refused" : "sent";
  }

  /** The timers every request's deadline runs on (media downloads use them too). */
  get deadlines(): Timers {
    return this.timers;
  }

  /** The clock the client sleeps on (and uploads time out on). */
  get timing(): Clock {
    return this.clock;
  }

  get cdnBase(): string {
    return this.o.cdn.replace(/\/+$/, "");
  }
}
