/**
 * Bounds on the platform-supplied identifiers the delivery state keeps, so a hostile or broken platform cannot grow
 * the state file toward its 64 MiB bound (past it the file is set aside at the next start, losing the cursor).
 *
 * Real sizes (docs/channels.md, "Identifier bounds"): WeChat user IDs `o9cq…@im.wechat` and Feishu `ou_`/`oc_`/`om_`/
 * `omt_` IDs are under 64 characters; the bounds leave a wide margin. A message with an identifier past its bound is
 * not delivered to a session (`oversizedField` names which one); an over-long message ID is remembered by its digest.
 */
import { createHash } from "node:crypto";
import { utf8Length } from "../../core/utf8.js";
import type { InboundMessage } from "./port.js";

/** Message, sender, group/chat and thread IDs, in UTF-8 bytes. */
export const MAX_ID_BYTES = 256;
/** The reply handle (WeChat context token; Feishu: the message ID, bounded as an ID too), in UTF-8 bytes. */
export const MAX_HANDLE_BYTES = 4096;
/** The WeChat `getupdates` cursor saved in the state, in UTF-8 bytes. */
export const MAX_CURSOR_BYTES = 64 * 1024;

/** Which identifier of `m` is past its bound (for the log: a field name and its bound, never the value), or null. */
export function oversizedField(m: InboundMessage): string | null {
  const over = (v: string | null, max: number): boolean => v !== null && (v.length > max || utf8Length(v) > max);
  if (over(m.id, MAX_ID_BYTES)) return `message ID is over ${MAX_ID_BYTES} bytes`;
  if (over(m.sender, MAX_ID_BYTES)) return `sender ID is over ${MAX_ID_BYTES} bytes`;
  if (over(m.chat, MAX_ID_BYTES)) return `${m.kind === "direct" ? "chat" : "group or chat"} ID is over ${MAX_ID_BYTES} bytes`;
  if (over(m.thread, MAX_ID_BYTES)) return `thread ID is over ${MAX_ID_BYTES} bytes`;
  if (over(m.handle, MAX_HANDLE_BYTES)) return `reply token is over ${MAX_HANDLE_BYTES} bytes`;
  return null;
}

/** The form a message ID is kept in: itself within MAX_ID_BYTES, else a fixed-size digest (dedup still works). */
export function storedId(id: string): string {
  if (id.length <= MAX_ID_BYTES && utf8Length(id) <= MAX_ID_BYTES) return id;
  return `sha256:${createHash("sha256").update(id).digest("hex")}`;
}
