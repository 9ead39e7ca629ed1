/**
 * `berth chat -p PROMPT [--json] [--session ID]`: one turn, then exit.
 * Contract: stdout gets only the final answer (the terminal's authoritative `assistant_text`) or, with `--json`, one
 * JSON object per turn event (`turn.started`, `turn.assistant_delta`, `turn.activity`, `turn.terminal`).
 * Exit codes: 0 completed; 1 failed or service/protocol error; 130 cancelled (Ctrl-C); 2 usage.
 * Diagnostics go to stderr as plain sentences.
 */
import type { ServiceHandle } from "../../client/app-service/index.js";
import { describeError, startService } from "./common.js";
import { NO_PROVIDER_HELP } from "./render.js";

export interface OneShotOptions {
  prompt: string;
  json: boolean;
  sessionId: string | null;
}

export async function runOneShot(o: OneShotOptions): Promise<number> {
  const out = (s: string): boolean => process.stdout.write(s);
  let handle: ServiceHandle | null = null;
  let interrupted = 0;
  let cancel: (() => void) | null = null;
  const onSigint = (): void => {
    interrupted++;
    if (interrupted > 1 || cancel === null) process.exit(130);
    cancel();
  };
  process.on("SIGINT", onSigint);
  try {
    handle = await startService();
    const client = handle.client;
    const st = await client.status();
    if (!st.provider_auth_ready) {
      process.stderr.write(`berth chat: ${NO_PROVIDER_HELP}`);
      return 1;
    }
    const turn = await client.startTurn({ prompt: o.prompt, sessionId: o.sessionId });
    cancel = () => void turn.cancel().catch(() => {});
    if (interrupted > 0) cancel();
    if (o.json) out(JSON.stringify({ event: "turn.started", turn_id: turn.turnId, session_id: turn.sessionId, sequence: 0 }) + "\n");
    for await (const u of turn) {
      if (!o.json) continue;
      if (u.type === "delta") out(JSON.stringify({ event: "turn.assistant_delta", turn_id: turn.turnId, sequence: u.sequence, text: u.text }) + "\n");
      else out(JSON.stringify({ event: "turn.activity", turn_id: turn.turnId, sequence: u.sequence, activity: u.activity }) + "\n");
    }
    const t = await turn.result;
    if (o.json) out(JSON.stringify({ event: "turn.terminal", ...t }) + "\n");
    else if (t.assistant_text.length > 0) out(t.assistant_text.endsWith("\n") ? t.assistant_text : t.assistant_text + "\n");
    if (t.status === "completed") return 0;
    process.stderr.write(`berth chat: the turn ${t.status === "cancelled" ? "was cancelled" : "failed"} (session ${t.session_id})\n`);
    return t.status === "cancelled" ? 130 : 1;
  } catch (err) {
    process.stderr.write(`berth chat: ${describeError(err)}\n`);
    return 1;
  } finally {
    process.off("SIGINT", onSigint);
    await handle?.close();
  }
}
