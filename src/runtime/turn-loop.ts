/**
 * The agent loop of one turn: provider call → tool execution → continuation, until the model stops, a step limit,
 * cancellation, or a failure. Protocol-neutral; persistence through an optional `TurnRecorder`.
 *
 * Contracts:
 * - Never rejects: every ending is a `TurnOutcome` whose `assistantText` is exactly the text the sink accepted.
 * - Cancellation (`signal`) is observed at every await: the provider stream (its socket is aborted), tool runs
 *   (child process groups are killed by the tools), approval waits, subagents, and between steps.
 * - A delta refused by the sink stops the provider stream; the turn ends `failed` (`output_limit`).
 * - A provider error ends the turn `failed`; tool calls of a failed response never run.
 * - Compaction (compaction.ts) runs before a provider request whose estimate reaches `compactAtRatio` of the
 *   window: at turn start when there is earlier history, and between steps inside the turn (the loop then
 *   continues with the compacted context). A failed attempt is not retried in the same turn; the turn goes on
 *   uncompacted while the context fits. A request whose estimate reaches the whole window after an attempt (or,
 *   without one, on a continuation) ends the turn `compaction_required`, or, when the attempt failed because its
 *   summary request failed, `failed` with that provider failure (its cause and fix, not "even after compaction").
 *   Cancellation during compaction ends it `cancelled`.
 * - Reactive compaction: a request the provider refuses as longer than the model's window (`isContextOverflow`), or
 *   as too large in bytes (HTTP 413), before any of its output was accepted (events that are not output, such as
 *   usage or keep-alives, may come first) is compacted the same way and sent once more, as the same step, when this
 *   turn attempted no compaction yet, compaction is enabled and there is something before the prompt to summarize.
 *   A second refusal, or a failed attempt, ends the turn `failed` (`compaction`, `provider` for a 413, the summary
 *   request's failure, or `persistence` when the checkpoint could not be written).
 */
import type { ApprovalPolicy } from "./approval.js";
import { estimateTokens } from "./context.js";
import type { FailureReason, RuntimeEvent, TerminalStatus, TurnOutcome, TurnSink, TurnUsage } from "./events.js";
import { abortedFailure } from "./providers/errors.js";
import { compactTurn, failureOf, refusalCompacts } from "./turn-compaction.js";
import type { TurnRecorder } from "./recorder.js";
import { storageCause } from "../store/sessions/errors.js";
import { createTaskTool, TASK_TOOL_NAME } from "./subagent.js";
import type { Workspace } from "./workspace.js";
import { executeToolCall, type ToolCallSpec } from "./tool-exec.js";
import { StreamedText } from "./streamed-text.js";
import { wellFormedJson, wellFormedText } from "../core/text-policy.js";
import type { AssistantBlock, Message, Provider, ProviderBatch, ProviderErrorKind, ProviderEvent, ProviderRequest, ThinkingLevel, Tool, ToolResult, ToolSpec } from "./types.js";

export interface LoopOptions {
  turnId: string;
  provider: Provider;
  model: string;
  system: string;
  /** Context including the new user prompt as its last message. Mutated: the loop appends to it. */
  messages: Message[];
  /** Registry tools (the loop adds `task` when `subagents`). */
  tools: readonly Tool[];
  subagents: boolean;
  cwd: string;
  signal: AbortSignal;
  sink: TurnSink;
  recorder: TurnRecorder | null;
  approval?: ApprovalPolicy;
  maxSteps: number;
  maxOutputTokens?: number;
  thinking?: ThinkingLevel;
  /** Fast mode captured at turn start (ProviderRequest.fast). */
  fast?: boolean;
  contextWindow: number;
  /** Fraction of the window that triggers compaction (at turn start and between steps); null disables it. */
  compactAtRatio: number | null;
  /** Set for a subagent loop: the `subagent_task` lifecycle ID. */
  parentId?: string;
  /** Lifecycle ID source (unique per turn). */
  newId: () => string;
  /**
   * Steering: polled at each step boundary after tool results (never for a response without tool calls); each
   * returned message becomes a user message of this turn (recorded) before the next provider request.
   */
  steer?: () => string[];
  /** Where the tools touch files and run commands (unset: this machine); subagents share it. */
  workspace?: Workspace;
  /**
   * The session's tools now (MCP servers that finished starting, or failed): polled at each step boundary after
   * the first request; from the next request on, MCP tools (`transport: "mcp"`) follow this list (added, replaced
   * by name, or removed); other tools stay.
   */
  moreTools?: () => readonly Tool[];
}

/**
 * `a + b` for two token counts, at most `Number.MAX_SAFE_INTEGER`. A provider's count is clamped to it alone
 * (providers/accumulate.ts); a sum of counts (a turn's requests, input plus cache reads) is clamped here, so a total a
 * client sees stays an exact integer instead of a rounded 2^53 or more (or Infinity, serialised as null).
 */
function countSum(a: number, b: number): number {
  return Math.min(a + b, Number.MAX_SAFE_INTEGER);
}

const TASK_SPEC: ToolSpec = createTaskTool(() => Promise.reject(new Error("unbound"))).spec;

export async function runLoop(o: LoopOptions): Promise<TurnOutcome> {
  const usage: TurnUsage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 0 };
  const accepted = new StreamedText();
  let messages = o.messages;
  const byName = new Map<string, Tool>();
  for (const t of o.tools) byName.set(t.spec.name, t);
  const specs: ToolSpec[] = o.tools.map((t) => t.spec);
  if (o.subagents && !byName.has(TASK_TOOL_NAME)) specs.push(TASK_SPEC);
  const end = (status: TerminalStatus, reason?: FailureReason, message?: string): TurnOutcome => ({
    status,
    assistantText: accepted.text(),
    usage,
    ...(reason !== undefined ? { reason } : {}),
    ...(message !== undefined ? { message } : {}),
  });

  // This turn's prompt: every compacted context is the summary followed by it.
  const first = messages[messages.length - 1];
  const prompt = first !== undefined && first.role === "user" ? first.content : [];
  let compactionFailed = false;
  /** This turn attempted compaction (either trigger): a refused request is then not compacted again. */
  let compactedInTurn = false;
  /** Why the summary request of this turn's failed attempt failed, when it was the provider. */
  let compactionError: { kind: ProviderErrorKind; message: string } | undefined;

  for (let step = 0; ; step++) {
    if (step > 0 && o.moreTools !== undefined) {
      // MCP tools follow their servers: new ones join, a live tool replaces its cached stand-in, a tool a stale
      // cached list offered (or of a server that failed) leaves.
      const live = new Map(o.moreTools().map((t) => [t.spec.name, t]));
      const kept = o.tools.flatMap((t) => (t.transport !== "mcp" ? [t] : live.has(t.spec.name) ? [live.get(t.spec.name) as Tool] : []));
      const next = [...kept, ...[...live.values()].filter((t) => !byName.has(t.spec.name))];
      if (next.length !== o.tools.length || next.some((t, i) => t !== o.tools[i])) {
        o = { ...o, tools: next };
        byName.clear();
        for (const t of next) byName.set(t.spec.name, t);
        specs.length = 0;
        specs.push(...next.map((t) => t.spec));
        if (o.subagents && !byName.has(TASK_TOOL_NAME)) specs.push(TASK_SPEC);
      }
    }
    if (o.signal.aborted) return end("cancelled");
    if (o.recorder?.failure) return end("failed", "persistence", storageCause(o.recorder.failure));
    if (step >= o.maxSteps) return end("failed", "step_limit");
    let estimate = estimateTokens(o.system, messages, specs);
    let attempted = false;
    if (o.compactAtRatio !== null && !compactionFailed && estimate >= o.compactAtRatio * o.contextWindow && messages.length > 1) {
      attempted = compactedInTurn = true;
      const r = await compactTurn(o, { messages, prompt, midTurn: step > 0, acceptedText: accepted.text(), specs, currentTokens: estimate });
      if (r.ok) {
        messages = r.messages;
        estimate = estimateTokens(o.system, messages, specs);
      } else if (r.cancelled || o.signal.aborted) return end("cancelled");
      else {
        compactionFailed = true;
        compactionError = r.error;
      }
    }
    if (estimate >= o.contextWindow && (step > 0 || attempted)) {
      const e = compactionError;
      return e !== undefined ? end("failed", failureOf(e.kind, e.message), e.message) : end("compaction_required", "compaction");
    }
    let r: StreamResult;
    // The step's request; sent once more when refused as over the window and compacted (reactive compaction).
    for (;;) {
      const seq = ++usage.requests;
      o.sink.event({ type: "context", currentTokens: estimate, maxTokens: o.contextWindow, reasoningTokens: null, requestSequence: seq, source: "fallback_estimate" });
      r = await streamOnce(o, messages, specs, seq, accepted, usage);
      if (r.refused) return end("failed", "output_limit");
      if (o.signal.aborted) return end("cancelled");
      // Only a refusal before any of its output was accepted, once a turn, with something before the prompt to summarize.
      if (r.error === null || r.output || !refusalCompacts(r.message) || o.compactAtRatio === null || compactedInTurn || messages.length <= 1) break;
      compactedInTurn = true;
      const c = await compactTurn(o, { messages, prompt, midTurn: step > 0, acceptedText: accepted.text(), specs, currentTokens: estimate });
      if (c.ok) {
        messages = c.messages;
        estimate = estimateTokens(o.system, messages, specs);
        continue;
      }
      if (c.cancelled || o.signal.aborted) return end("cancelled");
      // No retry without its checkpoint: the store's failure (its cause) ends the turn, as any failed write does.
      if (c.writeError !== undefined) return end("failed", "persistence", storageCause(c.writeError));
      // The summary request's own failure is the clearer cause; else the refusal stands.
      if (c.error !== undefined) return end("failed", failureOf(c.error.kind, c.error.message), c.error.message);
      break;
    }
    if (r.error !== null) return { ...end("failed", failureOf(r.error, r.message)), ...(r.message !== "" ? { message: r.message } : {}) };
    if (r.calls.length === 0) return end("completed");

    const results = await runTools(o, r.calls, byName);
    r.calls.forEach((c, i) => {
      const res = results[i] as ToolResult;
      messages.push({ role: "tool", toolCallId: c.id, toolName: c.name, content: res.content, isError: res.isError });
      o.recorder?.toolResult(c.id, c.name, res.content, res.isError);
    });
    for (const text of o.steer?.() ?? []) {
      messages.push({ role: "user", content: [{ type: "text", text }] });
      try {
        await o.recorder?.steering(text);
      } catch (e) {
        return end("failed", "persistence", storageCause(e));
      }
    }
  }
}

interface StreamResult {
  refused: boolean;
  error: ProviderErrorKind | null;
  /** The provider's error label ("" when none). */
  message: string;
  calls: ToolCallSpec[];
  /** Some of this response reached the client or the context: text, a tool call, thinking or a reasoning summary. */
  output: boolean;
}

async function streamOnce(
  o: LoopOptions,
  messages: Message[],
  specs: ToolSpec[],
  seq: number,
  accepted: StreamedText,
  total: TurnUsage,
): Promise<StreamResult> {
  const ctl = new AbortController();
  const onAbort = (): void => ctl.abort();
  o.signal.addEventListener("abort", onAbort, { once: true });
  // `ctl.signal.aborted`, kept by its listener (abort dispatches synchronously): read once per event below.
  let aborted = false;
  ctl.signal.addEventListener("abort", () => (aborted = true), { once: true });
  o.recorder?.startMessage();
  const blocks: AssistantBlock[] = [];
  // This response's text is the tail of the turn's accepted text (no second string built per delta).
  const textStart = accepted.length;
  const calls: ToolCallSpec[] = [];
  let refused = false;
  let error: ProviderErrorKind | null = null;
  let message = "";
  let last: Extract<import("./types.js").ProviderEvent, { type: "usage" }> | null = null;
  /** A high surrogate that ended the last text delta, held for its pair (see `text_delta`). */
  let held = "";
  let summaries = false;
  try {
    const req: ProviderRequest = {
      model: o.model,
      system: o.system,
      messages,
      tools: specs,
      ...(o.maxOutputTokens !== undefined ? { maxOutputTokens: o.maxOutputTokens } : {}),
      ...(o.thinking !== undefined && o.thinking !== "default" ? { thinking: o.thinking } : {}),
      ...(o.fast === true ? { fast: true } : {}),
      signal: ctl.signal,
    };
    // Batches when the provider offers them (one await per body chunk, not per delta); see `ProviderBatch`.
    const batches = o.provider.streamBatches !== undefined ? o.provider.streamBatches(req) : singles(o.provider.stream(req));
    read: for await (const batch of batches) for (const ev of batch.events) {
      if (!batch.settled && aborted) {
        const f = abortedFailure();
        error = f.kind;
        message = f.label;
        break read;
      }
      switch (ev.type) {
        case "text_delta": {
          let raw = ev.text;
          if (held !== "") {
            raw = held + raw;
            held = "";
          }
          // A high surrogate ending a delta waits for the next one, which may open with its pair (a provider that
          // cuts its text by UTF-16 code units splits a pair across two deltas).
          const endCode = raw.charCodeAt(raw.length - 1);
          if (endCode >= 0xd800 && endCode <= 0xdbff) {
            held = raw.slice(-1);
            raw = raw.slice(0, -1);
          }
          if (raw === "") break;
          // A lone surrogate (half a pair on its own) becomes U+FFFD: what the doors send, the store keeps and the
          // next request carries is Unicode text.
          const text = wellFormedText(raw);
          let ok = o.sink.delta(text);
          if (typeof ok !== "boolean") ok = await ok;
          if (!ok) {
            refused = true;
            ctl.abort();
            break read;
          }
          accepted.add(text);
          o.recorder?.text(text);
          break;
        }
        case "reasoning_summary":
          summaries = true;
          o.sink.event(withParent({ type: "reasoning_summary", text: wellFormedText(ev.text) }, o.parentId));
          break;
        case "thinking_block":
          blocks.push({
            type: "thinking",
            text: wellFormedText(ev.text),
            ...(ev.signature !== undefined ? { signature: ev.signature } : {}),
            ...(ev.redacted !== undefined ? { redacted: ev.redacted } : {}),
            ...(ev.api !== undefined ? { api: ev.api } : {}),
          });
          break;
        case "tool_call": {
          // As Unicode text too (the ID and name are stored, the arguments shown and passed to the tool).
          const id = wellFormedText(ev.id);
          const name = wellFormedText(ev.name);
          const args = wellFormedJson(ev.arguments);
          calls.push({ id, name, arguments: args });
          const tool = o.tools.find((t) => t.spec.name === name);
          o.sink.event({
            type: "tool",
            phase: "proposed",
            callId: id,
            name,
            arguments: args,
            transport: tool?.transport ?? (name === TASK_TOOL_NAME && o.subagents ? "local" : "unknown"),
            ...(tool?.serverName !== undefined ? { serverName: tool.serverName } : {}),
            ...(o.parentId !== undefined ? { parentId: o.parentId } : {}),
          });
          o.recorder?.toolCall(id, name, args);
          break;
        }
        case "usage":
          last = ev;
          break;
        case "error":
          error = ev.kind;
          message = ev.message;
          break;
        case "done":
        case "thinking_delta":
          break;
      }
    }
    // A held high surrogate no delta completed is a lone one: it is kept as U+FFFD, like any other.
    if (held !== "" && !refused && !aborted) {
      let ok = o.sink.delta("\ufffd");
      if (typeof ok !== "boolean") ok = await ok;
      if (ok) {
        accepted.add("\ufffd");
        o.recorder?.text("\ufffd");
      } else refused = true;
    }
  } finally {
    o.signal.removeEventListener("abort", onAbort);
  }
  const all = accepted.text();
  const text = textStart === 0 ? all : all.slice(textStart);
  if (text !== "") blocks.push({ type: "text", text });
  for (const c of calls) blocks.push({ type: "tool_call", id: c.id, name: c.name, arguments: c.arguments });
  if (blocks.length > 0) messages.push({ role: "assistant", content: blocks });
  o.recorder?.endMessage();
  if (last !== null) {
    total.inputTokens = countSum(total.inputTokens, last.inputTokens);
    total.outputTokens = countSum(total.outputTokens, last.outputTokens);
    total.cacheReadTokens = countSum(total.cacheReadTokens, last.cacheReadTokens ?? 0);
    const input = countSum(last.inputTokens, last.cacheReadTokens ?? 0);
    o.sink.event({
      type: "usage",
      effectiveInput: input,
      output: last.outputTokens,
      cacheRead: last.cacheReadTokens ?? 0,
      cacheKnown: last.cacheReadTokens !== null,
      requestSequence: seq,
      finalUsage: true,
      source: "provider_request",
    });
    o.sink.event({
      type: "context",
      currentTokens: countSum(input, last.outputTokens),
      maxTokens: o.contextWindow,
      reasoningTokens: last.reasoningTokens,
      requestSequence: seq,
      source: "provider_exact",
    });
  }
  if (o.parentId === undefined && !refused && error === null) o.sink.event({ type: "assistant_completed", text });
  return { refused, error: refused ? null : error, message, calls: error !== null && !refused ? [] : calls, output: blocks.length > 0 || summaries };
}

/** A provider's event stream as settled one-event batches (its own abort handling already applied). */
async function* singles(stream: AsyncIterable<ProviderEvent>): AsyncGenerator<ProviderBatch, void, undefined> {
  for await (const ev of stream) yield { events: [ev], settled: true };
}

function withParent<E extends RuntimeEvent>(e: E, parentId: string | undefined): E {
  return parentId === undefined ? e : { ...e, parentId };
}

/** Runs a response's tool calls: ordinary calls in order; `task` calls concurrently as one subagent batch. */
async function runTools(o: LoopOptions, calls: ToolCallSpec[], byName: Map<string, Tool>): Promise<ToolResult[]> {
  const results: ToolResult[] = new Array<ToolResult>(calls.length);
  const isTask = (c: ToolCallSpec): boolean => o.subagents && c.name === TASK_TOOL_NAME && !byName.has(TASK_TOOL_NAME);
  const rc = (lookup: (n: string) => Tool | undefined) => ({
    turnId: o.turnId,
    cwd: o.cwd,
    signal: o.signal,
    sink: o.sink,
    lookup,
    ...(o.approval !== undefined ? { approval: o.approval } : {}),
    ...(o.parentId !== undefined ? { parentId: o.parentId } : {}),
    ...(o.workspace !== undefined ? { workspace: o.workspace } : {}),
  });
  const sequential = (async () => {
    for (let i = 0; i < calls.length; i++) {
      const c = calls[i] as ToolCallSpec;
      if (isTask(c)) continue;
      results[i] = await executeToolCall(c, rc((n) => byName.get(n)));
    }
  })();
  const tasks = calls.map((c, i) => ({ c, i })).filter(({ c }) => isTask(c));
  let batch: Promise<void> = Promise.resolve();
  if (tasks.length > 0) {
    const batchId = o.newId();
    o.sink.event(lifecycle(batchId, "subagent_batch", "running", false, o.parentId));
    batch = Promise.all(
      tasks.map(async ({ c, i }) => {
        const taskId = o.newId();
        o.sink.event(lifecycle(taskId, "subagent_task", "running", false, batchId));
        const tool = createTaskTool((prompt, signal) => runChild(o, prompt, signal, taskId));
        const res = await executeToolCall(c, rc(() => tool));
        results[i] = res;
        o.sink.event(lifecycle(taskId, "subagent_task", !res.isError ? "completed" : res.errorKind === "cancelled" ? "cancelled" : "failed", true));
      }),
    ).then(() => {
      o.sink.event(lifecycle(batchId, "subagent_batch", o.signal.aborted ? "cancelled" : "completed", true));
    });
  }
  await Promise.all([sequential, batch]);
  return results;
}

function lifecycle(id: string, category: "subagent_batch" | "subagent_task", status: "running" | "completed" | "failed" | "cancelled", finish: boolean, parentId?: string): RuntimeEvent {
  return { type: "lifecycle", id, category, status, finish, ...(parentId !== undefined ? { parentId } : {}) };
}

async function runChild(o: LoopOptions, prompt: string, signal: AbortSignal, taskId: string): Promise<TurnOutcome> {
  const sink: TurnSink = {
    delta: () => true,
    event: (e) => {
      if (e.type === "context" || e.type === "usage") return;
      o.sink.event(e);
    },
  };
  const out = await runLoop({
    ...o,
    messages: [{ role: "user", content: [{ type: "text", text: prompt }] }],
    subagents: false,
    signal,
    sink,
    recorder: null,
    compactAtRatio: null,
    steer: () => [],
    parentId: taskId,
  });
  o.sink.event({
    type: "usage",
    effectiveInput: countSum(out.usage.inputTokens, out.usage.cacheReadTokens),
    output: out.usage.outputTokens,
    cacheRead: out.usage.cacheReadTokens,
    cacheKnown: false,
    requestSequence: out.usage.requests,
    finalUsage: true,
    source: "subagent_aggregate",
  });
  return out;
}
