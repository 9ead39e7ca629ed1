/** Inbound media placement and caps. Owner: 50 MiB per file; others: images up to 5 MiB, nothing else; ≤16 files. */
import { createHash, randomBytes } from "node:crypto";
import { readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { TurnAttachment } from "./driver.js";
import type { InboundMedia, InboundMessage, PlatformPort } from "./port.js";
import { ensurePrivateDir } from "./files.js";

export const OWNER_MEDIA_BYTES = 50 * 1024 * 1024;
export const OTHER_IMAGE_BYTES = 5 * 1024 * 1024;
export const MAX_FILES_IN = 16;
export const MAX_FILES_OUT = 8;

export function safeFileName(name: string): string {
  const base = name.split(/[\\/]/).pop() ?? "";
  const clean = base.replace(/[^\p{L}\p{N}._ -]/gu, "_").replace(/^\.+/, "").slice(0, 100);
  return clean === "" ? "file" : clean;
}

export function mediaCap(isOwner: boolean, m: InboundMedia): number | null {
  if (isOwner) return OWNER_MEDIA_BYTES;
  return m.kind === "image" ? OTHER_IMAGE_BYTES : null;
}

/** Downloads what the caps allow; returns attachments and short notes for what was skipped or failed. */
export async function fetchMedia(
  port: PlatformPort,
  msg: InboundMessage,
  isOwner: boolean,
  mediaRoot: string,
  conversation: string,
): Promise<{ attachments: TurnAttachment[]; notes: string[] }> {
  const attachments: TurnAttachment[] = [];
  const notes: string[] = [];
  const dir = join(mediaRoot, createHash("sha256").update(conversation).digest("hex").slice(0, 16));
  for (const [i, m] of msg.media.entries()) {
    if (i >= MAX_FILES_IN) {
      notes.push(`[${msg.media.length - MAX_FILES_IN} more files not read: at most ${MAX_FILES_IN} per message]`);
      break;
    }
    const cap = mediaCap(isOwner, m);
    if (cap === null) {
      notes.push(`[${m.kind}: not accepted from this sender]`);
      continue;
    }
    if (m.size !== null && m.size > cap) {
      notes.push(`[${m.kind}: too large]`);
      continue;
    }
    await ensurePrivateDir(dir);
    const name = safeFileName(m.name);
    const dest = join(dir, `${randomBytes(4).toString("hex")}-${name}`);
    try {
      const got = await port.download(msg, m, dest, cap);
      attachments.push({ kind: m.kind, path: dest, name, mime: got.mime, size: got.size });
    } catch (err) {
      notes.push(err instanceof MediaTooLarge ? `[${m.kind}: too large]` : `[${m.kind}: download failed]`);
    }
  }
  return { attachments, notes };
}

export class MediaTooLarge extends Error {
  constructor() {
    super("media exceeds its size cap");
  }
}

/** Media kept this long (by modification time) before a component start removes it. */
export const MEDIA_KEEP_DAYS = 365;

/** Deletes received media older than `keepDays` under one account's media root; returns how many files went. */
export async function pruneMedia(mediaRoot: string, nowMs: number, keepDays = MEDIA_KEEP_DAYS): Promise<number> {
  let removed = 0;
  const cutoff = nowMs - keepDays * 24 * 3600 * 1000;
  let dirs: string[];
  try {
    dirs = await readdir(mediaRoot);
  } catch {
    return 0;
  }
  for (const d of dirs) {
    const dir = join(mediaRoot, d);
    let files: string[];
    try {
      files = await readdir(dir);
    } catch {
      continue;
    }
    for (const f of files) {
      const p = join(dir, f);
      const st = await stat(p).catch(() => null);
      if (st?.isFile() && st.mtimeMs < cutoff) {
        await rm(p, { force: true });
        removed++;
      }
    }
  }
  return removed;
}

/** Outbox copies older than this are left over from turns whose replies never went out (a crash, a lost host). */
export const OUTBOX_KEEP_MS = 24 * 3600 * 1000;

/**
 * Deletes `chat_attach` copies in the shared media outbox older than `keepMs` (by modification time); a copy of a
 * reply still being delivered is minutes old. Returns how many files went.
 */
export async function pruneOutbox(outbox: string, nowMs: number, keepMs = OUTBOX_KEEP_MS): Promise<number> {
  let names: string[];
  try {
    names = await readdir(outbox);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const n of names) {
    const p = join(outbox, n);
    const st = await stat(p).catch(() => null);
    if (st?.isFile() && st.mtimeMs < nowMs - keepMs) {
      await rm(p, { force: true });
      removed++;
    }
  }
  return removed;
}
