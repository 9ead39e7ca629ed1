/**
 * Subagents: the `task` tool runs a child agent loop with its own context (a fresh conversation holding only the
 * task prompt), the parent's provider/model and the parent's tools minus `task` (no nesting). Contracts:
 * - Lifecycle: the loop opens one `subagent_batch` per provider response with task calls; each task opens a
 *   `subagent_task` whose `parentId` is the batch. Child tool events carry the task's ID as `parentId`.
 * - The child's text is not assistant text of the turn: it comes back to the parent model as the tool result
 *   (bounded). Child usage is reported once, as a `subagent_aggregate` usage event, when the child ends.
 * - Child context/usage-per-request events are not forwarded; cancellation of the turn cancels the child.
 */
import * as A from "../core/arg-schema.js";
import { boundText } from "./tools/result.js";
import { defineLocalTool } from "./tools/define.js";
import type { TurnOutcome } from "./events.js";
import type { Tool, ToolResult } from "./types.js";

export const TASK_TOOL_NAME = "task";

const TaskArgs = A.object({
  description: A.string({ min: 1, max: 200, description: "A short (3-8 word) description of the task" }),
  prompt: A.string({ min: 1, max: 64 * 1024, description: "The complete, self-contained instructions for the subagent" }),
});

/** `run` executes the child for one call (the loop binds it to the call's lifecycle ID). */
export function createTaskTool(run: (prompt: string, signal: AbortSignal) => Promise<TurnOutcome>): Tool {
  return defineLocalTool({
    name: TASK_TOOL_NAME,
    risk: "delegate",
    description:
      "Run a subagent with its own fresh context on a self-contained task (research, multi-step edits). It can use the same tools. Returns the subagent's final answer. Several task calls in one response run concurrently.",
    schema: TaskArgs,
    async execute(args, ctx): Promise<ToolResult> {
      const outcome = await run(args.prompt, ctx.signal);
      const text = boundText(outcome.assistantText === "" ? "(no answer)" : outcome.assistantText);
      if (outcome.status === "completed") return { content: text, isError: false };
      if (outcome.status === "cancelled") return { content: `task cancelled\n${text}`, isError: true, errorKind: "cancelled" };
      return { content: `task failed\n${text}`, isError: true, errorKind: "failed" };
    },
  });
}
