/**
 * Compaction: when a turn starts with its context near the model's window, the provider summarizes the earlier
 * conversation; the summary is recorded durably as a checkpoint (covering every record before this turn's user
 * record) and replaces that history in the model context. Replay shows it as a `summary` item.
 *
 * Contracts: `compact` never rejects. It emits `compaction` events triggered → running → completed | failed |
 * cancelled, and returns the new context (summary + the current prompt) or why it could not.
 */
import { truncateUtf8 } from "../core/utf8.js";
import type { TurnSink } from "./events.js";
import { pushUser, SUMMARY_PREFIX } from "./history.js";
import type { TurnRecorder } from "./recorder.js";
import type { Message, Provider, ToolSpec } from "./types.js";

export const MAX_SUMMARY_BYTES = 64 * 1024;

const SUMMARY_SYSTEM =
  "You compact a coding-agent conversation. Write a faithful, self-contained summary of everything above: the user's goals, decisions, files and commands involved, results, and open work. Do not call tools. Reply with the summary only.";
const SUMMARY_REQUEST = "Summarize the conversation so far for continuation, as instructed.";

export interface CompactOptions {
  provider: Provider;
  model: string;
  /** The full context; its last message is the current turn's user prompt. */
  messages: Message[];
  tools: ToolSpec[];
  signal: AbortSignal;
  sink: TurnSink;
  recorder: TurnRecorder | null;
  currentTokens: number;
  maxTokens: number;
  maxOutputTokens?: number;
  /** Estimates the tokens of a context (for the `completed` event's count). */
  estimate(messages: Message[]): number;
}

export type CompactResult = { ok: true; messages: Message[] } | { ok: false; cancelled: boolean };

export async function compact(o: CompactOptions): Promise<CompactResult> {
  o.sink.event({ type: "compaction", status: "triggered", currentTokens: o.currentTokens, maxTokens: o.maxTokens });
  o.sink.event({ type: "compaction", status: "running", currentTokens: null, maxTokens: null });
  const fail = (cancelled: boolean): CompactResult => {
    o.sink.event({ type: "compaction", status: cancelled ? "cancelled" : "failed", currentTokens: null, maxTokens: null });
    return { ok: false, cancelled };
  };
  const current = o.messages[o.messages.length - 1];
  if (current === undefined || current.role !== "user") return fail(false);
  const earlier = o.messages.slice(0, -1);
  const request: Message[] = earlier.map((m) => (m.role === "user" ? { role: "user", content: [...m.content] } : m));
  pushUser(request, [{ type: "text", text: SUMMARY_REQUEST }]);
  let summary = "";
  let failed = false;
  for await (const ev of o.provider.stream({
    model: o.model,
    system: SUMMARY_SYSTEM,
    messages: request,
    tools: o.tools,
    ...(o.maxOutputTokens !== undefined ? { maxOutputTokens: o.maxOutputTokens } : {}),
    signal: o.signal,
  })) {
    if (ev.type === "text_delta") {
      if (summary.length < MAX_SUMMARY_BYTES) summary += ev.text;
    } else if (ev.type === "error") failed = true;
  }
  if (o.signal.aborted) return fail(true);
  summary = truncateUtf8(summary.trim(), MAX_SUMMARY_BYTES);
  if (failed || summary === "") return fail(false);
  if (o.recorder !== null) {
    try {
      await o.recorder.checkpoint(summary, o.recorder.userSeq - 1);
    } catch {
      return fail(false);
    }
  }
  const messages: Message[] = [];
  pushUser(messages, [{ type: "text", text: SUMMARY_PREFIX + summary }]);
  pushUser(messages, current.content);
  o.sink.event({ type: "compaction", status: "completed", currentTokens: o.estimate(messages), maxTokens: o.maxTokens });
  return { ok: true, messages };
}
