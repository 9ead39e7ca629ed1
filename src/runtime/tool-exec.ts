/**
 * One tool call through its lifecycle: proposed → (unknown tool | invalid arguments | approval) → started →
 * progress* → completed. Contracts:
 * - Never rejects; every outcome is a `ToolResult` for the model, with an `errorKind` when it is an error:
 *   `unknown_tool`, `invalid_arguments` (schema validation before running), `denied`, `cancelled`, or the tool's
 *   own kind (`failed`, `limit`, `unavailable`).
 * - Exactly one `completed` event per call that got a `proposed` event (the loop emits `proposed`).
 * - Progress lines are single-line, at most 120 characters, and at most one per `progressIntervalMs`.
 */
import { decide, type ApprovalPolicy } from "./approval.js";
import type { TurnSink } from "./events.js";
import type { Tool, ToolErrorKind, ToolResult } from "./types.js";
import type { Workspace } from "./workspace.js";
import { wellFormedText } from "../core/text-policy.js";

export interface ToolCallSpec {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export interface ToolRunContext {
  turnId: string;
  cwd: string;
  signal: AbortSignal;
  sink: TurnSink;
  lookup(name: string): Tool | undefined;
  approval?: ApprovalPolicy;
  parentId?: string;
  progressIntervalMs?: number;
  workspace?: Workspace;
}

const MAX_PROGRESS_CHARS = 120;

function errorResult(kind: ToolErrorKind, content: string): ToolResult {
  return { content, isError: true, errorKind: kind };
}

export async function executeToolCall(call: ToolCallSpec, rc: ToolRunContext): Promise<ToolResult> {
  const tool = rc.lookup(call.name);
  const base = {
    type: "tool" as const,
    callId: call.id,
    name: call.name,
    transport: tool?.transport ?? ("unknown" as const),
    ...(tool?.serverName !== undefined ? { serverName: tool.serverName } : {}),
    ...(rc.parentId !== undefined ? { parentId: rc.parentId } : {}),
  };
  const finish = (raw: ToolResult): ToolResult => {
    // A tool's output as Unicode text (an MCP server may send a lone surrogate escape): the one form the doors, the
    // store and the next request get.
    const content = wellFormedText(raw.content);
    const r = content === raw.content ? raw : { ...raw, content };
    rc.sink.event({
      ...base,
      phase: "completed",
      isError: r.isError,
      output: r.content,
      ...(r.errorKind !== undefined ? { errorKind: r.errorKind } : {}),
      ...(r.timedOut !== undefined ? { timedOut: r.timedOut } : {}),
      ...(r.jobs !== undefined && r.jobs.length > 0 ? { jobs: r.jobs } : {}),
    });
    return r;
  };
  if (tool === undefined) return finish(errorResult("unknown_tool", `unknown tool: ${call.name}`));
  const v = tool.validate(call.arguments);
  if (!v.ok) return finish(errorResult("invalid_arguments", `${call.name}: invalid arguments\n${v.message}`));
  if (rc.signal.aborted) return finish(errorResult("cancelled", `${call.name}: cancelled`));
  const decision = tool.autoApprove?.(v.value) === true ? "approve" : await decide(rc.approval, {
    turnId: rc.turnId,
    callId: call.id,
    toolName: call.name,
    risk: tool.risk,
    transport: tool.transport,
    ...(tool.serverName !== undefined ? { serverName: tool.serverName } : {}),
    arguments: v.value,
    ...(rc.parentId !== undefined ? { parentId: rc.parentId } : {}),
    signal: rc.signal,
  });
  if (decision === "cancelled" || rc.signal.aborted) return finish(errorResult("cancelled", `${call.name}: cancelled`));
  if (decision === "deny") return finish(errorResult("denied", `${call.name}: the user denied this call`));
  rc.sink.event({ ...base, phase: "started" });
  const interval = rc.progressIntervalMs ?? 250;
  let lastProgress = -Infinity;
  const result = await tool.run(v.value, {
    cwd: rc.cwd,
    signal: rc.signal,
    callId: call.id,
    ...(rc.workspace !== undefined ? { workspace: rc.workspace } : {}),
    onProgress: (line) => {
      const now = Date.now();
      if (now - lastProgress < interval) return;
      lastProgress = now;
      const one = line.replace(/[\r\n\t]+/g, " ").trim().slice(0, MAX_PROGRESS_CHARS);
      if (one !== "") rc.sink.event({ ...base, phase: "progress", line: one });
    },
    approve: (r) =>
      decide(rc.approval, {
        turnId: rc.turnId,
        callId: call.id,
        toolName: r.name,
        risk: r.risk,
        transport: "local",
        summary: r.summary,
        arguments: r.arguments,
        ...(rc.parentId !== undefined ? { parentId: rc.parentId } : {}),
        signal: rc.signal,
      }),
  });
  return finish(result);
}
