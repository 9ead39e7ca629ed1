/**
 * A loopback fake of the WeChat iLink bot API and its CDN (node:http on 127.0.0.1), speaking the live formats:
 * HTTP 200 everywhere with failures in `ret`/`errcode`; `getupdates` really long-polls (held until a message is
 * queued or `holdMs`), success bodies omit `ret` like live; uint64 message IDs are emitted as bare JSON integers;
 * a second `sendmessage` on one context token is accepted (200) but silently dropped; media on the CDN is
 * AES-128-ECB/PKCS#7 ciphertext.
 *
 * Routes: /ilink/bot/get_bot_qrcode, /ilink/bot/get_qrcode_status, /ilink/bot/getupdates, /ilink/bot/sendmessage,
 * /ilink/bot/getuploadurl, /ilink/bot/getconfig, /ilink/bot/sendtyping, /ilink/bot/msg/notify{start,stop},
 * /c2c/upload, /c2c/download.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { textOf } from "../../src/core/json-text.js";
import { writeEndless } from "./endless-body.js";

export interface SentMessage {
  to: string;
  clientId: string;
  contextToken: string | null;
  item: Record<string, unknown>;
  /** Accepted but not delivered (second send on one context token). */
  dropped: boolean;
  text: string | null;
}

export interface QrStep {
  status: "wait" | "scaned" | "expired" | "scaned_but_redirect" | "confirmed" | "need_verifycode";
  /** For `confirmed`: override fields (e.g. a hostile baseurl). */
  fields?: Record<string, unknown>;
}

export interface FakeIlinkOptions {
  token?: string;
  botId?: string;
  ownerId?: string;
  holdMs?: number;
  longPollingTimeoutMs?: number;
}

function aesEncrypt(plain: Uint8Array, key: Uint8Array): Buffer {
  const c = createCipheriv("aes-128-ecb", key, null);
  return Buffer.concat([c.update(plain), c.final()]);
}

/** Bare integers for uint64 IDs, like the live server (so a plain JSON.parse would corrupt them). */
function emit(body: unknown): string {
  return JSON.stringify(body).replace(/"(message_id|msg_id|svr_id)":"(\d+)"/g, '"$1":$2');
}

export class FakeIlink {
  readonly token: string;
  readonly botId: string;
  readonly ownerId: string;
  holdMs: number;
  longPollingTimeoutMs: number;
  readonly sent: SentMessage[] = [];
  readonly polls: Array<{ cursor: string; authorized: boolean }> = [];
  /**
   * Queued failures for the next getupdates calls; `endless` answers 200 and streams a JSON body that never ends
   * (64 MiB of one unfinished message, then the connection is held open without another byte); `stall` answers 200
   * with the start of a body and then sends nothing more, holding the connection open.
   */
  readonly pollFailures: Array<"503" | "invalid" | "msgs_object" | "-14" | "endless" | "stall"> = [];
  /** Bytes of endless getupdates bodies written so far (the client stopped reading when this stops growing). */
  endlessBytes = 0;
  /** Queued results for the next sendmessage calls: a `ret` refusal or an HTTP status; null lets that call through. */
  readonly sendFailures: Array<{ ret: number; errmsg: string } | { status: number } | null> = [];
  tokenExpired = false;
  /** When set, every cursor handed out is padded to exactly this many bytes (still read back correctly). */
  cursorBytes: number | null = null;
  /** When set, sendmessage calls after this many recorded sends are held open unanswered (a crash window). */
  stallSendsAfter: number | null = null;
  /** sendmessage calls currently held by `stallSendsAfter`. */
  stalledSends = 0;
  /** When set, CDN uploads are accepted and then never answered (held open; counted in `stalledUploads`). */
  stallUploads = false;
  stalledUploads = 0;
  /** Runs as each getupdates arrives, before it is answered (tests move an injected clock: "the poll took this long"). */
  onPoll: (() => void) | null = null;
  qrScript: QrStep[] = [];
  qrCodesIssued = 0;
  /** Paths answered with a 307 to another address (a hostile or misconfigured server sending the client elsewhere). */
  readonly redirects = new Map<string, string>();
  /** Requests answered by `redirects`. */
  redirected = 0;
  /** When set, CDN downloads are held open unanswered (counted in `stalledDownloads`). */
  stallDownloads = false;
  stalledDownloads = 0;
  /** Login requests of this kind are held open unanswered (counted in `heldLogins`). */
  holdLogin: "qrcode" | "status" | null = null;
  heldLogins = 0;
  /** When set, status checks are answered with this HTTP status (a gateway error page); counted in `failedStatusChecks`. */
  statusHttp: number | null = null;
  failedStatusChecks = 0;
  /** Status checks received (all kinds). */
  statusChecks = 0;
  /** The number WeChat shows on the phone for a `need_verifycode` step; three wrong codes block (new QR needed). */
  pairingCode = "4821";
  /** `verify_code` values the status polls carried, in order. */
  readonly codesTried: string[] = [];
  private wrongCodes = 0;
  private readonly log: Array<Record<string, unknown>> = [];
  private waiters: Array<() => void> = [];
  private readonly usedTokens = new Set<string>();
  private readonly seenClientIds = new Map<string, SentMessage>();
  private readonly cdn = new Map<string, Buffer>();
  private readonly uploads = new Map<string, { key: Buffer; rawsize: number; md5: string; filesize: number }>();
  private readonly server = createServer((req, res) => void this.route(req, res));
  private readonly held = new Set<ServerResponse>();
  port = 0;

  constructor(o: FakeIlinkOptions = {}) {
    this.token = o.token ?? "tok-" + randomBytes(8).toString("hex");
    this.botId = o.botId ?? "b0f5860fdecb@im.bot";
    this.ownerId = o.ownerId ?? "o9cqowner@im.wechat";
    this.holdMs = o.holdMs ?? 500;
    this.longPollingTimeoutMs = o.longPollingTimeoutMs ?? 1500;
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get base(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  get cdnBase(): string {
    return `${this.base}/c2c`;
  }

  /** Queues an inbound message (raw WeixinMessage fields; string `message_id`s are emitted as bare integers). */
  push(msg: Record<string, unknown>): void {
    this.log.push(msg);
    for (const w of this.waiters.splice(0)) w();
  }

  /** A user text message with sensible defaults. */
  text(from: string, text: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      message_id: (7448678501208393000n + BigInt(this.log.length + 1) * 7n).toString(),
      from_user_id: from,
      to_user_id: this.botId,
      create_time_ms: Date.now(),
      message_type: 1,
      message_state: 2,
      context_token: "ctx-" + randomBytes(6).toString("hex"),
      item_list: [{ type: 1, text_item: { text } }],
      ...extra,
    };
  }

  /** Stores `plain` on the CDN encrypted with a fresh key; returns a CDNMedia for inbound items. */
  putMedia(plain: Uint8Array, keyForm: "base64raw" | "base64hex" = "base64hex"): { encrypt_query_param: string; aes_key: string; key: Buffer } {
    const key = randomBytes(16);
    const param = "dl_" + randomBytes(8).toString("hex");
    this.cdn.set(param, aesEncrypt(plain, key));
    const aes_key = keyForm === "base64raw" ? key.toString("base64") : Buffer.from(key.toString("hex")).toString("base64");
    return { encrypt_query_param: param, aes_key, key };
  }

  /** Decrypts a file a client uploaded (by its download param). */
  uploaded(param: string, key: Buffer): Buffer | null {
    const c = this.cdn.get(param);
    if (!c) return null;
    const d = createDecipheriv("aes-128-ecb", key, null);
    return Buffer.concat([d.update(c), d.final()]);
  }

  delivered(): SentMessage[] {
    return this.sent.filter((s) => !s.dropped);
  }

  async waitSent(pred: (s: SentMessage[]) => boolean): Promise<SentMessage[]> {
    while (!pred(this.sent)) await new Promise<void>((r) => this.waiters.push(r));
    return this.sent;
  }

  async waitFor(pred: () => boolean): Promise<void> {
    while (!pred()) await new Promise<void>((r) => this.waiters.push(r));
  }

  async waitPolls(n: number): Promise<void> {
    while (this.polls.length < n) await new Promise<void>((r) => this.waiters.push(r));
  }

  private notify(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Resets every held request (stalled sends and uploads, waiting polls): their connections end without an answer. */
  dropHeld(): void {
    for (const r of this.held) r.destroy();
    this.held.clear();
  }

  async close(): Promise<void> {
    for (const r of this.held) r.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const url = new URL(req.url ?? "/", this.base);
    const json = (): Record<string, unknown> => {
      try {
        return JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
      } catch {
        return {};
      }
    };
    const send = (body: unknown, status = 200, headers: Record<string, string> = {}): void => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(typeof body === "string" ? body : emit(body));
    };
    const authed = req.headers["authorization"] === `Bearer ${this.token}` && req.headers["authorizationtype"] === "ilink_bot_token";
    const away = this.redirects.get(url.pathname);
    if (away !== undefined) {
      this.redirected++;
      this.notify();
      res.writeHead(307, { location: away });
      return void res.end();
    }
    switch (url.pathname) {
      case "/ilink/bot/get_bot_qrcode": {
        if (this.holdLogin === "qrcode") return this.holdOpen(res);
        this.qrCodesIssued++;
        const qrcode = `qr${this.qrCodesIssued}`;
        return send({ ret: 0, qrcode, qrcode_img_content: `https://liteapp.weixin.qq.com/q/${qrcode}` });
      }
      case "/ilink/bot/get_qrcode_status": {
        this.statusChecks++;
        this.notify();
        if (this.holdLogin === "status") return this.holdOpen(res);
        if (this.statusHttp !== null) {
          this.failedStatusChecks++;
          this.notify();
          res.writeHead(this.statusHttp, { "content-type": "text/html" });
          return void res.end("<html><body>524: A timeout occurred</body></html>");
        }
        if (this.qrScript[0]?.status === "need_verifycode") {
          // Held until the poll carries the right code; three wrong ones block this QR code.
          const code = url.searchParams.get("verify_code");
          if (code === null) return send({ ret: 0, status: "need_verifycode" });
          this.codesTried.push(code);
          if (code !== this.pairingCode) {
            if (++this.wrongCodes < 3) return send({ ret: 0, status: "need_verifycode" });
            this.wrongCodes = 0;
            this.qrScript.shift();
            return send({ ret: 0, status: "verify_code_blocked" });
          }
          this.wrongCodes = 0;
          this.qrScript.shift();
        }
        const step = this.qrScript.shift() ?? { status: "wait" };
        if (step.status === "scaned_but_redirect") return send({ ret: 0, status: step.status, redirect_host: `127.0.0.1:${this.port}` });
        if (step.status === "confirmed")
          return send({ ret: 0, status: "confirmed", bot_token: this.token, ilink_bot_id: this.botId, baseurl: this.base, ilink_user_id: this.ownerId, ...step.fields });
        return send({ ret: 0, status: step.status });
      }
      case "/ilink/bot/getupdates":
        return this.getUpdates(json(), authed, res, send);
      case "/ilink/bot/sendmessage": {
        if (!authed || this.tokenExpired) return send({ ret: -14, errcode: -14, errmsg: "session timeout" });
        const msg = (json()["msg"] ?? {}) as Record<string, unknown>;
        const f = this.sendFailures.shift();
        if (f && "status" in f) return send({ errmsg: "busy" }, f.status);
        if (f) return send(f);
        if (this.stallSendsAfter !== null && this.sent.length >= this.stallSendsAfter) {
          this.stalledSends++;
          this.held.add(res);
          this.notify();
          return;
        }
        const clientId = textOf(msg["client_id"]);
        const prior = this.seenClientIds.get(clientId);
        if (prior) return send({ message_id: "9000000000000000001" });
        const ctx = typeof msg["context_token"] === "string" ? msg["context_token"] : null;
        const item = ((msg["item_list"] as unknown[]) ?? [])[0] as Record<string, unknown>;
        const dropped = ctx !== null && this.usedTokens.has(ctx);
        if (ctx !== null) this.usedTokens.add(ctx);
        const text = item?.["type"] === 1 ? String((item["text_item"] as Record<string, unknown>)["text"]) : null;
        const s: SentMessage = { to: String(msg["to_user_id"]), clientId, contextToken: ctx, item, dropped, text };
        this.sent.push(s);
        this.seenClientIds.set(clientId, s);
        this.notify();
        return send({ message_id: String(9000000000000000000n + BigInt(this.sent.length)) });
      }
      case "/ilink/bot/getuploadurl": {
        if (!authed) return send({ ret: -14, errcode: -14, errmsg: "session timeout" });
        const b = json();
        const key = Buffer.from(textOf(b["aeskey"]), "hex");
        const rawsize = Number(b["rawsize"]);
        const filesize = Number(b["filesize"]);
        if (key.length !== 16 || filesize !== Math.ceil((rawsize + 1) / 16) * 16) return send({ ret: -1, errmsg: "bad upload request" });
        const filekey = String(b["filekey"]);
        this.uploads.set(filekey, { key, rawsize, md5: String(b["rawfilemd5"]), filesize });
        return send({ ret: 0, upload_full_url: `${this.cdnBase}/upload?encrypted_query_param=up_${filekey}&filekey=${filekey}` });
      }
      case "/c2c/upload": {
        if (this.stallUploads) {
          this.stalledUploads++;
          this.held.add(res);
          this.notify();
          return;
        }
        const filekey = url.searchParams.get("filekey") ?? "";
        const up = this.uploads.get(filekey);
        if (!up || raw.length !== up.filesize) return send({ errmsg: "bad upload" }, 400);
        const d = createDecipheriv("aes-128-ecb", up.key, null);
        const plain = Buffer.concat([d.update(raw), d.final()]);
        if (plain.length !== up.rawsize || createHash("md5").update(plain).digest("hex") !== up.md5) return send({ errmsg: "md5 mismatch" }, 400);
        const param = "dl_" + randomBytes(8).toString("hex");
        this.cdn.set(param, raw);
        return send("", 200, { "x-encrypted-param": param });
      }
      case "/c2c/download": {
        if (this.stallDownloads) {
          this.stalledDownloads++;
          this.held.add(res);
          this.notify();
          return;
        }
        const c = this.cdn.get(url.searchParams.get("encrypted_query_param") ?? "");
        if (!c) return send({ errmsg: "not found" }, 404);
        res.writeHead(200, { "content-type": "application/octet-stream" });
        return void res.end(c);
      }
      case "/ilink/bot/getconfig":
        return send({ ret: 0, typing_ticket: "tt" });
      case "/ilink/bot/sendtyping":
      case "/ilink/bot/msg/notifystart":
      case "/ilink/bot/msg/notifystop":
        return send({ ret: 0 });
      default:
        return send({ ret: -1, errmsg: "unknown route" }, 404);
    }
  }

  private holdOpen(res: ServerResponse): void {
    this.heldLogins++;
    this.held.add(res);
    this.notify();
  }

  /** A 200 JSON body that never ends: 64 MiB of one unfinished message text, written as fast as the client reads. */
  private endless(res: ServerResponse): void {
    this.held.add(res);
    writeEndless(res, "application/json", '{"msgs":[{"message_id":1,"item_list":[{"type":1,"text_item":{"text":"', (n) => (this.endlessBytes += n));
  }

  private getUpdates(b: Record<string, unknown>, authed: boolean, res: ServerResponse, send: (body: unknown, status?: number) => void): void {
    const cursor = typeof b["get_updates_buf"] === "string" ? b["get_updates_buf"] : "";
    this.polls.push({ cursor, authorized: authed });
    this.onPoll?.();
    this.notify();
    if (!authed || this.tokenExpired) return send({ ret: -14, errcode: -14, errmsg: "session timeout" });
    const fail = this.pollFailures.shift();
    if (fail === "503") return send({ errmsg: "unavailable" }, 503);
    if (fail === "invalid") return send("<html>oops</html>");
    if (fail === "msgs_object") return send({ msgs: {}, get_updates_buf: cursor });
    if (fail === "-14") return send({ ret: -14, errcode: -14, errmsg: "session timeout" });
    if (fail === "endless") return this.endless(res);
    if (fail === "stall") {
      this.held.add(res);
      res.writeHead(200, { "content-type": "application/json" });
      return void res.write('{"msgs":[');
    }
    const from = cursor.startsWith("c") ? parseInt(cursor.slice(1), 10) : 0;
    const answer = (): void => {
      this.held.delete(res);
      const msgs = this.log.slice(from);
      const next = `c${this.log.length}`;
      const buf = this.cursorBytes === null ? next : next + "x".repeat(Math.max(0, this.cursorBytes - next.length));
      send({ msgs, get_updates_buf: buf, longpolling_timeout_ms: this.longPollingTimeoutMs });
    };
    if (this.log.length > from) return answer();
    this.held.add(res);
    const timer = setTimeout(answer, this.holdMs).unref(); // a long hold never keeps a finished test alive
    const wake = (): void => {
      if (!this.held.has(res)) return;
      if (this.log.length <= from) return void this.waiters.push(wake);
      clearTimeout(timer);
      answer();
    };
    this.waiters.push(wake);
  }
}
