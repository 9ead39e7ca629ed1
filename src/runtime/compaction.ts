/**
 * Compaction: when a turn's context nears the model's window — at turn start, or between provider steps inside a
 * turn (long tool loops) — the provider summarizes the conversation so far; the summary is recorded durably as a
 * checkpoint and replaces that conversation in the model context. Replay shows it as a `summary` item.
 *
 * Contracts: `compact` never rejects. It emits `compaction` events (one `id` per attempt) triggered → running →
 * completed | failed | cancelled, and returns the new context or why it could not.
 * - The summary request is the conversation to summarize (at turn start the context without the new prompt, which
 *   is kept verbatim; mid-turn the whole context) plus a summary instruction; no tools run. Its images are a text
 *   placeholder (`[image: image/png, 1.2 MB]`), never their bytes: a request refused as too large (HTTP 413) because
 *   of the history's images must not be refused again as the summary request. When it would not fit
 *   `SUMMARY_REQUEST_RATIO` of the window, the largest tool results and texts are cut in the middle (in that copy
 *   only) until it does; when it still cannot fit, compaction fails.
 * - The compacted context is the summary followed by this turn's prompt (mid-turn, plus a note that work on the
 *   request has started). A result that would not fit under the window fails, and nothing is recorded.
 * - Durable record (before `completed` is emitted): at turn start a checkpoint whose cutoff is the record before
 *   this turn's user record; mid-turn a checkpoint covering every record written so far, followed by this turn's
 *   user record and accepted text again (`TurnRecorder.checkpointMidTurn`), so the projection after the cutoff
 *   still shows the whole turn. A write failure fails the compaction.
 */
import { truncateUtf8 } from "../core/utf8.js";
import { wellFormedText } from "../core/text-policy.js";
import { estimateTokens, MAX_SUMMARY_BYTES } from "./context.js";
import type { TurnSink } from "./events.js";
import { pushUser, SUMMARY_PREFIX } from "./history.js";
import type { TurnRecorder } from "./recorder.js";
import type { Message, Provider, ProviderErrorKind, ToolSpec, UserContent } from "./types.js";

export { MAX_SUMMARY_BYTES };
/** The summary request is cut to this fraction of the window (the rest leaves room for the summary itself). */
export const SUMMARY_REQUEST_RATIO = 0.95;
/** A cut keeps at least this many characters of a text; only texts longer than this plus `MIN_CUT` are cut. */
const MIN_KEPT_CHARS = 2048;
const MIN_CUT = 256;

const SUMMARY_SYSTEM =
  "You compact a coding-agent conversation. Write a faithful, self-contained summary of everything above: the user's goals, decisions, files and commands involved, results, and open work. Do not call tools. Reply with the summary only.";
const SUMMARY_REQUEST = "Summarize the conversation so far for continuation, as instructed.";
export const MID_TURN_NOTE =
  "\n\n[The context was compacted while this request was in progress: the summary above records the work done so far. Continue the request from there.]";

export interface CompactOptions {
  /** Activity identity of this attempt (unique within the turn). */
  id: string;
  provider: Provider;
  model: string;
  /** The full context to summarize. */
  messages: Message[];
  /** This turn's prompt content: the compacted context is the summary followed by it. */
  prompt: UserContent[];
  /** Compaction between provider steps of the turn (its own work so far is summarized too). */
  midTurn: boolean;
  /** Mid-turn: the assistant text accepted so far in this turn (recorded again after the checkpoint). */
  acceptedText: string;
  tools: ToolSpec[];
  signal: AbortSignal;
  sink: TurnSink;
  recorder: TurnRecorder | null;
  currentTokens: number;
  maxTokens: number;
  maxOutputTokens?: number;
  /** The turn's fast mode (the summary request is part of the turn). */
  fast?: boolean;
  /** Estimates the tokens of a context sent with the turn's system prompt and tools. */
  estimate(messages: Message[]): number;
}

/**
 * A failed attempt; `error` when the summary request itself failed (the provider's kind and safe label), `writeError`
 * when the checkpoint could not be written (the store's error, for its storage cause).
 */
export type CompactResult =
  | { ok: true; messages: Message[] }
  | { ok: false; cancelled: boolean; error?: { kind: ProviderErrorKind; message: string }; writeError?: unknown };

export async function compact(o: CompactOptions): Promise<CompactResult> {
  const event = (status: "triggered" | "running" | "completed" | "failed" | "cancelled", currentTokens: number | null = null): void =>
    o.sink.event({ type: "compaction", id: o.id, status, currentTokens, maxTokens: currentTokens === null ? null : o.maxTokens });
  event("triggered", o.currentTokens);
  event("running");
  const fail = (cancelled: boolean, error?: { kind: ProviderErrorKind; message: string }, writeError?: unknown): CompactResult => {
    event(cancelled ? "cancelled" : "failed");
    return { ok: false, cancelled, ...(error !== undefined ? { error } : {}), ...(writeError !== undefined ? { writeError } : {}) };
  };
  // At turn start the prompt is kept verbatim, so only the earlier conversation is summarized. Every user message is
  // a copy (images as placeholders), so pushUser's merge of the instruction into the last one touches no caller's.
  const request = (o.midTurn ? o.messages : o.messages.slice(0, -1)).map((m) => (m.role === "user" ? { role: "user" as const, content: withoutImages(m.content) } : m));
  pushUser(request, [{ type: "text", text: SUMMARY_REQUEST }]);
  const fitted = fitForSummary(request, Math.floor(o.maxTokens * SUMMARY_REQUEST_RATIO), (m) => estimateTokens(SUMMARY_SYSTEM, m, o.tools));
  if (fitted === null) return fail(false);
  let summary = "";
  let failed: { kind: ProviderErrorKind; message: string } | undefined;
  for await (const ev of o.provider.stream({
    model: o.model,
    system: SUMMARY_SYSTEM,
    messages: fitted,
    tools: o.tools,
    ...(o.maxOutputTokens !== undefined ? { maxOutputTokens: o.maxOutputTokens } : {}),
    ...(o.fast === true ? { fast: true } : {}),
    signal: o.signal,
  })) {
    if (ev.type === "text_delta") {
      if (summary.length < MAX_SUMMARY_BYTES) summary += ev.text;
    } else if (ev.type === "error") failed = { kind: ev.kind, message: ev.message };
  }
  if (o.signal.aborted) return fail(true);
  summary = wellFormedText(truncateUtf8(summary.trim(), MAX_SUMMARY_BYTES));
  if (failed !== undefined || summary === "") return fail(false, failed);
  const messages: Message[] = [];
  pushUser(messages, [{ type: "text", text: SUMMARY_PREFIX + summary }]);
  pushUser(messages, o.midTurn ? [...o.prompt, { type: "text", text: MID_TURN_NOTE }] : o.prompt);
  const after = o.estimate(messages);
  if (after >= o.maxTokens) return fail(false);
  if (o.recorder !== null) {
    try {
      if (o.midTurn) await o.recorder.checkpointMidTurn(summary, o.acceptedText);
      else await o.recorder.checkpoint(summary, o.recorder.userSeq - 1);
    } catch (e) {
      return fail(false, undefined, e ?? new Error("checkpoint write failed"));
    }
  }
  o.sink.event({
    type: "compaction",
    id: o.id,
    status: "completed",
    currentTokens: after,
    maxTokens: o.maxTokens,
    afterTokens: after,
    removedMessages: Math.max(0, o.messages.length - (o.midTurn ? 0 : 1)),
  });
  return { ok: true, messages };
}

/**
 * `request` cut to fit `budget` estimated tokens, or null when it cannot be. Never mutates `request` or its
 * messages: a cut message is replaced by a copy. The last message (the summary instruction) is never cut; other
 * texts and tool results are cut largest first, keeping their head and tail around an omission note.
 */
export function fitForSummary(request: Message[], budget: number, estimate: (m: Message[]) => number): Message[] | null {
  let out = request;
  for (let est = estimate(out); est > budget; est = estimate(out)) {
    let best = -1;
    let bestBlock = -1;
    let bestLen = MIN_KEPT_CHARS + MIN_CUT;
    for (let i = 0; i < out.length - 1; i++) {
      const m = out[i] as Message;
      if (m.role === "tool") {
        if (m.content.length > bestLen) [best, bestBlock, bestLen] = [i, -1, m.content.length];
        continue;
      }
      m.content.forEach((b, j) => {
        if (b.type === "text" && b.text.length > bestLen) [best, bestBlock, bestLen] = [i, j, b.text.length];
      });
    }
    if (best < 0) return null;
    // Cut what is over the budget (≈ 4 characters a token) plus slack for the note, never below MIN_KEPT_CHARS.
    const cut = Math.min(bestLen - MIN_KEPT_CHARS, (est - budget) * 4 + MIN_CUT);
    if (out === request) out = request.slice();
    const m = out[best] as Message;
    if (m.role === "tool") out[best] = { ...m, content: elide(m.content, cut) };
    else if (m.role === "user")
      out[best] = { role: "user", content: m.content.map((b, j) => (j === bestBlock && b.type === "text" ? { type: "text", text: elide(b.text, cut) } : b)) };
    else
      out[best] = {
        role: "assistant",
        content: m.content.map((b, j) => (j === bestBlock && b.type === "text" ? { type: "text", text: elide(b.text, cut) } : b)),
      };
  }
  return out;
}

/**
 * `content` with each image replaced by a text placeholder naming its type and decoded size; a placeholder between
 * other parts is set on its own line (a dialect may join a message's texts with nothing between them).
 */
export function withoutImages(content: UserContent[]): UserContent[] {
  return content.map((c, i) => {
    if (c.type !== "image") return c;
    const text = `[image: ${c.mediaType.slice(0, 64)}, ${sizeText(base64Bytes(c.dataBase64))}]`;
    return { type: "text", text: `${i > 0 ? "\n" : ""}${text}${i < content.length - 1 ? "\n" : ""}` };
  });
}

/** The decoded length of a base64 text (its padding taken off). */
function base64Bytes(b64: string): number {
  const pad = b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0;
  return Math.max(0, Math.floor((b64.length * 3) / 4) - pad);
}

/** `n` bytes for a reader: `812 bytes`, `45.3 kB`, `1.2 MB` (decimal units). */
function sizeText(n: number): string {
  if (n < 1000) return `${n} bytes`;
  if (n < 1_000_000) return `${(n / 1000).toFixed(1)} kB`;
  return `${(n / 1_000_000).toFixed(1)} MB`;
}

/** `s` without (about) `cut` characters from its middle, marked by a note; never splits a surrogate pair. */
function elide(s: string, cut: number): string {
  const keep = s.length - cut;
  let head = Math.ceil(keep / 2);
  let tail = s.length - (keep - head);
  if (isHigh(s.charCodeAt(head - 1))) head--;
  if (isLow(s.charCodeAt(tail))) tail++;
  return `${s.slice(0, head)}\n[… ${tail - head} characters omitted for the summary …]\n${s.slice(tail)}`;
}

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff;
