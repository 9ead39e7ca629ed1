/**
 * One admitted turn of a `SessionRuntime` run by the agent: its event sink (deltas with backpressure, runtime
 * events and their session projection), its approval policy (pending approvals in the session's `ApprovalBook`),
 * steering at step boundaries, and the request to the runner built from the session's configuration.
 */
import type { TurnOutcome, TurnSink } from "../events.js";
import type { ApprovalPolicy } from "../approval.js";
import type { SessionDeps } from "./deps.js";
import { approvalSummary, needsApproval, type ApprovalBook } from "./approvals.js";
import { TurnProjector } from "./project.js";
import { loadImages } from "./attachments.js";
import type { Admitted } from "./admission.js";
import type { SessionConfig, SessionEvent, SubmitOptions, TurnOrigin } from "./types.js";

/** The running turn of a session. */
export interface Running {
  turnId: string;
  ctl: AbortController;
  /** Steering messages not yet injected; `ref` is the door's own ID for one (e.g. an AHP pending-message ID). */
  steering: Array<{ text: string; ref?: string }>;
  origin?: TurnOrigin;
  /**
   * Set once a provider response of the turn (not of a subagent or a compaction) came in full: the model has seen the
   * prompt, so a report turn's jobs are settled however the turn ends (`terminalEvent`, docs/scv.md).
   */
  answered?: boolean;
  /** Set once the turn's terminal event is out: a door that saw it and then steers is told no turn is running. */
  ended?: boolean;
}

export const EMPTY_USAGE = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, requests: 0 };

export interface TurnContext {
  deps: SessionDeps;
  sessionId: string;
  /** The session's configuration (constant while a turn runs). */
  cfg: () => SessionConfig;
  approvals: ApprovalBook;
  emit: (e: SessionEvent) => void;
  /** Delivers a delta; false when a listener refused it, a promise when one applied backpressure. */
  delta: (e: SessionEvent) => boolean | Promise<boolean>;
}

/** Runs the turn to its outcome; never rejects (a throw ends it `failed`, or `cancelled` once aborted). */
export async function runAgentTurn(c: TurnContext, run: Running, a: Admitted, prompt: string, opts: SubmitOptions): Promise<TurnOutcome> {
  const ref = { sessionId: c.sessionId, turnId: run.turnId };
  const cfg = c.cfg();
  const projector = new TurnProjector(ref);
  const { sessionId, turnId } = ref;
  const sink: TurnSink = {
    // One literal of a fixed shape per delta (no spread: this runs once per provider delta).
    delta: (text) => c.delta({ type: "assistant_delta", sessionId, turnId, text }),
    event: (e) => {
      if (e.type === "assistant_completed") run.answered = true;
      c.emit({ ...ref, type: "runtime", event: e });
      for (const ev of projector.project(e)) c.emit(ev);
    },
  };
  const noTools = cfg.noTools === true || opts.noTools === true;
  const mode = cfg.approval ?? "on-risk";
  const cwd = cfg.cwd;
  const approval: ApprovalPolicy = {
    policy: (_name, risk) => (needsApproval(mode, risk) ? "ask" : "auto"),
    ask: (req) => {
      if (run.origin !== undefined && c.cfg().autoApprove === true) return Promise.resolve("approve");
      return c.approvals.request(
        req.callId,
        req.signal,
        (approvalId) =>
          c.emit({
            ...ref,
            type: "approval_requested",
            approvalId,
            callId: req.callId,
            name: req.toolName,
            risk: req.risk,
            cwd,
            summary: req.summary ?? approvalSummary(req.toolName, req.arguments),
            arguments: req.arguments,
            ...(req.parentId !== undefined ? { parentId: req.parentId } : {}),
          }),
        (approvalId) => c.emit({ ...ref, type: "approval_resolved", approvalId, callId: req.callId, approved: false, cancelled: true }),
      );
    },
  };
  try {
    const images = [...(await loadImages(opts.attachments ?? [])), ...(opts.images ?? [])];
    const now = c.cfg();
    return await c.deps.runner.runTurn({
      turnId: run.turnId,
      sessionId: c.sessionId,
      ...(now.autoApprove === true ? { autoApprove: true } : {}),
      writer: a.lease.writer,
      history: a.history,
      cwd,
      prompt,
      ...(images.length > 0 ? { images } : {}),
      ...(opts.attachments !== undefined && opts.attachments.length > 0 ? { attachments: opts.attachments } : {}),
      signal: run.ctl.signal,
      sink,
      approval,
      noTools,
      ...(now.selection !== undefined ? { selection: now.selection } : {}),
      ...(now.mcpServers !== undefined ? { mcpServers: now.mcpServers } : {}),
      ...(now.channel !== undefined ? { channel: now.channel } : {}),
      ...(now.delegationDepth !== undefined ? { delegationDepth: now.delegationDepth } : {}),
      ...(now.workspace !== undefined ? { workspace: now.workspace } : {}),
      steer: () =>
        (run.ctl.signal.aborted ? [] : run.steering.splice(0)).map((m) => {
          c.emit({ ...ref, type: "steered", text: m.text, ...(m.ref !== undefined ? { ref: m.ref } : {}) });
          return m.text;
        }),
    });
  } catch {
    return { status: run.ctl.signal.aborted ? "cancelled" : "failed", assistantText: "", reason: "internal", usage: { ...EMPTY_USAGE } };
  }
}
