/**
 * Feishu/Lark open-platform REST client: tenant token (cached until 10 min before expiry, dropped on token codes),
 * messages (create/reply with a stable `uuid`), history list, resources, image/file upload, bot info and the
 * long-connection endpoint.
 *
 * Contract: retries transport errors, 5xx, 408, 429, rate codes (99991400, 230020, 11232, 11233) and token codes
 * with the same body (so the same `uuid`), 3 attempts; any other non-zero code is final (`FeishuError` kind
 * `refused`, carrying only the numeric code, `final`). Bad app credentials (known codes only) are kind `credentials`;
 * any other tenant-token failure (rate limit, platform error) is `transport`, retried later. Bodies are read with a
 * bound (MAX_SMALL_BODY_BYTES for the token, bot info and endpoint answers, MAX_CALL_BODY_BYTES for other calls): a
 * longer one, or one that is not JSON, fails naming that and the HTTP status. Every request, body included, has a
 * deadline on the injected timers (token, bot info and endpoint 30 s, other calls 60 s per attempt, downloads 120 s);
 * one that passes fails naming it (`tenant token: no answer within 30 s`). Errors never carry the secret, tokens,
 * socket URLs or message content.
 */
import { open } from "node:fs/promises";
import { realClock, realTimers, timerDeadline, type Clock, type Timers } from "../common/backoff.js";
import { BodyTooLarge, readText } from "../common/body.js";
import { MediaTooLarge } from "../common/media.js";
import { PlatformError } from "../common/port.js";

export const FEISHU_OPEN = "https://open.feishu.cn";
export const LARK_OPEN = "https://open.larksuite.com";
const TOKEN_CODES = new Set([99991661, 99991663, 99991664, 99991668]);
const RATE_CODES = new Set([99991400, 230020, 11232, 11233]);
/** Bad app credentials (tenant token: not an app ID, no such app, wrong secret; long connection: 514 auth failed). */
const CREDENTIAL_CODES = new Set([10003, 10014, 10015, 514]);
/** Token, bot info and endpoint answers are a few hundred bytes. */
export const MAX_SMALL_BODY_BYTES = 1024 * 1024;
/** A history page (50 messages of up to 150 KB) or a forwarded bundle, with room to spare. */
export const MAX_CALL_BODY_BYTES = 32 * 1024 * 1024;
/** Deadlines: token, bot info and endpoint requests; one attempt of another call; a resource download. */
export const SMALL_TIMEOUT_MS = 30_000;
export const CALL_TIMEOUT_MS = 60_000;
export const DOWNLOAD_TIMEOUT_MS = 120_000;

/**
 * Runs `fn` (a request and the reading of its answer) on a deadline of `ms` on `timers`; when the deadline passed
 * first, the failure is a `FeishuError` naming `what` and the wait. Aborting `parent` ends it with fn's own error.
 */
async function timed<T>(timers: Timers, ms: number, what: string, fn: (signal: AbortSignal) => Promise<T>, parent?: AbortSignal): Promise<T> {
  const limit = timerDeadline(timers, ms, parent);
  try {
    return await fn(limit.signal);
  } catch (err) {
    if (limit.expired() && !parent?.aborted) throw new FeishuError("transport", `${what}: no answer within ${ms / 1000} s`);
    throw err;
  } finally {
    limit.done();
  }
}

/**
 * The JSON body of `res` read up to `maxBytes`; a `FeishuError` (kind `transport`, retried by the callers' backoff)
 * naming `what`, the HTTP status and the problem when the body is longer or not a JSON object.
 */
async function jsonBody(res: Response, maxBytes: number, what: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readText(res, maxBytes);
  } catch (err) {
    if (err instanceof BodyTooLarge) throw new FeishuError("transport", `${what}: HTTP ${res.status}, ${err.message}`);
    throw new FeishuError("transport", `${what}: HTTP ${res.status}, the answer broke off`);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw new FeishuError("transport", `${what}: HTTP ${res.status}, the answer is not a JSON object`);
  return body as Record<string, unknown>;
}
export type FeishuErrorKind = "credentials" | "refused" | "transport" | "invalid";

export class FeishuError extends PlatformError {
  constructor(
    readonly kind: FeishuErrorKind,
    message: string,
    readonly code: number | null = null,
    /** The platform answered with a code that no retry changes (not a rate limit, token code or exhausted retry). */
    readonly final = false,
  ) {
    super(message);
    this.name = "FeishuError";
  }
}

export interface FeishuApiOptions {
  open: string;
  appId: string;
  appSecret: string;
  clock?: Clock;
  /** Every request's deadline timers (tests fire them by hand). */
  timers?: Timers | undefined;
}

export interface EndpointConfig {
  url: string;
  pingIntervalS: number;
  reconnectIntervalS: number;
}

export class FeishuApi {
  private token: { value: string; expiresAt: number } | null = null;
  private readonly clock: Clock;
  private readonly timers: Timers;
  constructor(private readonly o: FeishuApiOptions) {
    this.clock = o.clock ?? realClock;
    this.timers = o.timers ?? realTimers;
  }

  private url(path: string): string {
    return this.o.open.replace(/\/+$/, "") + path;
  }

  async tenantToken(): Promise<string> {
    if (this.token && this.clock.now() < this.token.expiresAt) return this.token.value;
    const { status, body } = await this.small<{ code?: number; tenant_access_token?: string; expire?: number }>("tenant token", "/open-apis/auth/v3/tenant_access_token/internal", {
      method: "POST",
      headers: { "content-type": "application/json; charset=utf-8" },
      body: JSON.stringify({ app_id: this.o.appId, app_secret: this.o.appSecret }),
    });
    if (body.code !== 0 || typeof body.tenant_access_token !== "string") {
      const code = typeof body.code === "number" ? body.code : null;
      // Only a known bad-credential code means "log in again"; a rate limit or a platform error is retried later.
      if (code !== null && CREDENTIAL_CODES.has(code)) {
        throw new FeishuError("credentials", `tenant token refused (code ${code}): check the App ID and App Secret`, code);
      }
      throw new FeishuError("transport", `tenant token: ${code !== null ? `code ${code}` : `HTTP ${status}`}`, code);
    }
    const ttl = typeof body.expire === "number" ? body.expire : 7200;
    this.token = { value: body.tenant_access_token, expiresAt: this.clock.now() + Math.max(60, ttl - 600) * 1000 };
    return this.token.value;
  }

  /**
   * One authenticated JSON (or multipart) call with the retry policy above (each attempt has a CALL_TIMEOUT_MS
   * deadline, named by the last failure); returns `data`. Aborting `signal` ends it at once, without a retry.
   */
  async call(method: "GET" | "POST", path: string, body?: unknown, form?: FormData, signal?: AbortSignal): Promise<Record<string, unknown>> {
    for (let attempt = 0; ; attempt++) {
      const token = await this.tenantToken();
      let status = 0;
      let parsed = null as { code?: number; data?: Record<string, unknown> } | null;
      const limit = timerDeadline(this.timers, CALL_TIMEOUT_MS, signal);
      let timedOut = false;
      try {
        const headers: Record<string, string> = { authorization: `Bearer ${token}` };
        if (body !== undefined) headers["content-type"] = "application/json; charset=utf-8";
        const res = await fetch(this.url(path), {
          method,
          headers,
          ...(form !== undefined ? { body: form } : body !== undefined ? { body: JSON.stringify(body) } : {}),
          redirect: "manual",
          signal: limit.signal,
        });
        status = res.status;
        parsed = await jsonBody(res, MAX_CALL_BODY_BYTES, path.split("?")[0] ?? path).catch(() => null);
        // An answer that did not finish in time is no answer (a 200 without its body could be taken for a refusal).
        if (limit.expired()) throw new Error("deadline");
      } catch {
        status = 0;
        timedOut = limit.expired();
      } finally {
        limit.done();
      }
      if (signal?.aborted) throw new FeishuError("transport", `${path.split("?")[0]}: stopped`);
      const code = typeof parsed?.code === "number" ? parsed.code : null;
      if (code !== null && TOKEN_CODES.has(code)) this.token = null;
      const retry = status === 0 || status >= 500 || status === 408 || status === 429 || (code !== null && (RATE_CODES.has(code) || TOKEN_CODES.has(code)));
      if (retry) {
        const failure = code !== null ? `code ${code}` : status !== 0 ? `HTTP ${status}` : timedOut ? `no answer within ${CALL_TIMEOUT_MS / 1000} s (3 attempts)` : "connection failed";
        if (attempt >= 2) throw new FeishuError(status === 0 ? "transport" : "refused", `${path.split("?")[0]}: ${failure}`, code);
        await this.clock.sleep(500 * 3 ** attempt, signal);
        continue;
      }
      if (code === 0 && parsed) return parsed.data ?? {};
      throw new FeishuError("refused", `${path.split("?")[0]}: ${code !== null ? `code ${code}` : `HTTP ${status}`}`, code, true);
    }
  }

  /**
   * One small JSON request (token, bot info, endpoint) on the SMALL_TIMEOUT_MS deadline, no redirect followed: its
   * HTTP status and its JSON object; a connection failure is `<what>: connection failed`.
   */
  private small<T>(what: string, path: string, init: RequestInit): Promise<{ status: number; body: T }> {
    return timed(this.timers, SMALL_TIMEOUT_MS, what, async (signal) => {
      let res: Response;
      try {
        res = await fetch(this.url(path), { ...init, redirect: "manual", signal });
      } catch {
        throw new FeishuError("transport", `${what}: connection failed`);
      }
      return { status: res.status, body: (await jsonBody(res, MAX_SMALL_BODY_BYTES, what)) as T };
    });
  }

  /** The bot's own open_id; a transport failure names its HTTP status, a refusal its code and the likely cause. */
  async botOpenId(): Promise<string> {
    const token = await this.tenantToken();
    const { body } = await this.small<{ code?: unknown; bot?: { open_id?: unknown } }>("bot info", "/open-apis/bot/v3/info", { headers: { authorization: `Bearer ${token}` } });
    if (body.code !== 0 || typeof body.bot?.open_id !== "string") {
      const code = typeof body.code === "number" ? body.code : null;
      throw new FeishuError("invalid", `bot info refused (code ${code ?? "?"}): is the bot capability enabled?`, code);
    }
    return body.bot.open_id;
  }

  /** `/callback/ws/endpoint`: the one-time socket URL (never logged) and the client config. */
  async endpoint(): Promise<EndpointConfig> {
    const { body } = await this.small<{ code?: number; data?: { URL?: string; ClientConfig?: { PingInterval?: number; ReconnectInterval?: number } } }>("long-connection endpoint", "/callback/ws/endpoint", {
      method: "POST",
      headers: { "content-type": "application/json", locale: "zh" },
      body: JSON.stringify({ AppID: this.o.appId, AppSecret: this.o.appSecret }),
    });
    if (body.code !== 0 || typeof body.data?.URL !== "string") {
      const code = typeof body.code === "number" ? body.code : null;
      const kind = code !== null && CREDENTIAL_CODES.has(code) ? "credentials" : "refused";
      throw new FeishuError(kind, `long-connection endpoint refused (code ${code ?? "?"})`, code);
    }
    return {
      url: body.data.URL,
      pingIntervalS: body.data.ClientConfig?.PingInterval ?? 120,
      reconnectIntervalS: body.data.ClientConfig?.ReconnectInterval ?? 120,
    };
  }

  async download(messageId: string, key: string, type: "image" | "file", dest: string, maxBytes: number): Promise<{ size: number; mime: string }> {
    const token = await this.tenantToken();
    const path = `/open-apis/im/v1/messages/${encodeURIComponent(messageId)}/resources/${encodeURIComponent(key)}?type=${type}`;
    return timed(this.timers, DOWNLOAD_TIMEOUT_MS, "resource download", async (signal) => {
    const res = await fetch(this.url(path), { headers: { authorization: `Bearer ${token}` }, redirect: "manual", signal });
    const mime = (res.headers.get("content-type") ?? "application/octet-stream").split(";")[0]!.trim();
    if (res.status !== 200 || !res.body || mime === "application/json") {
      await res.arrayBuffer().catch(() => undefined);
      throw new FeishuError("refused", "resource download refused");
    }
    const announced = Number(res.headers.get("content-length") ?? "0");
    if (announced > maxBytes) {
      await res.body.cancel();
      throw new MediaTooLarge();
    }
    const fh = await open(dest, "wx", 0o600);
    let n = 0;
    try {
      for await (const c of res.body) {
        n += (c as Uint8Array).length;
        if (n > maxBytes) throw new MediaTooLarge();
        await fh.write(c as Uint8Array);
      }
    } finally {
      await fh.close();
    }
    return { size: n, mime };
    });
  }
}
