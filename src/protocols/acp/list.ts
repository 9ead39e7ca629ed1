/**
 * `session/list`: every stored Berth session (whichever door created it), ordered by session ID, optionally only
 * those whose working directory is `cwd`.
 *
 * Contracts:
 * - Pages hold at most `LIST_PAGE_SIZE` examined sessions; `nextCursor` is present exactly when more remain. The
 *   cursor is opaque (base64url of the last examined ID); one Berth did not issue is `-32602`.
 * - Titles are the same sanitized, secret-redacted first-prompt titles app-service `session.list` shows.
 * - Unreadable session files are skipped (the store counts them); a store that cannot be read is `-32603`.
 */
import type { AgentApp, ListSessionsResponse } from "@agentclientprotocol/sdk";
import type { SessionHub } from "../../runtime/session/index.js";
import { isValidSessionId, storageProblemOf } from "../../store/sessions/index.js";
import { errorLabel, handle } from "./handle.js";
import { ACP_ERRORS } from "./errors.js";

export const LIST_PAGE_SIZE = 50;

const CURSOR_PREFIX = "berth1:";

function encodeCursor(after: string): string {
  return Buffer.from(CURSOR_PREFIX + after, "utf8").toString("base64url");
}

function decodeCursor(cursor: string): string | null {
  if (cursor.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(cursor)) return null;
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  if (!text.startsWith(CURSOR_PREFIX)) return null;
  const id = text.slice(CURSOR_PREFIX.length);
  return isValidSessionId(id) ? id : null;
}

export function registerList(app: AgentApp, hub: SessionHub, log: (line: string) => void): void {
  handle(app, log, "session/list", async ({ params }): Promise<ListSessionsResponse> => {
    let after: string | null = null;
    if (params.cursor !== undefined && params.cursor !== null) {
      after = decodeCursor(params.cursor);
      if (after === null) throw ACP_ERRORS.badCursor();
    }
    if (params.cwd !== undefined && params.cwd !== null && !params.cwd.startsWith("/")) throw ACP_ERRORS.relativeCwd();
    let page;
    try {
      page = await hub.list(after, LIST_PAGE_SIZE);
    } catch (e) {
      const problem = storageProblemOf(e);
      log(`berth acp: cannot list sessions (${problem ?? errorLabel(e)})`);
      throw ACP_ERRORS.storage(problem);
    }
    const sessions = page.sessions
      .filter((e) => params.cwd === undefined || params.cwd === null || e.cwd === params.cwd)
      .map((e) => ({ sessionId: e.sessionId, cwd: e.cwd, ...(e.title !== null ? { title: e.title } : {}), updatedAt: new Date(e.updatedAtMs).toISOString() }));
    return { sessions, ...(page.truncated && page.nextAfter !== null ? { nextCursor: encodeCursor(page.nextAfter) } : {}) };
  });
}
