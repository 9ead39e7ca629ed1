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
export const ReconnectParams = z.object({
  channel: z.literal(ROOT).optional(),
  clientId: z.string().min(1).max(512),
  lastSeenServerSeq: z.number().int().min(0),
  subscriptions: z.array(uri).max(10_000),
});
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
