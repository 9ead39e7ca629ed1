/**
 * WeChat as a `PlatformPort`: text parts (only the first carries the context token — a second send on one token is
 * silently dropped by iLink), files through the AES-128-ECB CDN, downloads only from the platform's CDN hosts.
 */
import { createHash, randomBytes } from "node:crypto";
import { open, readFile } from "node:fs/promises";
import { deadline, timerDeadline } from "../common/backoff.js";
import type { OutboundFile } from "../common/driver.js";
import { MediaTooLarge } from "../common/media.js";
import type { InboundMedia, InboundMessage, PlatformPort, SendResult } from "../common/port.js";
import type { ReplyTarget } from "../common/state.js";
import { cipherSize, decryptEcb, encryptEcb, parseAesKey } from "./cdn.js";
import { IlinkError, type IlinkClient } from "./ilink.js";

export const WECHAT_PART_BYTES = 16 * 1024;
/**
 * One upload to the CDN, all attempts together, must be done within this (a file is at most 50 MiB). Without it a
 * CDN that takes the connection and never answers held the reply for Node's default of 5 minutes per attempt.
 */
export const CDN_UPLOAD_TIMEOUT_MS = 120_000;

export interface WechatMediaRef {
  media: { encrypt_query_param?: string; aes_key?: string; full_url?: string };
  hexKey?: string;
}

const MIME: Record<string, string> = {
  jpg: "image/jpeg", jpeg: "image/jpeg", png: "image/png", gif: "image/gif", webp: "image/webp", pdf: "application/pdf",
  txt: "text/plain", md: "text/markdown", mp4: "video/mp4", silk: "audio/silk", mp3: "audio/mpeg", json: "application/json",
};

export function mimeOf(name: string, kind: string): string {
  const ext = name.toLowerCase().split(".").pop() ?? "";
  return MIME[ext] ?? (kind === "image" ? "image/jpeg" : "application/octet-stream");
}

/** Download hosts: https on the platform's `qq.com` hosts, or the configured CDN origin itself. */
export function allowedMediaUrl(url: string, cdnBase: string): boolean {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  if (u.origin === new URL(cdnBase).origin) return true;
  return u.protocol === "https:" && (u.port === "" || u.port === "443") && (u.hostname === "qq.com" || u.hostname.endsWith(".qq.com"));
}

/** Redirects a media download may follow, each to an allowed media host. */
const MAX_MEDIA_REDIRECTS = 3;

/** A CDN download, body included, must be done within this. */
export const CDN_DOWNLOAD_TIMEOUT_MS = 120_000;

/** GETs a media URL on `signal` (the download deadline), following a redirect only to another allowed media host. */
async function fetchMedia(url: string, cdnBase: string, signal: AbortSignal): Promise<Response> {
  for (let hop = 0; ; hop++) {
    const res = await fetch(url, { redirect: "manual", signal });
    const location = res.headers.get("location");
    if (res.status < 300 || res.status >= 400 || location === null) return res;
    await res.body?.cancel().catch(() => undefined);
    const next = new URL(location, url).href;
    if (hop >= MAX_MEDIA_REDIRECTS || !allowedMediaUrl(next, cdnBase)) throw new Error("media host not allowed");
    url = next;
  }
}

export class WechatPort implements PlatformPort {
  readonly platform = "wechat" as const;
  readonly partBytes = WECHAT_PART_BYTES;
  constructor(private readonly client: IlinkClient) {}

  sendPart(target: ReplyTarget, text: string, id: string, first: boolean, signal?: AbortSignal): Promise<SendResult> {
    return this.client.sendMessage(target.chat ?? target.to, id, first ? target.handle : null, { type: 1, text_item: { text } }, signal);
  }

  /**
   * POSTs the ciphertext (5xx and connection failures retried, 3 attempts) by the upload deadline; returns the
   * download param, or null when the CDN refused the upload for good.
   */
  private async upload(url: string, cipher: Buffer, signal?: AbortSignal): Promise<string | null> {
    const limit = deadline(this.client.timing, CDN_UPLOAD_TIMEOUT_MS, signal);
    try {
      for (let attempt = 0; attempt < 3 && !limit.signal.aborted; attempt++) {
        let status = 0;
        let param: string | null = null;
        try {
          const res = await fetch(url, { method: "POST", headers: { "Content-Type": "application/octet-stream" }, body: cipher, redirect: "manual", signal: limit.signal });
          status = res.status;
          param = res.headers.get("x-encrypted-param");
          await res.arrayBuffer();
        } catch {
          status = 0;
        }
        if (status === 0 || status >= 500) continue;
        return status === 200 ? param : null;
      }
    } finally {
      limit.done();
    }
    if (signal?.aborted) throw new IlinkError("transport", "cdn upload: stopped");
    if (limit.expired()) throw new IlinkError("transport", `cdn upload: no answer within ${CDN_UPLOAD_TIMEOUT_MS / 1000} s`);
    throw new IlinkError("transport", "cdn upload failed (3 attempts)");
  }

  async sendFile(target: ReplyTarget, file: OutboundFile, id: string, signal?: AbortSignal): Promise<SendResult> {
    const plain = await readFile(file.path);
    const key = randomBytes(16);
    const cipher = encryptEcb(plain, key);
    const isImage = /^image\//.test(mimeOf(file.name, "file"));
    const filekey = createHash("sha256").update(id).digest("hex").slice(0, 32);
    const to = target.chat ?? target.to;
    const up = await this.client.call("/ilink/bot/getuploadurl", {
      filekey,
      media_type: isImage ? 1 : 3,
      to_user_id: to,
      rawsize: plain.length,
      rawfilemd5: createHash("md5").update(plain).digest("hex"),
      filesize: cipherSize(plain.length),
      no_need_thumb: true,
      aeskey: key.toString("hex"),
    }, signal);
    if (up === "refused") return "refused";
    const u = up as { upload_full_url?: unknown; upload_param?: unknown };
    const url =
      typeof u.upload_full_url === "string" && u.upload_full_url !== ""
        ? u.upload_full_url
        : typeof u.upload_param === "string"
          ? `${this.client.cdnBase}/upload?encrypted_query_param=${encodeURIComponent(u.upload_param)}&filekey=${filekey}`
          : null;
    if (url === null || !allowedMediaUrl(url, this.client.cdnBase)) return "refused";
    const param = await this.upload(url, cipher, signal);
    if (param === null) return "refused";
    const media = { encrypt_query_param: param, aes_key: Buffer.from(key.toString("hex")).toString("base64"), encrypt_type: 1 };
    const item = isImage
      ? { type: 2, image_item: { media, mid_size: cipher.length } }
      : { type: 4, file_item: { media, file_name: file.name, len: String(plain.length) } };
    const r = await this.client.sendMessage(to, id, null, item, signal);
    if (r === "sent" && file.caption) await this.client.sendMessage(to, `${id}-c`, null, { type: 1, text_item: { text: file.caption } }, signal);
    return r;
  }

  async download(_msg: InboundMessage, m: InboundMedia, dest: string, maxBytes: number): Promise<{ size: number; mime: string }> {
    const ref = m.ref as WechatMediaRef;
    const url =
      typeof ref.media.full_url === "string" && ref.media.full_url !== ""
        ? ref.media.full_url
        : `${this.client.cdnBase}/download?encrypted_query_param=${encodeURIComponent(ref.media.encrypt_query_param ?? "")}`;
    if (!allowedMediaUrl(url, this.client.cdnBase)) throw new Error("media host not allowed");
    const key = parseAesKey(ref.hexKey, ref.media.aes_key);
    const chunks: Buffer[] = [];
    const deadline = timerDeadline(this.client.deadlines, CDN_DOWNLOAD_TIMEOUT_MS);
    try {
      const res = await fetchMedia(url, this.client.cdnBase, deadline.signal);
      if (res.status !== 200 || !res.body) throw new Error(`cdn download: HTTP ${res.status}`);
      let n = 0;
      const limit = key ? cipherSize(maxBytes) : maxBytes;
      for await (const c of res.body) {
        n += (c as Uint8Array).length;
        if (n > limit) throw new MediaTooLarge();
        chunks.push(Buffer.from(c as Uint8Array));
      }
    } catch (err) {
      if (deadline.expired()) throw new Error(`cdn download: no answer within ${CDN_DOWNLOAD_TIMEOUT_MS / 1000} s`);
      throw err;
    } finally {
      deadline.done();
    }
    const bytes = key ? decryptEcb(Buffer.concat(chunks), key) : Buffer.concat(chunks);
    if (bytes.length > maxBytes) throw new MediaTooLarge();
    const fh = await open(dest, "wx", 0o600);
    try {
      await fh.writeFile(bytes);
    } finally {
      await fh.close();
    }
    return { size: bytes.length, mime: mimeOf(m.name, m.kind) };
  }
}
