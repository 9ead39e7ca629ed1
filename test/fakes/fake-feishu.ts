/**
 * A loopback fake of the Feishu/Lark open platform (HTTP + the long connection's WebSocket on one 127.0.0.1 port),
 * speaking the real formats: tenant token, `/callback/ws/endpoint` (with ClientConfig, `data: {}` on errors),
 * protobuf `pbbp2.Frame`s with ping/pong, events split into `sum`/`seq` fragments, acks (`biz_rt` + `{"code":200}`)
 * and re-push of unacked events, REST messages create/reply (idempotent by `uuid`), history list, resources, image
 * and file upload (multipart), bot info. Messages sent while no socket is connected are NOT pushed later — they are
 * only in the history, as on the live platform.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer, type WebSocket } from "ws";
import { decodeFrame, encodeFrame, header, type Frame } from "../../src/channels/feishu/frame.js";
import { textOf } from "../../src/core/json-text.js";
import { writeEndless } from "./endless-body.js";

export interface FeishuSent {
  via: "reply" | "create";
  /** Replied-to message ID, or the receive_id. */
  target: string;
  receiveIdType: string | null;
  msgType: string;
  content: Record<string, unknown>;
  uuid: string;
  inThread: boolean;
}

export interface UserMessage {
  chatId: string;
  chatType: "p2p" | "group";
  sender: string;
  text?: string;
  msgType?: string;
  content?: Record<string, unknown>;
  mentionBot?: boolean;
  threadId?: string;
  createMs?: number;
  messageId?: string;
}

export class FakeFeishu {
  readonly appId = "cli_a1b2c3d4e5f6" + randomBytes(2).toString("hex");
  readonly appSecret = "secret-" + randomBytes(8).toString("hex");
  readonly botOpenId = "ou_bot0000000000";
  readonly sent: FeishuSent[] = [];
  readonly acks: Array<{ messageId: string; code: number }> = [];
  readonly pings: number[] = [];
  /** Codes returned by the next send calls (e.g. 230020 rate limit, 230002 final). */
  readonly sendFailures: number[] = [];
  readonly endpointErrors: number[] = [];
  /**
   * Raw answers for the next `/callback/ws/endpoint` requests (a proxy's HTML error page, a JSON `null`), or
   * `endless`: a 200 JSON body that streams 64 MiB and then never ends.
   */
  readonly endpointAnswers: Array<{ status: number; body: string; type?: string } | "endless"> = [];
  /** Raw answers for the next `/open-apis/bot/v3/info` requests (a gateway's HTML error page). */
  readonly botInfoAnswers: Array<{ status: number; body: string; type?: string }> = [];
  /** Bytes of endless bodies written so far. */
  endlessBytes = 0;
  /** Device-code poll answers before success (e.g. "authorization_pending", "access_denied"). */
  registrationScript: string[] = ["authorization_pending"];
  /** Raw answers for the next `/oauth/v1/app/registration` requests (a gateway's HTML page), or `endless`. */
  readonly registrationAnswers: Array<{ status: number; body: string; type?: string } | "endless"> = [];
  /** `tenant_brand` the scanner's tenant reports. */
  registrationBrand: "feishu" | "lark" = "feishu";
  /** While set, `/callback/ws/endpoint` answers only after it resolves (keeps the client disconnected). */
  endpointGate: Promise<void> | null = null;
  /** Events pushed over a socket (catch-up deliveries are not counted). */
  pushes = 0;
  /** `PingInterval` (seconds) the pong's ClientConfig announces. */
  pongPingInterval = 120;
  /** Re-push an unacked event after this many ms. */
  ackTimeoutMs = 3000;
  connections = 0;
  /** Chats (or threads) the bot was removed from: their history answers 230002 "bot not in chat", a final code. */
  readonly removedFrom = new Set<string>();
  /** Answers for the next tenant-token requests (e.g. a 429 rate limit, a 500 platform error). */
  readonly tokenFailures: Array<{ status: number; code: number }> = [];
  /** Paths answered with a 307 to another address (a hostile or misconfigured server sending the client elsewhere). */
  readonly redirects = new Map<string, string>();
  /** Requests answered by `redirects`. */
  redirected = 0;
  /** A reconnect storm: every socket is closed right after the client's first ping (the link opened, then drops). */
  dropAfterPing = false;
  /** A dead link: the socket stays open but pings get no pong (counted in `unansweredPings`). */
  silent = false;
  unansweredPings = 0;
  /**
   * Requests to these paths (exact, or a prefix ending in `/`) are taken and never answered (counted in `heldRequests`;
   * `close` ends them).
   */
  readonly hold = new Set<string>();
  heldRequests = 0;
  private readonly heldOpen = new Set<ServerResponse>();
  private readonly history = new Map<string, Array<Record<string, unknown>>>();
  private readonly resources = new Map<string, { bytes: Buffer; mime: string }>();
  readonly uploads = new Map<string, { name: string; bytes: Buffer }>();
  private readonly uuids = new Map<string, string>();
  private readonly sockets = new Set<WebSocket>();
  private readonly pending = new Map<string, NodeJS.Timeout>();
  private waiters: Array<() => void> = [];
  private seq = 0;
  private readonly server = createServer((req, res) => void this.route(req, res));
  private readonly wss = new WebSocketServer({ noServer: true });
  port = 0;

  async start(): Promise<this> {
    this.server.on("upgrade", (req, socket, head) => {
      if (!(req.url ?? "").startsWith("/ws")) return socket.destroy();
      this.wss.handleUpgrade(req, socket, head, (ws) => this.onSocket(ws));
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get base(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private notify(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  async waitFor(pred: () => boolean): Promise<void> {
    while (!pred()) await new Promise<void>((r) => this.waiters.push(r));
  }

  get connected(): boolean {
    return this.sockets.size > 0;
  }

  /** A user message: stored in the chat's history and, when a socket is connected, pushed as an event. */
  userMessage(u: UserMessage, opts: { parts?: number } = {}): string {
    const messageId = u.messageId ?? `om_${randomBytes(8).toString("hex")}`;
    const createMs = u.createMs ?? Date.now();
    const msgType = u.msgType ?? "text";
    const mentions = u.mentionBot ? [{ key: "@_user_1", id: { open_id: this.botOpenId, union_id: "on_b", user_id: "" }, name: "Bot", tenant_key: "t" }] : [];
    const content = u.content ?? { text: (u.mentionBot ? "@_user_1 " : "") + (u.text ?? "") };
    const hist = this.history.get(u.chatId) ?? [];
    hist.push({
      message_id: messageId,
      msg_type: msgType,
      create_time: String(createMs),
      chat_id: u.chatId,
      thread_id: u.threadId,
      deleted: false,
      sender: { id: u.sender, id_type: "open_id", sender_type: "user", tenant_key: "t" },
      body: { content: JSON.stringify(content) },
      mentions: mentions.map((m) => ({ key: m.key, id: m.id.open_id, id_type: "open_id", name: m.name })),
    });
    this.history.set(u.chatId, hist);
    const event = {
      schema: "2.0",
      header: { event_id: `ev_${randomBytes(6).toString("hex")}`, event_type: "im.message.receive_v1", create_time: String(createMs), token: "", app_id: this.appId, tenant_key: "t" },
      event: {
        sender: { sender_id: { open_id: u.sender, union_id: "on_x", user_id: "u" }, sender_type: "user", tenant_key: "t" },
        message: { message_id: messageId, thread_id: u.threadId, create_time: String(createMs), chat_id: u.chatId, chat_type: u.chatType, message_type: msgType, content: JSON.stringify(content), mentions },
      },
    };
    if (this.connected) this.pushEvent(event, opts.parts ?? 1);
    return messageId;
  }

  private readonly bundles = new Map<string, Array<Record<string, unknown>>>();

  /**
   * A `merge_forward` message: its content is the platform's fixed placeholder; `GET /im/v1/messages/{id}` returns
   * it followed by the forwarded children (each with `upper_message_id`), as live.
   */
  forwardMessage(u: Omit<UserMessage, "msgType" | "content" | "text">, children: Array<{ sender: string; text?: string; msgType?: string; content?: Record<string, unknown>; createMs?: number }>): string {
    const messageId = u.messageId ?? `om_${randomBytes(8).toString("hex")}`;
    this.bundles.set(
      messageId,
      children.map((c, i) => ({
        message_id: `om_child_${randomBytes(6).toString("hex")}`,
        upper_message_id: messageId,
        msg_type: c.msgType ?? "text",
        create_time: String(c.createMs ?? 1_700_000_000_000 + i),
        chat_id: "oc_elsewhere",
        deleted: false,
        sender: { id: c.sender, id_type: "open_id", sender_type: "user", tenant_key: "t" },
        body: { content: JSON.stringify(c.content ?? { text: c.text ?? "" }) },
      })),
    );
    return this.userMessage({ ...u, messageId, msgType: "merge_forward", content: { content: "Merged and Forwarded Message" } });
  }

  /** Puts bytes behind `/messages/{id}/resources/{key}`. */
  putResource(messageId: string, key: string, bytes: Buffer, mime = "application/octet-stream"): void {
    this.resources.set(`${messageId}/${key}`, { bytes, mime });
  }

  pushEvent(event: unknown, parts = 1): void {
    this.pushes++;
    const payload = Buffer.from(JSON.stringify(event));
    const frameId = `fm_${randomBytes(6).toString("hex")}`;
    const size = Math.ceil(payload.length / parts);
    const frames: Frame[] = [];
    for (let i = 0; i < parts; i++) {
      frames.push(this.fragment(frameId, parts, i, payload.subarray(i * size, (i + 1) * size)));
    }
    const send = (): void => {
      for (const ws of this.sockets) for (const f of frames) ws.send(encodeFrame(f));
      const t = setTimeout(() => {
        if (this.pending.has(frameId) && this.connected) send();
      }, this.ackTimeoutMs);
      t.unref();
      this.pending.set(frameId, t);
    };
    send();
  }

  /** The event frame of fragment `seq` of `sum` under frame `message_id` `frameId` (the next frame sequence number). */
  private fragment(frameId: string, sum: number, seq: number, payload: Uint8Array): Frame {
    return {
      seqId: BigInt(++this.seq),
      logId: BigInt(this.seq),
      service: 7,
      method: 1,
      headers: [
        { key: "type", value: "event" },
        { key: "message_id", value: frameId },
        { key: "sum", value: String(sum) },
        { key: "seq", value: String(seq) },
        { key: "trace_id", value: "tr" },
      ],
      payload,
    };
  }

  /**
   * One raw event fragment (`sum`/`seq` under frame `message_id` `frameId`), sent as is on every socket: no re-push,
   * no checks (a hostile or broken server's re-sent or never-finished fragments).
   */
  sendFragment(frameId: string, sum: number, seq: number, payload: Uint8Array): void {
    const f = this.fragment(frameId, sum, seq, payload);
    for (const ws of this.sockets) ws.send(encodeFrame(f));
  }

  /** One raw WebSocket message of `bytes` on every socket (a frame of any size, readable or not). */
  sendRaw(bytes: Buffer): void {
    for (const ws of this.sockets) ws.send(bytes);
  }

  /** Drops every socket (the client must reconnect, re-discover and catch up). */
  kick(): void {
    for (const ws of this.sockets) ws.terminate();
  }

  private onSocket(ws: WebSocket): void {
    this.sockets.add(ws);
    this.connections++;
    this.notify();
    ws.on("close", () => {
      this.sockets.delete(ws);
      this.notify();
    });
    ws.on("message", (data: Buffer) => {
      const f = decodeFrame(data);
      if (f.method === 0 && header(f, "type") === "ping") {
        if (this.dropAfterPing) return void ws.terminate();
        if (this.silent) {
          this.unansweredPings++;
          this.notify();
          return;
        }
        this.pings.push(Date.now());
        ws.send(encodeFrame({ ...f, headers: [{ key: "type", value: "pong" }], payload: Buffer.from(JSON.stringify({ PingInterval: this.pongPingInterval, ReconnectCount: -1, ReconnectInterval: 1, ReconnectNonce: 0 })) }));
        this.notify();
        return;
      }
      if (f.method === 1 && header(f, "biz_rt") !== undefined) {
        const id = header(f, "message_id") ?? "";
        const code = Number((JSON.parse(Buffer.from(f.payload ?? new Uint8Array()).toString("utf8")) as { code?: number }).code);
        this.acks.push({ messageId: id, code });
        if (code === 200) {
          clearTimeout(this.pending.get(id));
          this.pending.delete(id);
        }
        this.notify();
      }
    });
  }

  async close(): Promise<void> {
    for (const t of this.pending.values()) clearTimeout(t);
    for (const r of this.heldOpen) r.destroy();
    for (const ws of this.sockets) ws.terminate();
    this.wss.close();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private token = "t-" + randomBytes(12).toString("hex");
  tokensIssued = 0;

  /** Invalidates the current tenant token (calls with it get code 99991663 until the client fetches a new one). */
  rotateToken(): void {
    this.token = "t-" + randomBytes(12).toString("hex");
  }

  /** A 200 JSON body that never ends: 64 MiB of one unfinished string, then the connection is held open. */
  private endless(res: ServerResponse): void {
    writeEndless(res, "application/json; charset=utf-8", '{"code":0,"msg":"', (n) => (this.endlessBytes += n));
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    const url = new URL(req.url ?? "/", this.base);
    const send = (body: unknown, status = 200): void => {
      res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify(body));
    };
    const json = (): Record<string, unknown> => {
      try {
        return JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
      } catch {
        return {};
      }
    };
    const p = url.pathname;
    if ([...this.hold].some((h) => p === h || (h.endsWith("/") && p.startsWith(h)))) {
      this.heldRequests++;
      this.heldOpen.add(res);
      return this.notify();
    }
    const away = this.redirects.get(p);
    if (away !== undefined) {
      this.redirected++;
      this.notify();
      res.writeHead(307, { location: away });
      return void res.end();
    }
    if (p === "/open-apis/auth/v3/tenant_access_token/internal") {
      const f = this.tokenFailures.shift();
      if (f) return send({ code: f.code, msg: "try again later" }, f.status);
      const b = json();
      if (b["app_id"] !== this.appId || b["app_secret"] !== this.appSecret) return send({ code: 10014, msg: "app secret invalid" });
      this.tokensIssued++;
      return send({ code: 0, msg: "ok", tenant_access_token: this.token, expire: 7200 });
    }
    if (p === "/oauth/v1/app/registration") {
      const answer = this.registrationAnswers.shift();
      if (answer === "endless") return this.endless(res);
      if (answer !== undefined) {
        res.writeHead(answer.status, { "content-type": answer.type ?? "application/json; charset=utf-8" });
        return void res.end(answer.body);
      }
      const form = new URLSearchParams(raw.toString("utf8"));
      if (form.get("action") === "begin") {
        return send({ device_code: "dc_1", user_code: "ABCD", verification_uri_complete: `https://accounts.feishu.cn/page/app?user_code=ABCD`, interval: 1, expires_in: 600 });
      }
      if (form.get("device_code") !== "dc_1") return send({ error: "invalid_request" });
      const step = this.registrationScript.shift() ?? "ok";
      if (step !== "ok") return send({ error: step });
      return send({ client_id: this.appId, client_secret: this.appSecret, user_info: { open_id: "ou_scanner000001", tenant_brand: this.registrationBrand } });
    }
    if (p === "/callback/ws/endpoint") {
      if (this.endpointGate) await this.endpointGate;
      const raw = this.endpointAnswers.shift();
      if (raw === "endless") return this.endless(res);
      if (raw !== undefined) {
        res.writeHead(raw.status, { "content-type": raw.type ?? "application/json; charset=utf-8" });
        return void res.end(raw.body);
      }
      const b = json();
      const err = this.endpointErrors.shift();
      if (err !== undefined) return send({ code: err, msg: "error", data: {} });
      if (b["AppID"] !== this.appId || b["AppSecret"] !== this.appSecret) return send({ code: 514, msg: "auth failed", data: {} });
      return send({
        code: 0,
        msg: "ok",
        data: { URL: `ws://127.0.0.1:${this.port}/ws?device_id=d${this.connections}&service_id=7&access_key=k`, ClientConfig: { PingInterval: 120, ReconnectCount: -1, ReconnectInterval: 1, ReconnectNonce: 0 } },
      });
    }
    if (req.headers["authorization"] !== `Bearer ${this.token}`) return send({ code: 99991663, msg: "invalid tenant token" });
    const info = p === "/open-apis/bot/v3/info" ? this.botInfoAnswers.shift() : undefined;
    if (info !== undefined) {
      res.writeHead(info.status, { "content-type": info.type ?? "application/json; charset=utf-8" });
      return void res.end(info.body);
    }
    if (p === "/open-apis/bot/v3/info") return send({ code: 0, bot: { open_id: this.botOpenId, app_name: "Berth", activate_status: 2 } });
    const reply = /^\/open-apis\/im\/v1\/messages\/([^/]+)\/reply$/.exec(p);
    if ((reply && req.method === "POST") || (p === "/open-apis/im/v1/messages" && req.method === "POST")) {
      const b = json();
      const uuid = textOf(b["uuid"]);
      const prior = this.uuids.get(uuid);
      if (uuid && prior) return send({ code: 0, data: { message_id: prior } });
      const fail = this.sendFailures.shift();
      if (fail !== undefined) return send({ code: fail, msg: "refused", data: {} });
      const id = `om_sent_${this.sent.length + 1}`;
      if (uuid) this.uuids.set(uuid, id);
      this.sent.push({
        via: reply ? "reply" : "create",
        target: reply ? decodeURIComponent(reply[1]!) : String(b["receive_id"]),
        receiveIdType: reply ? null : url.searchParams.get("receive_id_type"),
        msgType: String(b["msg_type"]),
        content: JSON.parse(textOf(b["content"], "{}")) as Record<string, unknown>,
        uuid,
        inThread: b["reply_in_thread"] === true,
      });
      this.notify();
      return send({ code: 0, data: { message_id: id } });
    }
    if (p === "/open-apis/im/v1/messages" && req.method === "GET") {
      const container = url.searchParams.get("container_id") ?? "";
      if (this.removedFrom.has(container)) return send({ code: 230002, msg: "bot not in chat", data: {} });
      const size = Math.min(50, Number(url.searchParams.get("page_size") ?? "20"));
      const from = Number(url.searchParams.get("page_token") || "0");
      let all: Array<Record<string, unknown>>;
      if (url.searchParams.get("container_id_type") === "thread") {
        if (url.searchParams.has("start_time")) return send({ code: 230001, msg: "time range not supported for threads", data: {} });
        all = [...this.history.values()].flat().filter((m) => m["thread_id"] === container);
        if (url.searchParams.get("sort_type") === "ByCreateTimeDesc") all.reverse();
      } else {
        // the chat's own timeline: thread replies live in their thread
        const start = Number(url.searchParams.get("start_time") ?? "0") * 1000;
        all = (this.history.get(container) ?? []).filter((m) => m["thread_id"] === undefined && Number(m["create_time"]) >= start);
      }
      const items = all.slice(from, from + size);
      const more = from + size < all.length;
      return send({ code: 0, data: { items, has_more: more, page_token: more ? String(from + size) : "" } });
    }
    const single = /^\/open-apis\/im\/v1\/messages\/([^/]+)$/.exec(p);
    if (single && req.method === "GET") {
      const id = decodeURIComponent(single[1]!);
      const msg = [...this.history.values()].flat().find((m) => m["message_id"] === id);
      if (!msg) return send({ code: 230011, msg: "message not found", data: {} });
      return send({ code: 0, data: { items: [msg, ...(this.bundles.get(id) ?? [])] } });
    }
    const resource = /^\/open-apis\/im\/v1\/messages\/([^/]+)\/resources\/([^/]+)$/.exec(p);
    if (resource) {
      const r = this.resources.get(`${decodeURIComponent(resource[1]!)}/${decodeURIComponent(resource[2]!)}`);
      if (!r) return send({ code: 234003, msg: "file not found" }); // JSON error with status 200, as live
      res.writeHead(200, { "content-type": r.mime, "content-length": String(r.bytes.length) });
      return void res.end(r.bytes);
    }
    if (p === "/open-apis/im/v1/images" || p === "/open-apis/im/v1/files") {
      const form = await new Request(url, { method: "POST", headers: { "content-type": String(req.headers["content-type"]) }, body: raw }).formData();
      const file = form.get(p.endsWith("images") ? "image" : "file");
      if (!(file instanceof Blob)) return send({ code: 234001, msg: "no file" });
      const key = (p.endsWith("images") ? "img_" : "file_") + randomBytes(6).toString("hex");
      this.uploads.set(key, { name: textOf(form.get("file_name"), (file as File).name), bytes: Buffer.from(await file.arrayBuffer()) });
      return send({ code: 0, data: p.endsWith("images") ? { image_key: key } : { file_key: key } });
    }
    return send({ code: 404, msg: "not found" }, 404);
  }
}
