/**
 * `session/prompt` and `session/cancel`.
 *
 * Contracts:
 * - One prompt turn per session at a time: a second `session/prompt` while one runs is refused at once with
 *   `-32600` (Berth does not queue ACP prompts; clients wait for the stop reason). A turn another Berth process runs
 *   in the same session (it holds the session's writer lease) is also `-32600`, with a message saying so.
 * - The answer comes after every update of the turn was written and the runtime has ended the turn (its writer
 *   lease released, the session idle): `end_turn`, `cancelled` (after `session/cancel`
 *   or `$/cancel_request` of the prompt), `max_turn_requests` (Berth's step limit). A turn that failed otherwise
 *   is an error: `-32000` for a missing or rejected credential, else `-32603` with the runtime's fixed message.
 * - `session/cancel` for a session with no running turn does nothing.
 */
import { randomUUID } from "node:crypto";
import { RequestError, type AgentApp, type PromptResponse } from "@agentclientprotocol/sdk";
import type { AcpConnection } from "./connection.js";
import { handle } from "./handle.js";
import { ACP_ERRORS } from "./errors.js";
import { toBerthPrompt } from "./prompt-content.js";

export function registerPrompt(app: AgentApp, conn: AcpConnection): void {
  handle(app, conn.log, "session/prompt", async ({ params, signal }): Promise<PromptResponse> => {
    const s = conn.get(params.sessionId);
    const prompt = toBerthPrompt(params.prompt);
    const turnId = randomUUID();
    const ended = s.expectEnd(turnId);
    s.applyPending();
    const runningHere = s.rt.busy;
    const started = await s.rt.startTurn(prompt.text, { turnId, ...(prompt.images.length > 0 ? { images: prompt.images.map((i) => ({ type: "image" as const, ...i })) } : {}) });
    if (!started.ok) {
      s.forgetEnd(turnId);
      if (started.error === "busy") throw runningHere ? ACP_ERRORS.promptRunning() : ACP_ERRORS.sessionBusy();
      if (started.error === "unavailable" || started.error === "invalid_id") throw ACP_ERRORS.sessionMissing(s.id);
      if (started.error === "history_incomplete") throw ACP_ERRORS.historyTooLarge();
      throw ACP_ERRORS.storage();
    }
    const onAbort = (): void => void s.rt.cancel(turnId);
    signal.addEventListener("abort", onAbort, { once: true });
    let end;
    try {
      end = await ended;
      // The runtime ends the turn's writer lease after its terminal event. Answer once it has: the answer tells the
      // client the session is idle, so a mode or config change sent on it applies at once and a prompt sent on it
      // never meets the ending turn.
      await started.done.catch(() => undefined);
      s.applyPending();
      await s.flush();
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
    if ("stopReason" in end) return { stopReason: end.stopReason };
    if (end.failed.reason === "credential") throw ACP_ERRORS.authRequired();
    // The runtime's message names the cause and, where there is one, the fix (a provider, not Berth, failed here:
    // no "Internal error" wording, although JSON-RPC has only -32603 for it).
    throw new RequestError(-32603, `the turn failed (${end.failed.code}): ${end.failed.message}`);
  });

  app.onNotification("session/cancel", ({ params }) => {
    conn.find(params.sessionId)?.rt.cancel();
  });
}
