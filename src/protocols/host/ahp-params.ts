/**
 * What the host accepts from AHP clients: the JSON-RPC request envelope and the params of the requests it serves,
 * written from the public specification like ahp-schema.ts (which models what the host emits).
 */
import { z } from "zod";
import { ROOT } from "./ahp-constants.js";
import { Message, SideChatSelection } from "./ahp-message.js";

const uri = z.string().min(1);

export const JsonRpcRequestIn = z.object({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.number(), z.string()]).optional(),
  method: z.string().min(1),
  params: z.unknown().optional(),
});
export const InitializeParams = z.object({
  channel: z.literal(ROOT).optional(),
  protocolVersions: z.array(z.string()).min(1).max(64),
  clientId: z.string().min(1).max(512),
  clientInfo: z.object({ name: z.string() }).passthrough().optional(),
  initialSubscriptions: z.array(uri).max(10_000).optional(),
  locale: z.string().optional(),
});
/** The most channels one `reconnect` may name. */
export const MAX_RECONNECT_SUBSCRIPTIONS = 10_000;
export const ReconnectParams = z.object({
  channel: z.literal(ROOT).optional(),
  clientId: z.string().min(1).max(512),
  lastSeenServerSeq: z.number().int().min(0),
  subscriptions: z.array(uri).max(MAX_RECONNECT_SUBSCRIPTIONS),
});

/**
 * Why `params` is not a `reconnect` this host serves (AHP 0.9/1.x: one connection-wide `lastSeenServerSeq`, channel
 * URIs in `subscriptions`): the first field at fault and the fix. Called only when ReconnectParams refused them.
 */
export function reconnectParamsError(params: Record<string, unknown>): string {
  const subs = params.subscriptions;
  if (params.channel !== undefined && params.channel !== ROOT) return `reconnect: channel must be ${ROOT}`;
  if (typeof params.clientId !== "string" || params.clientId.length < 1 || params.clientId.length > 512)
    return "reconnect: clientId must be the client's ID, a string of 1 to 512 characters";
  if (!Array.isArray(subs)) return "reconnect: subscriptions must be a list of the channel URIs the client was subscribed to";
  if (subs.length > MAX_RECONNECT_SUBSCRIPTIONS)
    return `reconnect: subscriptions holds at most ${MAX_RECONNECT_SUBSCRIPTIONS} channel URIs (${subs.length} were sent); subscribe to the rest after reconnecting`;
  const bad = subs.findIndex((u) => typeof u !== "string" || u.length === 0);
  if (bad !== -1)
    return `reconnect: subscriptions[${bad}] must be a channel URI (a non-empty string): this host speaks the reconnect of AHP 0.9 and 1.x, one lastSeenServerSeq for all channels, not per-channel cursors`;
  return "reconnect: lastSeenServerSeq must be an integer of 0 or more: the last serverSeq the client received (0 for none)";
}
export const DispatchActionParams = z.object({ channel: uri, clientSeq: z.number().int(), action: z.object({ type: z.string() }).passthrough() });
export const CreateSessionParams = z.object({
  channel: uri,
  provider: z.string().optional(),
  workingDirectories: z.array(uri).optional(),
  config: z.record(z.string(), z.unknown()).optional(),
}).passthrough();

export const ChatSource = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("fork"), chat: uri, turnId: z.string().min(1).max(512) }),
  z.object({ kind: z.literal("sideChat"), chat: uri, turnId: z.string().min(1).max(512), selection: SideChatSelection.optional() }),
]);
export const CreateChatParams = z.object({
  channel: uri,
  chat: uri,
  title: z.string().max(4096).optional(),
  initialMessage: Message.optional(),
  source: ChatSource.optional(),
  workingDirectories: z.array(uri).max(1024).optional(),
}).passthrough();
