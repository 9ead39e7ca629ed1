/**
 * The host's in-memory model: sessions, chats and turns as reduced AHP state, the route
 * interfaces the backend side implements, and the small helpers every host module shares.
 * Plain data and pure functions only; behaviour lives in state.ts and its helpers.
 */
import { createHash, timingSafeEqual } from "node:crypto";

export const STATUS = { Idle: 1, Error: 2, InProgress: 8, InputNeeded: 24 } as const;
export const REPLAY_LIMIT = 10_000;
/** The replay ring also holds at most this much envelope text (a few huge envelopes cannot pin memory). */
export const REPLAY_BYTES_LIMIT = 32 * 1024 * 1024;
/** How many consumed or removed pending message IDs a chat remembers (newest kept), to refuse a resend. */
export const RETIRED_PENDING_LIMIT = 256;
export const COMMAND_DEADLINE_MS = 60_000;

export type { Json } from "../../core/json-bounds.js";
import type { Json } from "../../core/json-bounds.js";
export interface Origin {
  clientId: string;
  clientSeq: number;
}

export interface TurnModel {
  id: string;
  startedAt: string;
  startedMono: number;
  message: Json;
  responseParts: Json[];
  usage?: Json;
  /** Streamed text held so far (bounded by MAX_TURN_TEXT in backend-events.ts). */
  textChars?: number;
  /** The bound was crossed (true), and the notice was published ("announced"). */
  truncated?: boolean | "announced";
  /** Restored after a host restart: output-discontinuous (turn-checkpoint.ts, reconcile.ts). */
  restored?: boolean;
  /**
   * The index in `responseParts` of the latest refused-delta note (backend-events.ts): while it is the last part,
   * streamed text starts a part of its own rather than extending the note. Not persisted: a restored turn derives it
   * from the note's part-ID suffix (REFUSED_NOTE_SUFFIX).
   */
  noteAt?: number;
}

/** The suffix of a refused-delta note's part ID (clients see it; the host's own test is `TurnModel.noteAt`). */
export const REFUSED_NOTE_SUFFIX = "-refused";

/** A pending (steering or queued) message as AHP `PendingMessage`. */
export interface PendingMessage {
  id: string;
  message: Json;
}

export interface ChatModel {
  uri: string;
  sessionUri: string;
  title: string;
  modifiedAt: string;
  turns: Json[];
  /** How many leading `turns` are durable as their own rows; later ones are appended on persist. */
  durableTurns: number;
  /** The durable turn rows no longer match `turns` as a prefix (history loaded in front): rewrite them. */
  rewriteTurns: boolean;
  nextCursor?: string;
  /** Undefined between turns. */
  activeTurn?: TurnModel | undefined;
  interactivity?: string;
  /** AHP `ChatOrigin` for chats created through `createChat` (absent for the primary chat). */
  origin?: Json;
  /** Per-chat working-directory subset (AHP `ChatState.workingDirectories`). */
  workingDirectories?: string[];
  /** Undefined when no steering message is pending. */
  steeringMessage?: PendingMessage | undefined;
  queuedMessages: PendingMessage[];
  /**
   * Pending message IDs this chat consumed (a turn started from them, or the runtime injected them) or removed,
   * oldest first, at most RETIRED_PENDING_LIMIT (pending-messages.ts). Persisted with the chat.
   */
  retiredPending?: Set<string>;
  lastError: boolean;
  /**
   * The host ended the turn before the runtime did (client cancel, or an indeterminate prompt):
   * until the runtime's `settled`, its trailing turn events are accepted and ignored.
   */
  draining: boolean;
  /** The summary fields session subscribers last heard (by snapshot or `session/chatUpdated`). */
  announced?: { status: unknown; modifiedAt: unknown; title: unknown };
  /** AHP `ChatState.activity` (v6 `chat/activityChanged`); undefined when cleared. */
  activity?: string | undefined;
  /** AHP chat status flags IsRead/IsArchived (status-flags.ts); undefined when neither is set. Persisted. */
  flags?: number;
  /** AHP `ChatState.draft` (client `chat/draftChanged`, chat-drafts.ts); persisted with the chat. */
  draft?: Json;
  /** AHP `ChatState.backgroundWork` (backend `chat/backgroundWork*`, chat-09.ts); undefined until first set. Persisted. */
  backgroundWork?: Json[];
  /** AHP `ChatState.changesets` (backend `chat/changesetsChanged`, chat-09.ts); undefined when cleared. Persisted. */
  changesets?: Json[];
  inputs: Map<string, Json>; // requestId -> ChatInputRequest
  inputTurns: Map<string, string>; // requestId -> bound turn
  partSeq: number;
}

/** Capabilities a session registration advertised in `hello.chatCapabilities` (v3+). */
/** As the backend declared them (the schema's optional members: absent and undefined mean false). */
export interface ChatCaps {
  create?: boolean | undefined;
  dispose?: boolean | undefined;
  fork?: boolean | undefined;
  sideChat?: boolean | undefined;
  pagedHistory?: boolean | undefined;
  /** v10: the managed invocation extension (managed-invocations.ts). */
  managedInvocations?: boolean | undefined;
}

/** What the backend side provides for a session's live route. */
export interface SessionRoute {
  logicalId: string;
  version: number;
  instanceId: string;
  inputCapable: boolean;
  chatCaps: ChatCaps;
  /** v4: `toolCapabilities.clientTools` was advertised (client-tools.ts). */
  clientTools?: boolean;
  multiplexed: boolean;
  /** v6: `hello.multipleWorkingDirectories` was advertised (working-dirs.ts). */
  workingDirs?: { immutablePrimary: boolean; primaryReplacement?: boolean };
  /** v6: `hello.inputCapabilities.drafts` was advertised: in-progress answers go to the backend (chat-drafts.ts). */
  inputDrafts?: boolean;
  /** Deliver a command frame; false means it was not sent (queue refusal). */
  deliver(frame: Json): boolean;
  /** Close the route because the session was disposed. */
  dispose(): void;
}

export interface ProviderInfo {
  id: string;
  displayName: string;
  description: string;
  multipleChats?: ChatCaps;
  /** v6 static protected resources (RFC 9728 metadata). */
  protectedResources?: Json[];
  /** v6: AHP `AgentCapabilities.multipleWorkingDirectories` (working-dirs.ts). */
  multipleWorkingDirectories?: { immutablePrimary: boolean; primaryReplacement?: boolean };
}

export interface ProviderRoute {
  connectionId: string;
  instanceId: string;
  version: number;
  providers: ProviderInfo[];
  ready: boolean | null;
  readyAt: number | null; // monotonic ms
  source?: { serviceId: string; instanceId: string };
  deliver(frame: Json): boolean;
}

export interface SessionModel {
  uri: string;
  sourceId: string;
  provider: string;
  providerRoute: boolean;
  title: string;
  createdAt: string;
  modifiedAt: string;
  continuity: string;
  lifecycle: "creating" | "ready" | "failed";
  creationError?: Json;
  primaryChat: string;
  chats: Map<string, ChatModel>;
  activeClients: Json[];
  inputNeeded: Map<string, Json>;
  inputAvailable: boolean;
  /** An `input_snapshot` reported the input authority (then `paratenic.inputAvailable` is published). */
  inputAvailableReported?: boolean;
  extra: Json;
  /** Undefined while no backend route serves the session (detached or disposed). */
  route?: SessionRoute | undefined;
  /** AHP `SessionState.activity` and `serverTools` (v6 session resource actions); in memory only. */
  activity?: string | undefined;
  serverTools?: Json[];
  /** The backend instance that last registered this session (runtimeIdle replacement, v10 continuity). */
  lastInstanceId?: string;
  lastStatus: number;
}

/**
 * A command's outcome. `rejected` with `notSent` is the host's own refusal before the backend saw the command (`error`
 * says why and what to do); without it, the backend's refusal (`error` is the backend's text).
 */
export type CommandOutcome = { kind: "accepted" } | { kind: "rejected"; error: string; notSent?: true } | { kind: "indeterminate"; error: string };

export interface Subscriber {
  clientId: string;
  /** Send one pre-serialized JSON-RPC message. */
  sendRaw(text: string): void;
  /**
   * Queue one message already framed as a WebSocket text frame: bytes `[start, end)` of `tape`, which
   * are never rewritten (fanout.ts). The subscriber writes its queued frames before anything else it sends.
   */
  queueFrame?(tape: Buffer, start: number, end: number): void;
  /** Whether this client may see the action type (negotiated-version filter). */
  accepts(actionType: string): boolean;
  /** The channel was removed (its subscription with it): the subscriber no longer holds it. */
  channelRemoved?(channel: string): void;
}

export interface Envelope {
  channel: string;
  action: Json;
  serverSeq: number;
  origin?: Origin;
  rejectionReason?: string;
}

let isoAt = 0;
let isoText = "";
/** The current time as an ISO-8601 string (memoised per millisecond). */
export function nowIso(): string {
  const t = Date.now();
  if (t !== isoAt) {
    isoAt = t;
    isoText = new Date(t).toISOString();
  }
  return isoText;
}
export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}
/** Constant-time comparison of two hex digests; false when either is empty or lengths differ. */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}
export function findPart(t: TurnModel, partId: string): Json | undefined {
  for (let i = t.responseParts.length - 1; i >= 0; i--) if (t.responseParts[i]!.id === partId) return t.responseParts[i];
  return undefined;
}
export function findTool(t: TurnModel, toolCallId: string): Json | undefined {
  for (const p of t.responseParts) if (p.kind === "toolCall" && (p.toolCall as Json).toolCallId === toolCallId) return p.toolCall as Json;
  return undefined;
}
export function durationSince(t: TurnModel): number {
  return Math.max(0, Math.round(performance.now() - t.startedMono));
}

/**
 * A `chat/error` action readable by every AHP version this host negotiates: the older types
 * (0.9, 1.0) read `error: {errorType, message}`, the newer 1.x types read the error response
 * part `part: {kind: "error", error}`; carrying both satisfies either reader.
 */
export function chatErrorAction(turnId: string, duration: number, errorType: string, message: string, resumable = false): Json {
  const error = { errorType, message };
  // A resumable part may reopen the turn (`chat/turnResume`, chat-09.ts).
  return { type: "chat/error", turnId, duration, error, part: { kind: "error", error: { ...error }, ...(resumable ? { resumable: true } : {}) } };
}

/** Remember that pending message `id` left chat `c` (consumed or removed); the oldest is forgotten past the bound. */
export function retirePending(c: ChatModel, id: string): void {
  const set = (c.retiredPending ??= new Set<string>());
  set.delete(id); // re-inserted as the newest
  set.add(id);
  for (const old of set) {
    if (set.size <= RETIRED_PENDING_LIMIT) break;
    set.delete(old);
  }
}
