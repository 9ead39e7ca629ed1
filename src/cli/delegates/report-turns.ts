/**
 * Runs the report turns a `JobBook` asks for (jobs.ts `ReportFn`) on the sessions' runtimes, and tells it how each
 * ended.
 *
 * Contract:
 * - A request waits until the session is idle (no turn runs and nothing would be dequeued: its queue is empty, or it
 *   is paused); with `afterTurn`, first until a turn of the session that is not a report (`origin.kind` other than
 *   `background`) ended. Then it builds the report (null: nothing to report) and queues it as a server turn with
 *   request ID `background:<n>`, numbered per process: on a paused session it waits in the queue behind what the user
 *   queued. Its turn is known by its queue entry's ID (a client's own prompt may carry the same request ID).
 * - The report's `seen` is called once its turn's first provider response came in full (`assistant_completed`: the
 *   model has seen the report); its `ended` is called once: `true` when its turn completed; `false` when it failed or
 *   was cancelled, or its queued entry went without running (removed, the session cleared or closed) or as a report
 *   (a client rewrote its prompt: it runs as the client's, without `origin`).
 * - While a report waits in the queue, its `withdraw` removes its entry (`queue_removed`, so `ended(false)`).
 */
import type { QueueEntry, QueueResult, SessionEvent, SessionListener, TurnOrigin } from "../../runtime/session/types.js";
import type { ReportFn, ReportTurn } from "./jobs.js";

/** What a report needs of a session's runtime. */
export interface ReportRuntime {
  idle(): Promise<void>;
  subscribe(listener: SessionListener): () => void;
  startServerTurn(prompt: string, origin: TurnOrigin, opts: { submitter: string }): { queue_id: string };
  snapshot(): QueueEntry[];
  removeQueued(queueId: string, revision: number): QueueResult;
}

const TERMINAL = new Set<SessionEvent["type"]>(["turn_completed", "turn_failed", "turn_cancelled"]);

/** The `ReportFn` running reports on `runtime(sessionId)` (undefined: the session is not open; nothing is reported). */
export function reportTurns(runtime: (sessionId: string) => ReportRuntime | undefined): ReportFn {
  let reports = 0;
  const run = (rt: ReportRuntime, r: ReportTurn): void => {
    const submitter = `background:${++reports}`;
    let turnId: string | null = null;
    let queueId: string | null = null;
    const end = (completed: boolean): void => {
      off();
      r.ended(completed);
    };
    const off = rt.subscribe((e) => {
      // Its own queue entry, not its request ID: a client may send a `turn.start` whose request_id is `background:<n>`.
      if (e.type === "turn_started" && queueId !== null && e.queueId === queueId) turnId = e.turnId;
      else if (turnId !== null) {
        if (e.type === "assistant_completed" && e.turnId === turnId) r.seen();
        else if (TERMINAL.has(e.type) && "turnId" in e && e.turnId === turnId) end(e.type === "turn_completed");
      } else if (((e.type === "queue_removed" || e.type === "queue_updated") && (e.type === "queue_removed" ? e.queueId : e.entry.queue_id) === queueId) || e.type === "session_cleared")
        end(false); // dropped, or rewritten by a client (it runs as the client's prompt: queue.ts)
    });
    try {
      queueId = rt.startServerTurn(r.prompt, { kind: "background", jobs: r.jobs }, { submitter }).queue_id;
      r.withdraw = () => {
        const q = turnId === null ? rt.snapshot().find((e) => e.queue_id === queueId) : undefined;
        if (q !== undefined) rt.removeQueued(q.queue_id, q.revision);
      };
    } catch {
      end(false);
    }
  };
  const whenIdle = (sessionId: string, build: () => ReportTurn | null): void => {
    const rt = runtime(sessionId);
    if (rt === undefined) return;
    void rt.idle().then(() => {
      const r = build();
      if (r !== null) run(rt, r);
    });
  };
  return (sessionId, build, afterTurn) => {
    if (afterTurn !== true) return whenIdle(sessionId, build);
    const rt = runtime(sessionId);
    if (rt === undefined) return;
    const off = rt.subscribe((e) => {
      if (!TERMINAL.has(e.type) || ("origin" in e && e.origin?.kind === "background")) return;
      off();
      whenIdle(sessionId, build);
    });
  };
}
