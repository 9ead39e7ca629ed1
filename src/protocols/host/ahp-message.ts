/**
 * The AHP user-message shapes the host validates client input with (`Message`, its `origin`, a side chat's
 * selection), apart from ahp-schema.ts so that validating them does not build the whole wire schema.
 */
import { z } from "zod";

const uri = z.string().min(1);
const meta = z.record(z.string(), z.unknown());

export const MessageOrigin = z.object({ kind: z.enum(["user", "agent", "tool", "automation", "systemNotification"]) });
export const Message = z.object({
  text: z.string(),
  origin: MessageOrigin,
  attachments: z.array(z.unknown()).optional(),
  model: z.object({ id: z.string(), config: z.record(z.string(), z.string()).optional() }).optional(),
  agent: z.object({ uri }).optional(),
  _meta: meta.optional(),
});
export const SideChatSelection = z.object({ text: z.string().min(1), responsePartId: z.string().optional() });
