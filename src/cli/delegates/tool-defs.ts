/**
 * What the model is told about the delegation tools (`agent_berth`, the job tools, `agent_codex` / `agent_claude` /
 * `agent_pi`), apart from the code that runs them (agent-berth.ts, jobs.ts, cli-agents.ts and the child-process
 * machinery they load): a session's first request lists them with only this module loaded, and their code loads
 * when one is first called (scv-deps.ts). The implementations build their tools from these same definitions.
 */
import * as A from "../../core/arg-schema.js";
import type { ToolDef } from "../../runtime/tools/specs.js";

export const AGENT_BERTH = "agent_berth";
/** A delegated prompt at most (UTF-8 bytes): the SCV protocol's prompt bound, which the nested Berth enforces. */
export const MAX_DELEGATED_PROMPT_BYTES = 256 * 1024;

/**
 * The refusal of a prompt over `MAX_DELEGATED_PROMPT_BYTES`, or null. The schema bounds characters; a prompt of
 * multi-byte text within them went to the nested Berth, which refused the turn with an opaque "(invalid_request)".
 */
export function promptRefusal(tool: string, prompt: string): { content: string; isError: true; errorKind: "invalid_arguments" } | null {
  const bytes = Buffer.byteLength(prompt);
  if (bytes <= MAX_DELEGATED_PROMPT_BYTES) return null;
  return {
    content: `${tool}: \`prompt\` is ${bytes} bytes, over the ${MAX_DELEGATED_PROMPT_BYTES}-byte (256 KiB) limit of a delegated prompt; shorten it, or write the details to a file in the workspace and name that file in the prompt`,
    isError: true,
    errorKind: "invalid_arguments",
  };
}
export const BERTH_DEFAULT_TIMEOUT_SECONDS = 1800;
export const BERTH_MAX_TIMEOUT_SECONDS = 3600;

const berthArgs = A.object({
  prompt: A.string({ min: 1, max: 256 * 1024, description: "The complete, self-contained instructions for the nested Berth agent" }),
  session: A.optional(A.string({ min: 1, max: 64, description: "Continue this conversation (a handle such as berth-1 from an earlier result)" })),
  background: A.optional(A.boolean({ description: "Run as a background job: returns a job handle at once; follow it with agent_wait / agent_status / agent_cancel" })),
  timeout_seconds: A.optional(A.number({ integer: true, min: 1, max: BERTH_MAX_TIMEOUT_SECONDS, description: `Time limit for this turn (default ${BERTH_DEFAULT_TIMEOUT_SECONDS})` })),
});

export const AGENT_BERTH_DEF: ToolDef<A.Infer<typeof berthArgs>> = {
  name: AGENT_BERTH,
  risk: "delegate",
  description:
    "Delegate a task to a nested Berth agent in the same workspace. Returns its final reply and a conversation handle (berth-N); pass it as `session` to continue that conversation.",
  schema: berthArgs,
};

const def = <T extends Record<string, unknown>>(d: ToolDef<T>): ToolDef<T> => d;

export const MAX_WAIT_SECONDS = 3600;
export const DEFAULT_WAIT_SECONDS = 600;

export const AGENT_WAIT_DEF = def({
  name: "agent_wait",
  risk: "read_only",
  description: "Wait for background jobs (all unsettled jobs of this session, or the named ones) to end, and return their results.",
  schema: A.object({
    jobs: A.optional(A.string({ min: 1, max: 1024, description: "Job handles such as `job-1 job-2`, space- or comma-separated (default: every unsettled job)" })),
    timeout_seconds: A.optional(A.number({ integer: true, min: 1, max: MAX_WAIT_SECONDS, description: `How long to wait (default ${DEFAULT_WAIT_SECONDS})` })),
  }),
});

export const AGENT_STATUS_DEF = def({
  name: "agent_status",
  risk: "read_only",
  description: "Show the state of this session's background jobs (or one job), with the results of those that ended.",
  schema: A.object({ job: A.optional(A.string({ min: 1, max: 64, description: "A job handle such as job-1" })) }),
});

export const AGENT_CANCEL_DEF = def({
  name: "agent_cancel",
  risk: "read_only",
  description: "Stop a background job of this session.",
  schema: A.object({ job: A.string({ min: 1, max: 64, description: "A job handle such as job-1" }) }),
});

/** The delegate CLIs, in the order their tools are offered. */
export const CLI_AGENTS = ["codex", "claude", "pi"] as const;
export type CliAgentName = (typeof CLI_AGENTS)[number];
export const CLI_LABELS: Record<CliAgentName, string> = { codex: "the Codex CLI", claude: "Claude Code", pi: "the pi coding agent" };
export const CLI_DEFAULT_TIMEOUT_SECONDS = 1800;
export const CLI_MAX_TIMEOUT_SECONDS = 3600;

const cliArgs = A.object({
  prompt: A.string({ min: 1, max: 256 * 1024, description: "The complete, self-contained instructions for the agent" }),
  cwd: A.optional(A.string({ min: 1, max: 4096, description: "Working directory inside the workspace (default: the workspace)" })),
  model: A.optional(A.string({ min: 1, max: 128, description: "The agent's model name" })),
  effort: A.optional(A.string({ min: 3, max: 6, description: "Reasoning effort (agent_codex only): low, medium or high" })),
  session: A.optional(A.string({ min: 1, max: 64, description: "Resume this conversation (a handle such as codex-1 from an earlier result)" })),
  background: A.optional(A.boolean({ description: "Run as a background job: returns a job handle at once; follow it with agent_wait / agent_status / agent_cancel" })),
  timeout_seconds: A.optional(A.number({ integer: true, min: 1, max: CLI_MAX_TIMEOUT_SECONDS, description: `Time limit (default ${CLI_DEFAULT_TIMEOUT_SECONDS})` })),
});

/** `agent_<cli>`'s definition. */
export function cliAgentDef(agent: CliAgentName): ToolDef<A.Infer<typeof cliArgs>> {
  return {
    name: `agent_${agent}`,
    risk: "delegate",
    description: `Delegate a task to ${CLI_LABELS[agent]} in this workspace. Returns its final reply and a conversation handle (${agent}-N); pass it as \`session\` to continue.${agent === "claude" ? " Claude may read and edit files in its working directory; commands and web access are refused and listed in the result's `denied` (run them yourself if still needed)." : ""}`,
    schema: cliArgs,
  };
}
