/**
 * The per-tool-call approval gate. Contract: a call whose policy is `auto` runs without asking; an `ask` call runs
 * only after the gate resolves `approve`. The gate receives the turn's AbortSignal: when the turn is cancelled
 * while a decision is pending, the call ends `cancelled` without waiting for the gate (it may still settle later;
 * its answer is ignored). A gate that rejects counts as `deny`.
 */
import type { ToolRisk } from "./types.js";

export interface ApprovalRequest {
  turnId: string;
  callId: string;
  toolName: string;
  /** The tool's declared risk class. */
  risk: ToolRisk;
  transport: "local" | "mcp";
  serverName?: string;
  /** Set for calls of a subagent: its task's lifecycle ID. */
  parentId?: string;
  /** A one-line description for a person; absent: derived from the tool name and arguments. */
  summary?: string;
  /** Validated arguments. For the approving UI only: never put them in events, logs or errors. */
  arguments: Record<string, unknown>;
  signal: AbortSignal;
}

export type ApprovalDecision = "approve" | "deny";
export type ApprovalGate = (req: ApprovalRequest) => Promise<ApprovalDecision>;

export interface ApprovalPolicy {
  /** Per tool: `auto` approves without asking. Default: every tool is `auto`. */
  policy(toolName: string, risk: ToolRisk): "auto" | "ask";
  ask: ApprovalGate;
}

/** Resolves a decision, or `cancelled` when `signal` fires first. */
export async function decide(p: ApprovalPolicy | undefined, req: ApprovalRequest): Promise<ApprovalDecision | "cancelled"> {
  if (p === undefined || p.policy(req.toolName, req.risk) === "auto") return "approve";
  if (req.signal.aborted) return "cancelled";
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<"cancelled">((resolve) => {
    onAbort = () => resolve("cancelled");
    req.signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    const asked = p.ask(req).then(
      (d): ApprovalDecision => (d === "approve" ? "approve" : "deny"),
      (): ApprovalDecision => "deny",
    );
    return await Promise.race([asked, aborted]);
  } finally {
    if (onAbort) req.signal.removeEventListener("abort", onAbort);
  }
}
