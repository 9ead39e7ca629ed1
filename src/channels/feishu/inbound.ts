/**
 * Feishu events and history items → `InboundMessage`. Only messages from users (`sender_type` "user") are kept;
 * other apps' and the bot's own messages return null. Mentions of the bot are removed from the text and set
 * `mentioned`; other mention keys become their display names.
 */
import type { InboundMedia, InboundMessage } from "../common/port.js";
import { collapseBreaks } from "../../core/text-scan.js";

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | null => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : null);
const str = (v: unknown): string => (typeof v === "string" ? v : "");

export interface FeishuMediaRef {
  messageId: string;
  key: string;
  type: "image" | "file";
}

interface Raw {
  messageId: string;
  chatId: string;
  chatType: string;
  threadId: string;
  msgType: string;
  content: string;
  createMs: number;
  senderId: string;
  mentions: Array<{ key: string; openId: string; name: string }>;
}

function postText(content: Obj, media: InboundMedia[], messageId: string): string {
  const body = Array.isArray(content["content"]) ? content : (obj(Object.values(content)[0]) ?? content);
  const lines: string[] = [];
  const title = str(body["title"]);
  if (title) lines.push(title);
  for (const para of Array.isArray(body["content"]) ? body["content"] : []) {
    if (!Array.isArray(para)) continue;
    let line = "";
    for (const el of para) {
      const e = obj(el);
      if (!e) continue;
      const tag = str(e["tag"]);
      if (tag === "text" || tag === "a" || tag === "md") line += str(e["text"]);
      else if (tag === "code_block") line += "\n" + str(e["text"]) + "\n";
      else if (tag === "at") line += `@${str(e["user_name"])}`;
      else if (tag === "img" && str(e["image_key"])) media.push({ kind: "image", name: "image.png", size: null, ref: { messageId, key: str(e["image_key"]), type: "image" } });
      else if (tag === "media" && str(e["file_key"])) media.push({ kind: "video", name: "video.mp4", size: null, ref: { messageId, key: str(e["file_key"]), type: "file" } });
    }
    lines.push(line);
  }
  return lines.join("\n");
}

function build(r: Raw, botOpenId: string | null): InboundMessage | null {
  let content: Obj = {};
  try {
    content = obj(JSON.parse(r.content)) ?? {};
  } catch {
    content = {};
  }
  const media: InboundMedia[] = [];
  let text = "";
  let voice: string | null | undefined;
  switch (r.msgType) {
    case "text":
      text = str(content["text"]);
      break;
    case "post":
      text = postText(content, media, r.messageId);
      break;
    case "image":
      media.push({ kind: "image", name: "image.png", size: null, ref: { messageId: r.messageId, key: str(content["image_key"]), type: "image" } });
      break;
    case "file":
      media.push({ kind: "file", name: str(content["file_name"]) || "file", size: null, ref: { messageId: r.messageId, key: str(content["file_key"]), type: "file" } });
      break;
    case "media":
      media.push({ kind: "video", name: str(content["file_name"]) || "video.mp4", size: null, ref: { messageId: r.messageId, key: str(content["file_key"]), type: "file" } });
      break;
    case "audio":
      voice = null; // Feishu gives no transcript
      break;
    case "merge_forward":
      break; // its content is a fixed placeholder: the bridge reads the forwarded messages (`forwardOf`)
    default:
      text = `[${r.msgType} message]`;
  }
  let mentioned = false;
  // Longest key first: `@_user_1` is a prefix of `@_user_10`. An empty key would match between every character.
  const mentions = r.mentions.filter((m) => m.key !== "").sort((a, b) => b.key.length - a.key.length);
  for (const m of mentions) {
    if (botOpenId !== null && m.openId === botOpenId) {
      mentioned = true;
      text = text.split(m.key).join("");
    } else text = text.split(m.key).join(`@${m.name}`);
  }
  text = text.trim();
  const group = r.chatType !== "p2p";
  const msg: InboundMessage = {
    id: r.messageId,
    sender: r.senderId,
    kind: r.threadId !== "" ? "thread" : group ? "group" : "direct",
    chat: r.chatId,
    thread: r.threadId !== "" ? r.threadId : null,
    mentioned: group ? mentioned : true,
    text,
    media,
    timeMs: r.createMs,
    handle: r.messageId,
    chatType: group ? "group" : "p2p",
  };
  if (voice !== undefined) msg.voiceTranscript = voice;
  if (r.msgType === "merge_forward") msg.forwardOf = r.messageId;
  return msg;
}

function mentionsOf(v: unknown): Raw["mentions"] {
  return (Array.isArray(v) ? v : []).flatMap((x) => {
    const m = obj(x);
    if (!m) return [];
    const id = m["id"];
    const openId = typeof id === "string" ? id : str(obj(id)?.["open_id"]);
    return [{ key: str(m["key"]), openId, name: str(m["name"]) }];
  });
}

/** An `im.message.receive_v1` event (schema 2.0); null for anything else or a non-user sender. */
export function fromEvent(ev: unknown, botOpenId: string | null): InboundMessage | null {
  const e = obj(ev);
  if (str(obj(e?.["header"])?.["event_type"]) !== "im.message.receive_v1") return null;
  const event = obj(e?.["event"]);
  const sender = obj(event?.["sender"]);
  const message = obj(event?.["message"]);
  if (!sender || !message || str(sender["sender_type"]) !== "user") return null;
  const senderId = str(obj(sender["sender_id"])?.["open_id"]);
  const messageId = str(message["message_id"]);
  if (senderId === "" || messageId === "") return null;
  return build(
    {
      messageId,
      chatId: str(message["chat_id"]),
      chatType: str(message["chat_type"]),
      threadId: str(message["thread_id"]),
      msgType: str(message["message_type"]),
      content: str(message["content"]),
      createMs: Number(str(message["create_time"])) || 0,
      senderId,
      mentions: mentionsOf(message["mentions"]),
    },
    botOpenId,
  );
}

/** A history item from `GET /im/v1/messages`; `chatType` comes from the checkpoint. */
export function fromHistory(item: unknown, chatType: string, botOpenId: string | null): InboundMessage | null {
  const m = obj(item);
  const sender = obj(m?.["sender"]);
  if (!m || !sender || m["deleted"] === true || str(sender["sender_type"]) !== "user") return null;
  const messageId = str(m["message_id"]);
  const senderId = str(sender["id"]);
  if (messageId === "" || senderId === "") return null;
  return build(
    {
      messageId,
      chatId: str(m["chat_id"]),
      chatType,
      threadId: str(m["thread_id"]),
      msgType: str(m["msg_type"]),
      content: str(obj(m["body"])?.["content"]),
      createMs: Number(str(m["create_time"])) || 0,
      senderId,
      mentions: mentionsOf(m["mentions"]),
    },
    botOpenId,
  );
}

/** Forwarded messages rendered into a prompt: at most this many, each at most `FORWARD_ITEM_CHARS`. */
export const FORWARD_MAX_ITEMS = 50;
export const FORWARD_ITEM_CHARS = 2000;

/**
 * The children of merge_forward bundle `rootId` from `GET /im/v1/messages/{id}` items (each child names its bundle
 * in `upper_message_id`; the bundle itself is among the items), oldest first, as
 * `Forwarded messages:` followed by one `[<sender>] <text>` line each. Media become `[image]`, `[file NAME]`…,
 * a nested bundle `[forwarded messages]`. Past `FORWARD_MAX_ITEMS` a `[… N more]` line ends it.
 */
export function forwardText(items: unknown[], rootId: string): string {
  const children = items
    .map(obj)
    .filter((m): m is Obj => m !== null && str(m["upper_message_id"]) === rootId && str(m["message_id"]) !== rootId && m["deleted"] !== true)
    .sort((a, b) => Number(str(a["create_time"])) - Number(str(b["create_time"])));
  const lines = ["Forwarded messages:"];
  for (const m of children.slice(0, FORWARD_MAX_ITEMS)) {
    const sender = obj(m["sender"]);
    const who = str(sender?.["sender_type"]) === "app" ? "app" : str(sender?.["id"]) || "unknown";
    let content: Obj = {};
    try {
      content = obj(JSON.parse(str(obj(m["body"])?.["content"]))) ?? {};
    } catch {
      content = {};
    }
    const type = str(m["msg_type"]);
    let text: string;
    if (type === "text") text = str(content["text"]);
    else if (type === "post") text = postText(content, [], str(m["message_id"]));
    else if (type === "image") text = "[image]";
    else if (type === "file") text = `[file ${str(content["file_name"]) || "file"}]`;
    else if (type === "merge_forward") text = "[forwarded messages]";
    else text = `[${type || "unknown"} message]`;
    for (const mention of mentionsOf(m["mentions"]).filter((x) => x.key !== "").sort((a, b) => b.key.length - a.key.length)) {
      text = text.split(mention.key).join(`@${mention.name}`);
    }
    text = collapseBreaks(text.trim());
    if (text.length > FORWARD_ITEM_CHARS) text = text.slice(0, FORWARD_ITEM_CHARS) + "…";
    lines.push(`[${who}] ${text}`);
  }
  if (children.length > FORWARD_MAX_ITEMS) lines.push(`[… ${children.length - FORWARD_MAX_ITEMS} more]`);
  if (children.length === 0) lines.push("(none readable)");
  return lines.join("\n");
}
