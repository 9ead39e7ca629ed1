/**
 * What a bridge needs from one chat platform: normalized inbound messages, and sends/downloads that report
 * `refused` (final: hold the reply) apart from transport failures (thrown after the port's own retries).
 */
import type { OutboundFile } from "./driver.js";
import type { ReplyTarget } from "./state.js";

export type MediaKind = "image" | "file" | "audio" | "video";

export interface InboundMedia {
  kind: MediaKind;
  name: string;
  /** Size the platform announced, checked before download; null when unknown. */
  size: number | null;
  /** Platform handle for `download` (CDN media or resource key). */
  ref: unknown;
}

export interface InboundMessage {
  /** Platform message ID, exact (WeChat uint64 IDs stay strings). */
  id: string;
  sender: string;
  kind: "direct" | "group" | "thread";
  /** Group (WeChat) or chat (Feishu) ID; null for a WeChat direct chat. */
  chat: string | null;
  thread: string | null;
  mentioned: boolean;
  text: string;
  media: InboundMedia[];
  /** Platform send time in ms (`create_time_ms` / `create_time`). */
  timeMs: number;
  /** Reply handle: WeChat context token, Feishu message ID. */
  handle: string | null;
  /** Feishu: `p2p` or `group` as the platform named the chat (kept for catch-up). */
  chatType?: string;
  /** Voice with the platform's transcript; a voice without one gets a fixed reply. */
  voiceTranscript?: string | null;
  /** Feishu `merge_forward`: the bundle's message ID, whose forwarded messages `PlatformPort.forwarded` reads. */
  forwardOf?: string;
}

export type SendResult = "sent" | "refused";

/**
 * A failure a platform client raises: its message names what failed (the call, an HTTP status or platform code, a
 * deadline) and never a token, secret, URL query or message text, so it may be logged as is.
 */
export class PlatformError extends Error {}

export interface PlatformPort {
  readonly platform: "wechat" | "feishu";
  /** Largest text part the platform takes, in UTF-8 bytes. */
  readonly partBytes: number;
  /**
   * Sends one text part. `id` is its idempotency key (stable across retries and restarts: a resend with the same id
   * never shows twice); `first` marks a reply's first part (WeChat spends the context token only on it).
   * Aborting `signal` (the bridge stops) ends a send at once with a thrown error; the caller counts it as unsent.
   */
  sendPart(target: ReplyTarget, text: string, id: string, first: boolean, signal?: AbortSignal): Promise<SendResult>;
  /** Uploads and sends one file; every request it makes has a deadline. `signal` as for `sendPart`. */
  sendFile(target: ReplyTarget, file: OutboundFile, id: string, signal?: AbortSignal): Promise<SendResult>;
  /**
   * The forwarded messages of a `forwardOf` bundle as prompt text (bounded). Throws on a transport failure or
   * refusal; the bridge then tells the model the bundle could not be read.
   */
  forwarded?(msg: InboundMessage): Promise<string>;
  /** Downloads into `dest` (mode 0600), never more than `maxBytes`; returns the byte count and MIME type. */
  download(msg: InboundMessage, media: InboundMedia, dest: string, maxBytes: number): Promise<{ size: number; mime: string }>;
}
