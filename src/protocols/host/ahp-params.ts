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
/** The most versions one `initialize` may offer, and the most channels it may subscribe to. */
export const MAX_OFFERED_VERSIONS = 64;
export const MAX_INITIAL_SUBSCRIPTIONS = 10_000;
export const InitializeParams = z.object({
  channel: z.literal(ROOT).optional(),
  protocolVersions: z.array(z.string()).min(1).max(MAX_OFFERED_VERSIONS),
  clientId: z.string().min(1).max(512),
  clientInfo: z.object({ name: z.string() }).passthrough().optional(),
  initialSubscriptions: z.array(uri).max(MAX_INITIAL_SUBSCRIPTIONS).optional(),
  locale: z.string().optional(),
});

/** What a peer sent where a value was expected, for "…, not <kind>" (never the value itself). */
function kind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "a list";
  if (typeof v === "object") return "an object";
  return typeof v === "string" ? "a string" : typeof v === "number" ? "a number" : typeof v === "boolean" ? "a boolean" : typeof v;
}
const CLIENT_ID = "clientId must be the client's ID, a string of 1 to 512 characters";

/**
 * Why `params` is not an `initialize` this host serves (AHP `InitializeParams`): the first field at fault, in the
 * order the type lists them, what it must be and the fix. Called only when InitializeParams refused them.
 */
export function initializeParamsError(params: Record<string, unknown>): string {
  const { channel, protocolVersions: pv, clientId, clientInfo, initialSubscriptions: subs, locale } = params;
  if (channel !== undefined && channel !== ROOT) return `initialize: channel must be "${ROOT}" (initialize is a root command), or absent`;
  const versions = `a list of the AHP versions the client speaks, most preferred first, each "MAJOR.MINOR.PATCH" (e.g. ["1.0.0"])`;
  if (pv === undefined) return `initialize: protocolVersions is missing: it must be ${versions}`;
  if (!Array.isArray(pv)) return `initialize: protocolVersions must be ${versions}, not ${kind(pv)}`;
  if (pv.length === 0) return `initialize: protocolVersions must name at least one version (e.g. ["1.0.0"])`;
  if (pv.length > MAX_OFFERED_VERSIONS) return `initialize: protocolVersions holds at most ${MAX_OFFERED_VERSIONS} versions (${pv.length} were sent); offer the ones the client prefers`;
  const badVersion = pv.findIndex((v) => typeof v !== "string");
  if (badVersion !== -1) return `initialize: protocolVersions[${badVersion}] must be a version string "MAJOR.MINOR.PATCH", not ${kind(pv[badVersion])}`;
  if (clientId === undefined) return `initialize: clientId is missing: it must be the client's ID, a string of 1 to 512 characters`;
  if (typeof clientId !== "string") return `initialize: ${CLIENT_ID}, not ${kind(clientId)}`;
  if (clientId.length < 1 || clientId.length > 512) return `initialize: ${CLIENT_ID} (${clientId.length} were sent)`;
  if (clientInfo !== undefined) {
    if (clientInfo === null || typeof clientInfo !== "object" || Array.isArray(clientInfo))
      return `initialize: clientInfo must be an object {name, version?, title?} naming the client's implementation, or absent; not ${kind(clientInfo)}`;
    const name = (clientInfo as Record<string, unknown>).name;
    if (typeof name !== "string") return `initialize: clientInfo.name must be a string (the client implementation's name), not ${name === undefined ? "missing" : kind(name)}`;
  }
  if (subs !== undefined) {
    if (!Array.isArray(subs)) return `initialize: initialSubscriptions must be a list of channel URIs, or absent; not ${kind(subs)}`;
    if (subs.length > MAX_INITIAL_SUBSCRIPTIONS)
      return `initialize: initialSubscriptions holds at most ${MAX_INITIAL_SUBSCRIPTIONS} channel URIs (${subs.length} were sent); subscribe to the rest after initializing`;
    const bad = subs.findIndex((u) => typeof u !== "string" || u.length === 0);
    if (bad !== -1) return `initialize: initialSubscriptions[${bad}] must be a channel URI (a non-empty string), not ${subs[bad] === "" ? "an empty string" : kind(subs[bad])}`;
  }
  if (locale !== undefined && typeof locale !== "string") return `initialize: locale must be a BCP 47 language tag such as "en-US", or absent; not ${kind(locale)}`;
  return "initialize: params must be an object {channel, protocolVersions, clientId, clientInfo?, initialSubscriptions?, locale?}";
}
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

/**
 * Null when `params` are a `dispatchAction` this host reads, else the first field at fault and what it must be. Asked
 * only of `dispatchAction` sent as a request: as the notification AHP defines, unreadable params cannot be answered.
 */
export function dispatchActionParamsError(params: Record<string, unknown>): string | null {
  if (DispatchActionParams.safeParse(params).success) return null;
  const shape = "dispatchAction: params must be {channel, clientSeq, action: {type, ...}}: ";
  const { channel, clientSeq } = params;
  if (typeof channel !== "string" || channel.length === 0) return `${shape}channel must be a channel URI (a non-empty string)`;
  if (typeof clientSeq !== "number" || !Number.isInteger(clientSeq)) return `${shape}clientSeq must be an integer (the client's sequence number of this action)`;
  return `${shape}action must be an object with a string type`;
}
/**
 * The refusal of params a schema rejected: the method, the first issue's field path and zod's description of it
 * (what was expected and what kind of value came; zod's messages for these schemas never quote the value).
 */
export function paramsIssue(method: string, e: z.ZodError): string {
  const i = e.issues[0];
  if (!i) return `${method}: params do not match the method's parameters`;
  return `${method}: ${i.path.length > 0 ? i.path.join(".") : "params"}: ${i.message}`;
}
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
