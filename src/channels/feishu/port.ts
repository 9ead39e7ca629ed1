/**
 * Feishu/Lark as a `PlatformPort`: replies go to the message (`/reply`, in its thread when it was in one), unprompted
 * messages to the user's open_id; every part and file carries a stable `uuid` (Feishu keeps one success per uuid for
 * an hour, so a retry never duplicates). `<at` in model text is neutralised so the model can never @-mention.
 */
import { readFile } from "node:fs/promises";
import type { OutboundFile } from "../common/driver.js";
import type { InboundMedia, InboundMessage, PlatformPort, SendResult } from "../common/port.js";
import type { ReplyTarget } from "../common/state.js";
import { FeishuError, type FeishuApi } from "./api.js";
import { forwardText, type FeishuMediaRef } from "./inbound.js";

export const FEISHU_PART_BYTES = 16 * 1024;
const IMAGE_MAX = 10 * 1024 * 1024;
const IMAGE_EXT = /\.(png|jpe?g|gif|webp|bmp)$/i;

function neutralise(text: string): string {
  return text.replace(/<at/gi, (m) => `${m[0]}\u200b${m.slice(1)}`);
}

function uuidOf(id: string): string {
  return id.length <= 50 ? id : id.slice(0, 50);
}

export class FeishuPort implements PlatformPort {
  readonly platform = "feishu" as const;
  readonly partBytes = FEISHU_PART_BYTES;
  constructor(private readonly api: FeishuApi) {}

  private async post(target: ReplyTarget, msgType: string, content: unknown, uuid: string, signal?: AbortSignal): Promise<SendResult> {
    try {
      if (target.handle) {
        const body: Record<string, unknown> = { msg_type: msgType, content: JSON.stringify(content), uuid: uuidOf(uuid) };
        if (target.inThread) body["reply_in_thread"] = true;
        try {
          await this.api.call("POST", `/open-apis/im/v1/messages/${encodeURIComponent(target.handle)}/reply`, body, undefined, signal);
        } catch (err) {
          if (!(err instanceof FeishuError && (err.code === 230071 || err.code === 230072))) throw err;
          delete body["reply_in_thread"];
          await this.api.call("POST", `/open-apis/im/v1/messages/${encodeURIComponent(target.handle)}/reply`, body, undefined, signal);
        }
      } else {
        const [idType, id] = target.chat ? ["chat_id", target.chat] : ["open_id", target.to];
        await this.api.call("POST", `/open-apis/im/v1/messages?receive_id_type=${idType}`, {
          receive_id: id,
          msg_type: msgType,
          content: JSON.stringify(content),
          uuid: uuidOf(uuid),
        }, undefined, signal);
      }
      return "sent";
    } catch (err) {
      if (err instanceof FeishuError && err.kind === "refused") return "refused";
      throw err;
    }
  }

  sendPart(target: ReplyTarget, text: string, id: string, _first: boolean, signal?: AbortSignal): Promise<SendResult> {
    return this.post(target, "text", { text: neutralise(text) }, id, signal);
  }

  async sendFile(target: ReplyTarget, file: OutboundFile, id: string, signal?: AbortSignal): Promise<SendResult> {
    const bytes = await readFile(file.path);
    const blob = new Blob([bytes]);
    try {
      if (IMAGE_EXT.test(file.name) && bytes.length <= IMAGE_MAX) {
        const form = new FormData();
        form.set("image_type", "message");
        form.set("image", blob, file.name);
        const data = await this.api.call("POST", "/open-apis/im/v1/images", undefined, form, signal);
        const r = await this.post(target, "image", { image_key: data["image_key"] }, id, signal);
        if (r === "sent" && file.caption) await this.post(target, "text", { text: neutralise(file.caption) }, `${id}-c`, signal);
        return r;
      }
      const form = new FormData();
      form.set("file_type", /\.pdf$/i.test(file.name) ? "pdf" : "stream");
      form.set("file_name", file.name);
      form.set("file", blob, file.name);
      const data = await this.api.call("POST", "/open-apis/im/v1/files", undefined, form, signal);
      const r = await this.post(target, "file", { file_key: data["file_key"] }, id, signal);
      if (r === "sent" && file.caption) await this.post(target, "text", { text: neutralise(file.caption) }, `${id}-c`, signal);
      return r;
    } catch (err) {
      if (err instanceof FeishuError && err.kind === "refused") return "refused";
      throw err;
    }
  }

  async forwarded(msg: InboundMessage): Promise<string> {
    const id = msg.forwardOf ?? msg.id;
    const data = await this.api.call("GET", `/open-apis/im/v1/messages/${encodeURIComponent(id)}`);
    return forwardText(Array.isArray(data["items"]) ? (data["items"] as unknown[]) : [], id);
  }

  download(_msg: InboundMessage, m: InboundMedia, dest: string, maxBytes: number): Promise<{ size: number; mime: string }> {
    const ref = m.ref as FeishuMediaRef;
    return this.api.download(ref.messageId, ref.key, ref.type, dest, maxBytes);
  }
}
