/**
 * `session/prompt` and `session/cancel`.
 *
 * Contracts:
 * - One prompt turn per session at a time: a second `session/prompt` while one runs is refused at once with
 *   `-32600` (Berth does not queue ACP prompts; clients wait for the stop reason). "Runs" is the connection's claim
 *   (`AcpConnection.claim`), taken before the handler's first await and held until its answer is ready, so two
 *   prompts in one write run the first and refuse the second, and a prompt sent before the previous answer is
 *   refused even while that turn is ending. A prompt sent behind a `session/load` or `session/resume` of its session
 *   waits for that answer, then runs (`AcpConnection.ready`); a prompt whose handler meets a load's claim anyway is
 *   `-32600`.
 *   A turn another Berth process runs in the same session (it holds the session's writer lease) is also `-32600`,
 *   with a message saying so, and so is a prompt while `MAX_RUNNING_TURNS` turns run on this process.
 * - The answer comes after every update of the turn was written and the runtime has ended the turn (its writer
 *   lease released, the session idle): `end_turn`, `cancelled` (after `session/cancel`
 *   or `$/cancel_request` of the prompt), `max_turn_requests` (Berth's step limit). A turn that failed otherwise
 *   is an error: `-32000` for a missing or rejected credential, else `-32603` with the runtime's fixed message.
 * - A cancel (`session/cancel` or `$/cancel_request` of the prompt) read after the prompt, even before the runtime
 *   has started its turn (pipelined in the prompt's own write, or while the prompt waits for an open), ends that turn
 *   `cancelled`; a `session/cancel` read before the prompt never does (`AcpConnection.order`).
 * - `session/cancel` for a session with no running or starting turn does nothing.
 * - The end of the client's input cancels like a `session/cancel` of every session read after everything else: a
 *   running turn, and a prompt read before the end whose turn starts after it, end `cancelled` (connection.ts).
 */
import { randomUUID } from "node:crypto";
import { RequestError, type AgentApp, type PromptResponse } from "@agentclientprotocol/sdk";
import type { AcpConnection } from "./connection.js";
import { handle } from "./handle.js";
import { ACP_ERRORS } from "./errors.js";
import { toBerthPrompt, type BerthPrompt } from "./prompt-content.js";
import type { AcpSession, TurnEnd } from "./session.js";

/** Runs one turn of `s` to its end (the session is claimed for it); answers when the session is idle again. */
async function runTurn(s: AcpSession, prompt: BerthPrompt, signal: AbortSignal, cancelledBefore: () => boolean): Promise<TurnEnd> {
  const turnId = randomUUID();
  const ended = s.expectEnd(turnId);
  s.applyPending();
  // The runtime admits the turn asynchronously (writer lease, history); a session/cancel read meanwhile finds no
  // running turn there, so it is noted here and applied once the turn exists.
  const starting = s.beginStart();
  let started;
  try {
    started = await s.rt.startTurn(prompt.text, { turnId, ...(prompt.images.length > 0 ? { images: prompt.images.map((i) => ({ type: "image" as const, ...i })) } : {}) });
  } finally {
    s.endStart();
  }
  if (!started.ok) {
    s.forgetEnd(turnId);
    // Not a turn of this connection (that one holds the claim): another process holds the session's writer lease.
    if (started.error === "busy") throw ACP_ERRORS.sessionBusy();
    if (started.error === "unavailable" || started.error === "invalid_id") throw ACP_ERRORS.sessionMissing(s.id);
    if (started.error === "history_incomplete") throw ACP_ERRORS.historyTooLarge();
    // The store's per-process bound on writer leases (one per running turn), not a storage fault.
    if (started.error === "limit") throw ACP_ERRORS.tooManyTurns();
    throw ACP_ERRORS.storage();
  }
  const onAbort = (): void => void s.rt.cancel(turnId);
  signal.addEventListener("abort", onAbort, { once: true });
  // Cancelled before it started (session/cancel read after the prompt, or $/cancel_request of this prompt, whose abort
  // already fired, or the client's input ended: that cancels every prompt read before it).
  if (starting.cancelled || signal.aborted || cancelledBefore()) onAbort();
  try {
    const end = await ended;
    // The runtime ends the turn's writer lease after its terminal event. Answer once it has: the answer tells the
    // client the session is idle, so a mode or config change sent on it applies at once and a prompt sent on it
    // never meets the ending turn.
    await started.done.catch(() => undefined);
    s.applyPending();
    await s.flush();
    return end;
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

export function registerPrompt(app: AgentApp, conn: AcpConnection): void {
  handle(app, conn.log, "session/prompt", async ({ params, signal, requestId }): Promise<PromptResponse> => {
    const mark = conn.order.markOf(requestId);
    // At once unless a session/load or session/resume of this session was read before this prompt and is unanswered.
    const ready = conn.ready(params.sessionId, requestId);
    let prompt;
    try {
      prompt = toBerthPrompt(params.prompt);
    } catch (e) {
      if (ready instanceof Promise) ready.catch(() => undefined);
      throw e;
    }
    const s = ready instanceof Promise ? await ready : ready;
    const claim = conn.claim(s.id, "prompt");
    if ("busy" in claim) throw claim.busy === "prompt" ? ACP_ERRORS.promptRunning() : ACP_ERRORS.loading();
    let end;
    try {
      end = await runTurn(s, prompt, signal, () => conn.inputEnded || conn.order.cancelledSince(s.id, mark));
    } finally {
      claim.release();
    }
    if ("stopReason" in end) return { stopReason: end.stopReason };
    if (end.failed.reason === "credential") throw ACP_ERRORS.authRequired();
    // The runtime's message names the cause and, where there is one, the fix (a provider, not Berth, failed here:
    // no "Internal error" wording, although JSON-RPC has only -32603 for it).
    throw new RequestError(-32603, `the turn failed (${end.failed.code}): ${end.failed.message}`);
  });

  // Applied as it is read, in read order (`AcpConnection.order`): the SDK can reach this handler after that of a
  // prompt sent behind the cancel, which must not be cancelled by it.
  app.onNotification("session/cancel", () => undefined);
}
