/**
 * Turn admission for a `SessionRuntime`: the session's writer lease and a complete bounded history (trimmed when
 * past its bounds, per `SessionDeps.historyPolicy`), and the lease-held write of `clear()`.
 */
import { admissionError, type SessionDeps } from "./deps.js";
import { DEFAULT_WINDOW, type History, type SessionManager, type TurnLease } from "../../store/sessions/index.js";
import { trimHistory } from "./trim.js";
import type { AdmissionError } from "./types.js";

export interface Admitted {
  lease: TurnLease;
  history: History | null;
  /** The turn's controller, made before admission so a close requested meanwhile cancels the turn. */
  ctl: AbortController;
  /** Admission trimmed the history (trim.ts): reported after `turn_started`. */
  trimmed?: { removedMessages: number; historyBytes: number };
}

/** Takes the writer lease of session `sessionId` and reads its history; the lease is ended again on refusal. */
export async function admit(deps: SessionDeps, sessionId: string, cwd: string): Promise<Admitted | AdmissionError> {
  const ctl = new AbortController();
  let lease: TurnLease;
  try {
    lease = await deps.manager.beginTurn({ sessionId, cwd, onCloseRequested: () => ctl.abort() });
  } catch (e) {
    return admissionError(e);
  }
  if (lease.created) return { lease, history: null, ctl };
  try {
    const b = deps.historyBounds ?? { maxBytes: DEFAULT_WINDOW.maxBytes, maxRecords: DEFAULT_WINDOW.maxRecords };
    // With the lease's writer: the history read last turn is kept in memory while the file is as it left it.
    const history = await deps.manager.store.readHistory(sessionId, b, lease.writer);
    if (!history.complete) {
      // Past its bounds: the oldest turns leave the model context (a checkpoint); see trim.ts.
      const t = deps.historyPolicy === "refuse" ? null : await trimHistory(history, b, lease.writer).catch(() => null);
      if (t === null) {
        await lease.end();
        return "history_incomplete";
      }
      return { lease, history: t.history, ctl, trimmed: { removedMessages: t.removedMessages, historyBytes: t.historyBytes } };
    }
    return { lease, history, ctl };
  } catch (e) {
    await lease.end();
    return admissionError(e);
  }
}

/**
 * Under the session's writer lease, appends an empty checkpoint covering every record (the model context starts
 * empty; the file keeps everything). Null when done, else why not.
 */
export async function writeEmptyCheckpoint(manager: SessionManager, sessionId: string, cwd: string): Promise<AdmissionError | null> {
  let lease: TurnLease;
  try {
    lease = await manager.beginTurn({ sessionId, cwd, onCloseRequested: () => undefined });
  } catch (e) {
    return admissionError(e);
  }
  try {
    const cutoff = lease.writer.peekNextSeq - 1;
    if (cutoff >= 0) await lease.writer.append({ kind: "checkpoint", summary: "", cutoff_seq: cutoff }, { sync: true });
  } catch {
    await lease.end().catch(() => undefined);
    return "unavailable";
  }
  await lease.end().catch(() => undefined);
  return null;
}
