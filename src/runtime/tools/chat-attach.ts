/**
 * `chat_attach {path, caption?}`: attaches a workspace file to the chat reply of a channel session. The file is
 * resolved and confined like `read` (regular files only, at most CHAT_ATTACH_MAX_BYTES), then copied into the
 * channels' media outbox (`<home>/state/media/outbox/`, the directory the bridges read and clean). The output is the
 * JSON the bridges read from `tool.completed`: `{"attached":{path,name,size,caption},"note":…}`.
 * Risk `read_only`: it reads only what `read` may read and writes only Berth's own outbox (see docs/tools.md).
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, rm } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Tool } from "../types.js";
import { openRegular, resolveForTool } from "./confine.js";
import { defineLocalTool } from "./define.js";
import { fail, ok } from "./result.js";
import { CHAT_ATTACH_DEF, CHAT_ATTACH_MAX_BYTES, CHAT_ATTACH_MAX_CAPTION_CHARS, CHAT_ATTACH_TOOL_NAME } from "./specs.js";

export { CHAT_ATTACH_MAX_BYTES, CHAT_ATTACH_MAX_CAPTION_CHARS, CHAT_ATTACH_TOOL_NAME };


/** The media outbox under Berth's home (MC_HOME), matching the bridges' `state/media/outbox`. */
export function chatOutboxDir(home: string): string {
  return join(home, "state", "media", "outbox");
}

export function createChatAttachTool(home: string): Tool {
  return defineLocalTool({
    ...CHAT_ATTACH_DEF,
    async execute(args, ctx) {
      const r = await resolveForTool("chat_attach", ctx, args.path, "read");
      if (!r.ok) return r.result;
      const src = await openRegular("chat_attach", args.path, r.path);
      if (!src.ok) return src.result;
      const name = basename(r.path);
      const outbox = chatOutboxDir(home);
      const dest = join(outbox, `${randomBytes(8).toString("hex")}-${name}`);
      let size = 0;
      try {
        if (src.size > CHAT_ATTACH_MAX_BYTES) return tooLarge(args.path, src.size);
        await mkdir(outbox, { recursive: true, mode: 0o700 });
        const out = await open(dest, "wx", 0o600);
        try {
          const buf = Buffer.allocUnsafe(1024 * 1024);
          for (;;) {
            if (ctx.signal.aborted) throw new Error("cancelled");
            const { bytesRead } = await src.handle.read(buf, 0, buf.length, null);
            if (bytesRead === 0) break;
            size += bytesRead;
            // The file may grow after the size check: the cap holds for what is copied.
            if (size > CHAT_ATTACH_MAX_BYTES) break;
            await out.write(buf, 0, bytesRead);
          }
        } finally {
          await out.close();
        }
      } catch (err) {
        await rm(dest, { force: true });
        if (ctx.signal.aborted) return fail("cancelled", "chat_attach: cancelled");
        return fail("failed", `chat_attach: could not copy ${args.path} to the media outbox: ${(err as Error).message}`);
      } finally {
        await src.handle.close();
      }
      if (size > CHAT_ATTACH_MAX_BYTES) {
        await rm(dest, { force: true });
        return tooLarge(args.path, size);
      }
      const caption = args.caption ?? null;
      return ok(JSON.stringify({ attached: { path: dest, name, size, caption }, note: `${name} (${size} bytes) will be sent after your reply.` }));
    },
  });
}

function tooLarge(given: string, size: number) {
  return fail("limit", `chat_attach: ${given} is ${size} bytes; chats accept files of at most ${CHAT_ATTACH_MAX_BYTES} bytes (50 MiB)`);
}
