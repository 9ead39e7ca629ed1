/**
 * `WeixinMessage` → `InboundMessage`. Only user messages (`message_type` 1) with a sender, an exact message ID, a
 * context token, and text, voice or media are accepted; everything else (bot echoes, tool-call items) returns null
 * and is marked seen by the caller.
 */
import type { InboundMedia, InboundMessage } from "../common/port.js";
import { exactId } from "./json.js";
import type { WechatMediaRef } from "./port.js";

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | null => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : null);
const str = (v: unknown): string => (typeof v === "string" ? v : "");

function mediaOf(item: Obj): InboundMedia | null {
  const type = item["type"];
  const pick = (k: string): Obj | null => obj(item[k]);
  if (type === 2) {
    const im = pick("image_item");
    const media = obj(im?.["media"]);
    if (!im || !media) return null;
    const hexKey = str(im["aeskey"]);
    const ref: WechatMediaRef = { media: media, ...(hexKey ? { hexKey } : {}) };
    return { kind: "image", name: "image.jpg", size: null, ref };
  }
  if (type === 4) {
    const f = pick("file_item");
    const media = obj(f?.["media"]);
    if (!f || !media) return null;
    const len = Number(str(f["len"]) || f["len"]);
    return { kind: "file", name: str(f["file_name"]) || "file", size: Number.isFinite(len) && len >= 0 ? len : null, ref: { media } };
  }
  if (type === 5) {
    const v = pick("video_item");
    const media = obj(v?.["media"]);
    if (!v || !media) return null;
    return { kind: "video", name: "video.mp4", size: null, ref: { media } };
  }
  return null;
}

export function normalizeWechat(raw: unknown): { id: string | null; msg: InboundMessage | null } {
  const m = obj(raw);
  if (!m) return { id: null, msg: null };
  const id = exactId(m["message_id"]);
  const sender = str(m["from_user_id"]);
  const token = str(m["context_token"]);
  if (id === null) return { id: null, msg: null };
  if (m["message_type"] !== 1 || sender === "" || token === "") return { id, msg: null };
  const items = Array.isArray(m["item_list"]) ? m["item_list"] : [];
  const texts: string[] = [];
  const media: InboundMedia[] = [];
  let voice: string | null | undefined;
  for (const it of items) {
    const item = obj(it);
    if (!item) continue;
    if (item["type"] === 1) {
      const t = str(obj(item["text_item"])?.["text"]);
      if (t !== "") texts.push(t);
    } else if (item["type"] === 3) {
      voice = str(obj(item["voice_item"])?.["text"]) || null;
    } else {
      const md = mediaOf(item);
      if (md) media.push(md);
    }
    const ref = obj(item["ref_msg"]);
    if (ref) {
      const refItem = obj(ref["message_item"]);
      const refText = refItem?.["type"] === 1 ? str(obj(refItem["text_item"])?.["text"]) : refItem ? "[attachment]" : "";
      texts.unshift(`[Quoting: ${str(ref["title"])}${refText ? ` | ${refText}` : ""}]`);
      const refMedia = refItem ? mediaOf(refItem) : null;
      if (refMedia) media.push(refMedia);
    }
  }
  if (texts.length === 0 && media.length === 0 && voice === undefined) return { id, msg: null };
  const t = m["create_time_ms"];
  const timeMs = typeof t === "number" ? t : Number(str(t)) || 0;
  const group = str(m["group_id"]);
  const msg: InboundMessage = {
    id,
    sender,
    kind: group !== "" ? "group" : "direct",
    chat: group !== "" ? group : null,
    thread: null,
    mentioned: group === "",
    text: texts.join("\n"),
    media,
    timeMs,
    handle: token,
  };
  if (voice !== undefined) msg.voiceTranscript = voice;
  return { id, msg };
}
