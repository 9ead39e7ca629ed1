/**
 * What a chat bridge needs from an SCV-style session host, and nothing more.
 *
 * Contract (the SCV v3 client side, see docs/channels.md):
 * - `startSession` maps to `session.start` with `cwd`, `channel`, `no_tools` and `auto_approve`.
 * - `runTurn` maps to `turn.start` (prompt plus attachments) and resolves once the turn is terminal, with the
 *   FINAL assistant message only (never deltas, tool output or progress) and the files the model attached with
 *   `chat_attach` (read from the tool's completed output). It never rejects for a turn that ran and failed: that is
 *   `terminal: "failed"`. It rejects only when the host itself is unreachable.
 * - Aborting `signal` maps to `turn.cancel`; the promise then resolves with `terminal: "cancelled"`.
 */

export interface ChatSessionOptions {
  cwd: string;
  /** `WeChat`, `Feishu` or `Lark`. */
  channel: string;
  noTools: boolean;
  autoApprove: boolean;
}

export interface TurnAttachment {
  kind: "image" | "file" | "audio" | "video";
  path: string;
  name: string;
  mime: string;
  size: number;
}

export interface OutboundFile {
  /** Private copy in the media outbox; the bridge deletes it once sent. */
  path: string;
  name: string;
  size: number;
  caption: string | null;
}

export interface TurnOutcome {
  terminal: "completed" | "failed" | "cancelled";
  /** The final assistant message, or null when the turn produced none. */
  text: string | null;
  files: OutboundFile[];
}

export interface ChatSessionDriver {
  startSession(opts: ChatSessionOptions): Promise<string>;
  runTurn(sessionId: string, prompt: string, attachments: TurnAttachment[], signal: AbortSignal): Promise<TurnOutcome>;
  /** Releases a session the bridge no longer uses (idle timeout, shutdown). Never throws. */
  closeSession(sessionId: string): Promise<void>;
}
