/**
 * A loopback stand-in for an SCV session host, used until the SCV server (branch `scv`) can be driven for real.
 * It implements the bridge's `ChatSessionDriver` contract literally: records each `session.start` (cwd, channel,
 * no_tools, auto_approve) and `turn.start` (prompt, attachments), answers with a final message from `respond`
 * (default `echo: <prompt>`), and can hold a turn open until released or cancelled.
 */
import type { ChatSessionDriver, ChatSessionOptions, OutboundFile, TurnAttachment, TurnOutcome } from "../../src/channels/common/driver.js";

export interface RecordedTurn {
  sessionId: string;
  prompt: string;
  attachments: TurnAttachment[];
}

export type Respond = (turn: RecordedTurn, session: ChatSessionOptions) => Promise<{ text: string | null; files?: OutboundFile[]; terminal?: TurnOutcome["terminal"] }>;

export class FakeSessionDriver implements ChatSessionDriver {
  readonly sessions = new Map<string, ChatSessionOptions>();
  readonly turns: RecordedTurn[] = [];
  readonly closed: string[] = [];
  private waiters: Array<() => void> = [];
  respond: Respond = (t) => Promise.resolve({ text: `echo: ${t.prompt}` });

  startSession(opts: ChatSessionOptions): Promise<string> {
    const id = `s${this.sessions.size + 1}`;
    this.sessions.set(id, opts);
    return Promise.resolve(id);
  }

  async runTurn(sessionId: string, prompt: string, attachments: TurnAttachment[], signal: AbortSignal): Promise<TurnOutcome> {
    const turn = { sessionId, prompt, attachments };
    this.turns.push(turn);
    for (const w of this.waiters.splice(0)) w();
    const cancelled = new Promise<TurnOutcome>((resolve) => {
      if (signal.aborted) resolve({ terminal: "cancelled", text: null, files: [] });
      signal.addEventListener("abort", () => resolve({ terminal: "cancelled", text: null, files: [] }), { once: true });
    });
    const done = this.respond(turn, this.sessions.get(sessionId)!).then((r) => ({ terminal: r.terminal ?? "completed", text: r.text, files: r.files ?? [] }));
    return Promise.race([done, cancelled]);
  }

  closeSession(sessionId: string): Promise<void> {
    this.closed.push(sessionId);
    return Promise.resolve();
  }

  async waitTurns(n: number): Promise<RecordedTurn[]> {
    while (this.turns.length < n) await new Promise<void>((r) => this.waiters.push(r));
    return this.turns;
  }
}
