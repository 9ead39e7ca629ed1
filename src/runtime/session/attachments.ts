/**
 * Attachments → model input. Contracts: images (PNG, JPEG, GIF, WebP by MIME type or file extension) of at most
 * `MAX_IMAGE_BYTES` that are regular files are read and sent as image parts, at most `MAX_IMAGES` per prompt (the
 * newest); an unreadable one is skipped (the prompt's file list still names it). A FIFO, socket or device is never
 * read and never blocks (opened non-blocking, then checked). Never throws.
 * `attachmentNote` lists every attachment for the model: names, types and sizes, plus paths when tools can read them,
 * and a voice message's `transcript` (always: it is what the sender said). History rebuilds the same note from the
 * user record, so the transcript stays in the model's context on later turns.
 * `reattachImages`: history keeps image paths, not bytes; the newest images of earlier prompts (up to the room left
 * beside the current prompt's) are read again for each request, and one deleted or unreadable since is replaced by
 * a note.
 */
import { extname } from "node:path";
import type { ImagePart, Message } from "../types.js";
import { readRegularFileHead } from "../regular-file.js";
import type { UserAttachment } from "./types.js";

export const MAX_IMAGE_BYTES = 8 * 1024 * 1024;
export const MAX_IMAGES = 8;
export const MAX_ATTACHMENTS = 16;

const BY_EXT: Record<string, string> = { ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp" };
const IMAGE_TYPES = new Set(Object.values(BY_EXT));

export function imageType(a: UserAttachment): string | null {
  if (a.kind !== "image" && a.kind !== "sticker") return null;
  const t = a.mime !== undefined && IMAGE_TYPES.has(a.mime) ? a.mime : BY_EXT[extname(a.path).toLowerCase()];
  return t ?? null;
}

async function readImage(path: string): Promise<Buffer | null> {
  const head = await readRegularFileHead(path, MAX_IMAGE_BYTES + 1);
  if (head === null || head.size > MAX_IMAGE_BYTES || head.bytes.length !== head.size) return null;
  return head.bytes;
}

export async function loadImages(attachments: readonly UserAttachment[]): Promise<ImagePart[]> {
  const images = attachments.filter((a) => imageType(a) !== null).slice(-MAX_IMAGES);
  const out: ImagePart[] = [];
  for (const a of images) {
    const buf = await readImage(a.path);
    if (buf !== null) out.push({ type: "image", mediaType: imageType(a) as string, dataBase64: buf.toString("base64") });
  }
  return out;
}

export function attachmentNote(attachments: readonly UserAttachment[], withPaths: boolean): string {
  if (attachments.length === 0) return "";
  const lines = attachments.map((a) => {
    const parts = [a.kind, a.name ?? (withPaths ? null : "(unnamed)"), a.mime, a.size !== undefined ? `${a.size} bytes` : null, withPaths ? a.path : null];
    const line = `- ${parts.filter((p) => p !== null && p !== undefined).join(", ")}`;
    // A voice message's transcript is what the sender said: the model reads it (paths or not), lines indented.
    return a.transcript === undefined || a.transcript === "" ? line : `${line}\n  transcript: ${a.transcript.replace(/\r?\n/g, "\n  ")}`;
  });
  return `\n\n[Attached files]\n${lines.join("\n")}`;
}

/** Adds the newest `room` earlier images to their user messages (see the module contract). */
export async function reattachImages(messages: Message[], earlier: ReadonlyArray<{ message: number; attachment: UserAttachment }>, room: number): Promise<void> {
  if (room <= 0) return;
  for (const { message, attachment } of earlier.slice(-room)) {
    const m = messages[message];
    if (m === undefined || m.role !== "user") continue;
    const buf = await readImage(attachment.path);
    m.content.push(
      buf !== null
        ? { type: "image", mediaType: imageType(attachment) as string, dataBase64: buf.toString("base64") }
        : { type: "text", text: `[the attached image ${attachment.name ?? "(unnamed)"} is no longer available]` },
    );
  }
}
